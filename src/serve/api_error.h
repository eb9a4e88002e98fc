// ApiError: an HTTP error in OpenAI's shape, {"error":{"message","type","param","code"}}, and
// ApiResult<T>, a value or such an error: what the request parsers and handlers return.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace kvlm::serve {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;    // the request field at fault; "" is written as null
  std::string code;     // a machine-readable reason; "" is written as null
  int retry_after = 0;  // seconds, sent as Retry-After when > 0 (503: queue full)
};

// 400 invalid_request_error naming `param`.
ApiError bad_request(std::string param, std::string message, std::string code = "");

// The response body: {"error":{"message":..., "type":..., "param":..., "code":...}}.
std::string error_body(const ApiError& error);

// The body for a status the HTTP library raises itself (404 unknown path, 413 too large, ...).
std::string error_body_for_status(int status);

template <typename T>
class ApiResult {
 public:
  ApiResult(T value) : state_(std::move(value)) {}         // NOLINT: implicit by design
  ApiResult(ApiError error) : state_(std::move(error)) {}  // NOLINT: implicit by design
  bool is_ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return is_ok(); }
  T& value() { return std::get<T>(state_); }
  const T& value() const { return std::get<T>(state_); }
  const ApiError& error() const { return std::get<ApiError>(state_); }

 private:
  std::variant<T, ApiError> state_;
};

}  // namespace kvlm::serve
