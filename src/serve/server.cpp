#include "serve/server.h"

#include <algorithm>
#include <ctime>

#include "serve/json_text.h"
#include "tokenizer/tokenizer.h"

namespace kvlm::serve {

namespace {

HttpResponse json_response(int status, const Json& body) {
  HttpResponse r;
  r.status = status;
  r.body = json_text(body);
  return r;
}

ApiError unavailable(const std::string& message, const std::string& code) {
  ApiError e;
  e.status = 503;
  e.type = "server_error";
  e.message = message;
  e.code = code;
  e.retry_after = 1;
  return e;
}

// The JSON object body of /tokenize and /detokenize, or a 400.
ApiResult<Json> object_body(const HttpRequest& request) {
  Json doc = Json::parse(request.body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return bad_request("", "the request body is not a JSON object", "invalid_json");
  }
  return doc;
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)) {
  HttpOptions http;
  http.host = options_.host;
  http.port = options_.port;
  // A connection holds its thread for as long as it streams: room for every request that can
  // be running or waiting, plus some to answer the rest (503, /health, /metrics).
  http.threads = options_.max_running + options_.max_queue + 16;
  http.max_body_bytes = options_.max_body_bytes;
  http.error_body = error_body_for_status;
  http_ = std::make_unique<HttpServer>(std::move(http));
  created_ = static_cast<int64_t>(std::time(nullptr));

  auto add = [this](const char* method, const char* path, HttpHandler handler) {
    http_->route(method, path,
                 [this, handler](const HttpRequest& r) { return dispatch(r, handler); });
  };
  add("GET", "/health", [this](const HttpRequest&) { return health(); });
  add("GET", "/v1/models", [this](const HttpRequest&) { return models(); });
  add("GET", "/metrics", [this](const HttpRequest&) { return metrics(); });
  add("POST", "/tokenize", [this](const HttpRequest& r) { return tokenize(r); });
  add("POST", "/detokenize", [this](const HttpRequest& r) { return detokenize(r); });
  add("POST", "/v1/completions",
      [this](const HttpRequest& r) { return handle_generation(ctx_, r, false); });
  add("POST", "/v1/chat/completions",
      [this](const HttpRequest& r) { return handle_generation(ctx_, r, true); });
}

Server::~Server() {
  shutdown();
}

Status Server::bind() {
  return http_->bind();
}

void Server::start() {
  http_thread_ = std::thread([this] { http_->run(); });
}

Status Server::attach(std::shared_ptr<LoadedModel> model, const EngineOptions& engine_options,
                      const ChatTemplate& chat) {
  KVLM_ASSIGN_OR_RETURN(auto engine, Engine::create(model, engine_options));
  engine_ = std::move(engine);
  loop_ = std::make_unique<EngineLoop>(*engine_, options_.max_running + options_.max_queue);
  ctx_.model = model;
  ctx_.loop = loop_.get();
  ctx_.model_name = options_.model_name;
  ctx_.kv_window = engine_options.kv_window;
  ctx_.chat_template = chat;
  ctx_.log = options_.log;
  ctx_.next_id = &next_id_;
  if (chat.kind != ChatTemplateKind::kNone && model->tokenizer() != nullptr) {
    // Generation stops at the end of the assistant's turn: by id when it is one token.
    const std::string end = end_of_turn(chat);
    const std::vector<int32_t> ids = model->tokenizer()->encode(end, true);
    if (ids.size() == 1) {
      ctx_.chat_stop_ids = ids;
    } else {
      ctx_.chat_stop_text = {end};
    }
  }
  loop_->start();
  ready_ = true;
  return Status::ok();
}

void Server::shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mutex_);
  if (stopping_.exchange(true)) return;
  if (http_thread_.joinable()) http_->stop();  // no new connections
  // Cancels open requests: their streams get a final chunk and [DONE], whole answers return.
  if (loop_) loop_->stop();
  if (http_thread_.joinable()) http_thread_.join();  // every connection has ended
}

HttpResponse Server::dispatch(const HttpRequest& request, const HttpHandler& handler) const {
  if (request.path == "/health") return handler(request);
  if (!options_.api_key.empty()) {
    const std::string auth = request.header("Authorization");
    const std::string expected = "Bearer " + options_.api_key;
    if (auth != expected) {
      ApiError e;
      e.status = 401;
      e.type = "invalid_request_error";
      e.code = "invalid_api_key";
      e.message = auth.empty() ? "missing API key: send the header 'Authorization: Bearer KEY'"
                               : "incorrect API key in the Authorization header";
      return error_response(e);
    }
  }
  if (!ready_) return error_response(unavailable("the model is loading", "loading"));
  if (stopping_) return error_response(unavailable("the server is shutting down", "shutting_down"));
  return handler(request);
}

HttpResponse Server::health() const {
  if (stopping_) return json_response(503, {{"status", "shutting down"}});
  if (!ready_) return json_response(503, {{"status", "loading"}});
  return json_response(200, {{"status", "ok"}});
}

HttpResponse Server::models() const {
  const Json model = {{"id", ctx_.model_name},
                      {"object", "model"},
                      {"created", created_},
                      {"owned_by", "kvlm"},
                      {"max_model_len", ctx_.model->n_ctx()}};
  return json_response(200, {{"object", "list"}, {"data", Json::array({model})}});
}

// {"content": "text"} (llama-server) or {"prompt": "text"} (vLLM); "add_special" (default true)
// puts BOS first as /v1/completions does, so "count" is that endpoint's prompt_tokens.
HttpResponse Server::tokenize(const HttpRequest& request) const {
  ApiResult<Json> doc = object_body(request);
  if (!doc) return error_response(doc.error());
  const Json& d = doc.value();
  const char* field = d.contains("content") ? "content" : "prompt";
  if (!d.contains(field) || !d[field].is_string()) {
    return error_response(bad_request(field, "content: expected a string"));
  }
  bool add_special = true;
  if (d.contains("add_special")) {
    if (!d["add_special"].is_boolean()) {
      return error_response(bad_request("add_special", "add_special: expected true or false"));
    }
    add_special = d["add_special"].get<bool>();
  }
  const Tokenizer* tok = ctx_.model->tokenizer();
  if (tok == nullptr) return error_response(bad_request(field, "this model has no tokenizer"));
  const std::string text = d[field].get<std::string>();
  std::vector<int32_t> ids;
  if (add_special) {
    Result<std::vector<int32_t>> encoded = ctx_.model->encode_prompt(text, true);
    if (!encoded) return error_response(bad_request(field, encoded.message()));
    ids = std::move(encoded.value());
  } else {
    ids = tok->encode(text, true);
  }
  return json_response(
      200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx_.model->n_ctx()}});
}

// {"tokens": [ids]} -> {"content": "text"}
HttpResponse Server::detokenize(const HttpRequest& request) const {
  ApiResult<Json> doc = object_body(request);
  if (!doc) return error_response(doc.error());
  const Json& d = doc.value();
  if (!d.contains("tokens") || !d["tokens"].is_array()) {
    return error_response(bad_request("tokens", "tokens: expected an array of token ids"));
  }
  const Tokenizer* tok = ctx_.model->tokenizer();
  if (tok == nullptr) return error_response(bad_request("tokens", "this model has no tokenizer"));
  std::vector<int32_t> ids;
  for (const Json& id : d["tokens"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= tok->vocab_size()) {
      return error_response(bad_request("tokens",
                                        "tokens: expected ids in [0, " +
                                            std::to_string(tok->vocab_size()) + "), found " +
                                            describe(id),
                                        "invalid_token_id"));
    }
    ids.push_back(id.get<int32_t>());
  }
  Result<std::string> text = tok->decode(ids);
  if (!text) return error_response(bad_request("tokens", text.message()));
  return json_response(200, {{"content", text.value()}});
}

EngineStats Server::engine_stats() const {
  return loop_ ? loop_->stats() : EngineStats{};
}

HttpResponse Server::metrics() const {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = loop_->metrics_text();
  return r;
}

}  // namespace kvlm::serve
