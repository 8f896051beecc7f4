// The HTTP/1.1 front of `switchyard serve`, on Boost.Asio and Beast (docs/serve.md, "Connections").
//
// One I/O thread owns every socket: it accepts, reads each request (headers and body) under
// one deadline, and writes replies. A connection costs a socket and a few kilobytes while it is
// idle or slow, never a thread, so a thousand clients that send half a header and wait hold
// nothing the others need. Only a request read whole reaches a handler:
//   - routes marked `inline` (/health, /metrics) run on the I/O thread itself, so they answer
//     whatever the workers are doing;
//   - the rest run on a fixed pool of worker threads, where a completion may block until its
//     job ends. A streamed reply's chunks go back through the I/O thread.
//
// Limits: a connection has `request_timeout` to deliver each whole request, counted from when it
// opens or its previous reply ends (an idle keep-alive connection is closed after it); each write
// of a reply has `write_timeout`; bodies over `max_body_bytes` are 413 before they are read;
// beyond `max_connections` open connections a new one gets 503 and is closed.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sy::cli {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string header(std::string_view name) const;  // case-insensitive; "" when absent
};

// A streamed reply's way out, used by the worker thread that runs the handler.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  // Sends `bytes` as one chunk and waits until it is written. False: the client is gone (or
  // the write passed its deadline); nothing more will reach it.
  virtual bool write(std::string_view bytes) = 0;
  // False once the client has closed its side (checked without reading its data).
  virtual bool alive() = 0;
};

struct HttpReply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type = "application/json";
  std::string body;
  // Set: the reply is chunked (Server-Sent Events) and this is called, on the worker, until it
  // returns false (the end, or the client gone); `body` is not sent.
  std::function<bool(ChunkSink&)> stream;
  // With `stream`: called once after it, true when every chunk and the end reached the client.
  std::function<void(bool delivered)> stream_end;

  void set_header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
  void set_content(std::string text, std::string type) {
    body = std::move(text);
    content_type = std::move(type);
  }
};

using HttpHandler = std::function<void(const HttpRequest&, HttpReply&)>;

struct HttpFrontOptions {
  size_t workers = 16;
  size_t max_body_bytes = size_t(4) << 20;
  size_t max_header_bytes = size_t(64) << 10;
  size_t max_connections = 4096;  // lowered to what RLIMIT_NOFILE allows
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds write_timeout{30000};
};

class HttpFront {
 public:
  explicit HttpFront(HttpFrontOptions options);
  ~HttpFront();  // stop()
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Routes, before listen(). `inline_io`: the handler runs on the I/O thread, so it must not
  // block (no waiting on a job). A GET route answers HEAD too, without the body.
  void route(std::string method, std::string path, HttpHandler handler, bool inline_io = false);
  // Called before routing (on the thread the route runs on); true: it answered.
  void set_guard(std::function<bool(const HttpRequest&, HttpReply&)> guard);
  // Answers a request no route takes (status 404) and the front's own refusals (400 for an
  // unreadable request, 413 for a body over the limit, 503 for a connection over the cap): it
  // fills the body of `reply`, whose status is set.
  void set_refusal(std::function<void(const HttpRequest&, HttpReply&)> refusal);

  // Binds host:port (0: any free port) and starts the I/O thread and the workers. Returns the
  // bound port, or -1 with `why`.
  int listen(const std::string& host, int port, std::string& why);
  // Closes the listener and every connection, and joins the threads. Handlers still running
  // finish first (the server drains its jobs before it stops).
  void stop();

  struct Impl;  // opaque: the sockets, the I/O thread and the workers (http_front.cpp)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sy::cli
