// The one file that includes cpp-httplib. Routing is ours (exact paths in a table, one catch-all
// handler per method registered with the library), so the library's regex routes never see
// client input and an unknown path gets the same error shape as every other error.
#include "serve/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <utility>

namespace kvlm::serve {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Streams through the library's sink; remembers a failed write so the response is abandoned.
class SinkWriter : public ChunkWriter {
 public:
  explicit SinkWriter(httplib::DataSink& sink) : sink_(sink) {}
  bool write(std::string_view data) override {
    // An empty write would tell the library that the body has ended.
    if (ok_ && !data.empty()) ok_ = sink_.write(data.data(), data.size());
    return ok_;
  }
  bool connected() override {
    if (ok_) ok_ = sink_.is_writable();
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

void fill_response(HttpResponse&& from, httplib::Response& to) {
  to.status = from.status;
  for (auto& [name, value] : from.headers) to.set_header(name, value);
  if (from.stream) {
    to.set_header("Cache-Control", "no-cache");
    auto stream = std::move(from.stream);
    to.set_chunked_content_provider(from.content_type,
                                    [stream](size_t /*offset*/, httplib::DataSink& sink) {
                                      SinkWriter writer(sink);
                                      stream(writer);
                                      if (!writer.ok()) return false;
                                      sink.done();
                                      return true;
                                    });
  } else {
    to.set_content(from.body, from.content_type);
  }
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return value;
  }
  return "";
}

struct HttpServer::Impl {
  httplib::Server server;
  std::map<std::pair<std::string, std::string>, HttpHandler> routes;  // (method, path)
};

HttpServer::HttpServer(HttpOptions options)
    : impl_(std::make_unique<Impl>()), options_(std::move(options)) {}

HttpServer::~HttpServer() = default;

void HttpServer::route(const std::string& method, const std::string& path, HttpHandler handler) {
  impl_->routes[{method, path}] = std::move(handler);
}

Status HttpServer::bind() {
  httplib::Server& server = impl_->server;
  const int threads = std::max(1, options_.threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(options_.max_body_bytes);

  auto dispatch = [this](const httplib::Request& req, httplib::Response& res) {
    HttpRequest request;
    request.method = req.method;
    request.path = req.path;
    request.body = req.body;
    for (const auto& [name, value] : req.headers) request.headers.emplace_back(name, value);
    auto it = impl_->routes.find({req.method, req.path});
    if (it == impl_->routes.end()) {
      res.status = 404;  // the error handler below writes the body
      return;
    }
    fill_response(it->second(request), res);
  };
  server.Get(".*", dispatch);
  server.Post(".*", dispatch);

  auto error_body = options_.error_body;
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [error_body](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty() || !error_body) return httplib::Server::HandlerResponse::Unhandled;
        res.set_content(error_body(res.status), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler(
      [error_body](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(error_body ? error_body(500) : "", "application/json");
      });

  if (options_.port == 0) {
    port_ = server.bind_to_any_port(options_.host);
    if (port_ < 0) return Status::error("--host " + options_.host + ": cannot bind any port");
  } else {
    if (!server.bind_to_port(options_.host, options_.port)) {
      return Status::error("--host " + options_.host + " --port " + std::to_string(options_.port) +
                           ": cannot bind (address in use, or not an address of this machine)");
    }
    port_ = options_.port;
  }
  return Status::ok();
}

void HttpServer::run() {
  impl_->server.listen_after_bind();
}

void HttpServer::stop() {
  // A stop that comes before run() has started listening would be lost: wait (boundedly) until
  // the library says it runs.
  for (int i = 0; i < 500 && !impl_->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  impl_->server.stop();
}

}  // namespace kvlm::serve
