#include "serve/api_error.h"

#include "serve/json_text.h"

namespace kvlm::serve {

ApiError bad_request(std::string param, std::string message, std::string code) {
  ApiError error;
  error.status = 400;
  error.param = std::move(param);
  error.message = std::move(message);
  error.code = std::move(code);
  return error;
}

std::string error_body(const ApiError& error) {
  auto or_null = [](const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); };
  const Json body = {{"error",
                      {{"message", error.message},
                       {"type", error.type},
                       {"param", or_null(error.param)},
                       {"code", or_null(error.code)}}}};
  return json_text(body);
}

std::string error_body_for_status(int status) {
  ApiError error;
  error.status = status;
  switch (status) {
    case 404:
      error.message =
          "unknown path; kvlm serves GET /health, /metrics, /v1/models and POST "
          "/v1/completions, /v1/chat/completions, /tokenize, /detokenize";
      error.code = "not_found";
      break;
    case 413:
      error.message = "request body too large (see kvlm serve --max-body)";
      error.code = "request_too_large";
      break;
    case 500:
      error.type = "server_error";
      error.message = "internal error while handling the request";
      break;
    default:
      error.message = "HTTP error " + std::to_string(status);
      if (status >= 500) error.type = "server_error";
  }
  return error_body(error);
}

}  // namespace kvlm::serve
