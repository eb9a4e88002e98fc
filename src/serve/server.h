// Server: kvlm serve's HTTP front end on the engine. It owns the HTTP server (its threads answer
// clients), the engine and the EngineLoop (the one thread that steps the engine), and routes
// the OpenAI endpoints and the operational ones (/health, /metrics, /tokenize, ...).
//
// Its life: construct, bind() (the port answers /health with 503 "loading" from then on),
// start() (HTTP threads run), attach() the loaded model (now ready), then shutdown() from
// another thread: stop accepting, cancel open requests so that streams end cleanly, join.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kvlm/engine.h"
#include "kvlm/status.h"
#include "serve/chat_template.h"
#include "serve/generation.h"
#include "serve/http_server.h"

namespace kvlm::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port
  int max_running = 16;              // the engine's --max-seqs
  int max_queue = 64;                // requests waiting beyond the running ones, then 503
  std::string api_key;               // non-empty: every route but /health needs Bearer KEY
  std::string model_name;            // the name clients use ("model"); required
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413
  std::function<void(const std::string&)> log;  // one line per finished request
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // shutdown()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Status bind();
  int port() const { return http_->port(); }
  void start();  // serves on its own thread until shutdown()
  // Makes the model live: creates the engine and its loop. `chat` is the template chat
  // requests render with (kind kNone: chat answers 400).
  Status attach(std::shared_ptr<LoadedModel> model, const EngineOptions& engine_options,
                const ChatTemplate& chat);
  void shutdown();  // idempotent; returns when every connection has ended
  // The engine's counters as of its last step (its cache's capacity from attach() on).
  EngineStats engine_stats() const;

 private:
  HttpResponse dispatch(const HttpRequest& request, const HttpHandler& handler) const;
  HttpResponse health() const;
  HttpResponse models() const;
  HttpResponse tokenize(const HttpRequest& request) const;
  HttpResponse detokenize(const HttpRequest& request) const;
  HttpResponse metrics() const;

  ServerOptions options_;
  std::unique_ptr<HttpServer> http_;
  std::thread http_thread_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineLoop> loop_;
  GenerationContext ctx_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  int64_t created_ = 0;
  std::mutex shutdown_mutex_;
};

}  // namespace kvlm::serve
