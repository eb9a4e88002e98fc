// Status and Result<T>: how kvlm's library code reports failure. Library code never prints
// or exits; it returns an error whose message names the file, field or flag, what was
// expected and what was found. Only the command-line program turns it into a message and a
// non-zero exit.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace kvlm {

class Status {
 public:
  Status() = default;  // success
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }
  const Status& status() const { return *this; }  // lets KVLM_RETURN_IF_ERROR take either

 private:
  bool failed_ = false;
  std::string message_;
};

// Either a value or an error Status (C++20 has no std::expected yet).
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}       // NOLINT: implicit by design
  Result(Status error) : state_(std::move(error)) {}  // NOLINT: must be an error status

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(state_);
  }
  const std::string& message() const { return status().message(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace kvlm

// Propagate an error from an expression returning Status or Result<T>.
#define KVLM_RETURN_IF_ERROR(expr)                           \
  do {                                                       \
    auto&& kvlm_status_ = (expr);                            \
    if (!kvlm_status_.is_ok()) return kvlm_status_.status(); \
  } while (0)

// Unwrap a Result<T> into `lhs` (a declaration or an lvalue), or propagate its error:
//   KVLM_ASSIGN_OR_RETURN(auto model, load_model(path, options));
#define KVLM_ASSIGN_OR_RETURN(lhs, expr) \
  KVLM_ASSIGN_OR_RETURN_IMPL_(KVLM_STATUS_CONCAT_(kvlm_result_, __LINE__), lhs, expr)
#define KVLM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
#define KVLM_STATUS_CONCAT_(a, b) KVLM_STATUS_CONCAT_INNER_(a, b)
#define KVLM_STATUS_CONCAT_INNER_(a, b) a##b
