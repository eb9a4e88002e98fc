// HttpServer: kvlm's own small HTTP/1.1 server type. It hides the library underneath
// (cpp-httplib; only http_server.cpp includes it, as llama.cpp's server hides its own), so the
// rest of src/serve/ sees plain requests, responses and a chunk writer for streamed bodies.
//
// Threads: each connection is served on one thread of a fixed pool; handlers run there and may
// block (a streamed response blocks for as long as it streams). The engine loop is elsewhere.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvlm/status.h"

namespace kvlm::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The value of header `name` (case-insensitive), or "" when absent.
  std::string header(std::string_view name) const;
};

// Where a streamed body goes. write() returns false once the client is gone; connected() polls
// the socket so that a stream waiting for its first token notices a client that left.
class ChunkWriter {
 public:
  virtual ~ChunkWriter() = default;
  virtual bool write(std::string_view data) = 0;
  virtual bool connected() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the body is streamed (chunked transfer encoding) by calling this once on the
  // connection's thread; `body` is then ignored.
  std::function<void(ChunkWriter&)> stream;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (see HttpServer::port())
  int threads = 64;                  // connections served at once
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413
  // Body for errors the library raises itself (unknown path: 404, body too large: 413, ...).
  std::function<std::string(int status)> error_body;
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes match the path exactly. Register all routes before bind().
  void route(const std::string& method, const std::string& path, HttpHandler handler);
  // Binds the listening socket (an error names host and port).
  Status bind();
  int port() const { return port_; }
  // Serves until stop(); returns after the pool's threads have finished their connections.
  void run();
  // Stops accepting connections; safe from any thread (not from a signal handler).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  HttpOptions options_;
  int port_ = 0;
};

}  // namespace kvlm::serve
