#include "apps/switchyard/http_front.hpp"

#include <sys/resource.h>
#include <sys/socket.h>

#include <spdlog/spdlog.h>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

namespace sy::cli {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (beast::iequals(k, beast::string_view(name.data(), name.size()))) return v;
  return "";
}

namespace {

// Threads that run the handlers which may block (a completion waits for its job).
class WorkerPool {
 public:
  void start(size_t n) {
    for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // Runs what was posted, then joins.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

struct Route {
  std::string method, path;
  HttpHandler handler;
  bool inline_io = false;
};

class Connection;

}  // namespace

struct HttpFront::Impl {
  explicit Impl(HttpFrontOptions o) : options(o) {}
  HttpFrontOptions options;
  std::vector<Route> routes;
  std::function<bool(const HttpRequest&, HttpReply&)> guard;
  std::function<void(const HttpRequest&, HttpReply&)> refusal;
  net::io_context io;
  // Keeps io.run() going while nothing is pending, until the workers are joined: a worker's
  // write posted then must still run (and fail) rather than leave it waiting.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{io};
  net::steady_timer accept_retry{io};
  std::thread io_thread;
  WorkerPool workers;
  std::mutex connections_mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;
  bool running = false;

  void accept();
  // HEAD is GET without the body (RFC 9110): a load balancer's probe gets /health's status.
  const Route* find(const HttpRequest& req) const {
    const std::string& method = req.method == "HEAD" ? std::string("GET") : req.method;
    for (const Route& r : routes)
      if (r.method == method && r.path == req.path) return &r;
    return nullptr;
  }
};

namespace {

// One client connection. Its socket, parser and timer are touched on the I/O thread only; a
// worker running its handler reaches them by posting there (ChunkSink::write waits for it).
class Connection : public std::enable_shared_from_this<Connection>, public ChunkSink {
 public:
  Connection(HttpFront::Impl& front, tcp::socket socket)
      : front_(front), socket_(std::move(socket)), deadline_(front.io) {}
  ~Connection() override {
    std::lock_guard<std::mutex> lock(front_.connections_mu);
    front_.connections.erase(this);
  }

  void start() { read_request(); }
  // A connection over the cap: the refusal (503), then the close.
  void refuse_at_once(int status) {
    keep_alive_ = false;
    refuse(status);
  }
  void close() {
    if (closed_) return;
    closed_ = true;
    ++generation_;
    deadline_.cancel();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // ---- ChunkSink: called on a worker ---------------------------------------------------
  bool write(std::string_view bytes) override {
    if (failed_) return false;
    auto self = shared_from_this();
    const bool ok = on_io([self, bytes](std::function<void(bool)> done) {
      self->arm(self->front_.options.write_timeout);
      net::async_write(self->socket_, http::make_chunk(net::buffer(bytes.data(), bytes.size())),
                       [self, done](error_code ec, size_t) {
                         self->disarm();
                         done(!ec);
                       });
    });
    if (!ok) failed_ = true;
    return ok;
  }
  bool alive() override {
    if (failed_ || closed_) return false;
    char c;
    const ssize_t n = ::recv(socket_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }

 private:
  // Runs `op` on the I/O thread and waits for the result it reports. False also when the I/O
  // thread dropped the operation (the front stopped).
  bool on_io(std::function<void(std::function<void(bool)>)> op) {
    auto result = std::make_shared<std::promise<bool>>();
    std::future<bool> got = result->get_future();
    net::post(front_.io,
              [op = std::move(op), result] { op([result](bool ok) { result->set_value(ok); }); });
    try {
      return got.get();
    } catch (const std::future_error&) {
      return false;
    }
  }

  void arm(std::chrono::milliseconds d) {
    const uint64_t g = ++generation_;
    deadline_.expires_after(d);
    deadline_.async_wait([self = shared_from_this(), g](error_code ec) {
      if (!ec && g == self->generation_) self->close();
    });
  }
  void disarm() {
    ++generation_;
    deadline_.cancel();
  }

  void read_request() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(uint32_t(front_.options.max_header_bytes));
    parser_->body_limit(front_.options.max_body_bytes);
    request_ = HttpRequest{};
    arm(front_.options.request_timeout);
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    if (ec) return read_failed(ec);
    const auto& head = parser_->get();
    request_.method = std::string(head.method_string());
    const beast::string_view target = head.target().substr(0, head.target().find('?'));
    request_.path.assign(target.data(), target.size());
    for (const auto& f : head)
      request_.headers.emplace_back(std::string(f.name_string().data(), f.name_string().size()),
                                    std::string(f.value().data(), f.value().size()));
    keep_alive_ = head.keep_alive();
    const auto length = parser_->content_length();
    if (length && *length > front_.options.max_body_bytes) {
      keep_alive_ = false;  // the body is never read: the connection cannot go on
      return refuse(413);
    }
    if (parser_->is_done()) return on_request({});
    auto read_body = [self = shared_from_this()] {
      http::async_read(self->socket_, self->buffer_, *self->parser_,
                       [self](error_code e, size_t) { self->on_request(e); });
    };
    if (beast::iequals(head[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(socket_, net::buffer(kContinue),
                              [self = shared_from_this(), read_body](error_code e, size_t) {
                                if (e) return self->close();
                                read_body();
                              });
    }
    read_body();
  }

  void read_failed(error_code ec) {
    if (closed_ || ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset ||
        ec == http::error::partial_message)
      return close();
    keep_alive_ = false;
    if (ec == http::error::body_limit) return refuse(413);
    if (ec == http::error::header_limit) return refuse(431);
    refuse(400);
  }

  void on_request(error_code ec) {
    if (ec) return read_failed(ec);
    disarm();
    request_.body = std::move(parser_->get().body());
    const Route* route = front_.find(request_);
    if (route && route->inline_io) return handle(route);
    front_.workers.post([self = shared_from_this(), route] { self->handle(route); });
  }

  // The guard, then the route (or the 404 refusal); on the I/O thread or a worker.
  void handle(const Route* route) {
    HttpReply reply;
    try {
      if (!(front_.guard && front_.guard(request_, reply))) {
        if (route) {
          route->handler(request_, reply);
        } else {
          reply.status = 404;
          front_.refusal(request_, reply);
        }
      }
    } catch (const std::exception& e) {  // never out of a worker or the I/O thread
      spdlog::error("{} {}: {}", request_.method, request_.path, e.what());
      reply = HttpReply{};
      reply.status = 500;
      front_.refusal(request_, reply);
    }
    if (reply.stream && route && !route->inline_io) return stream(reply);
    send_whole(std::move(reply));
  }

  void refuse(int status) {
    HttpReply reply;
    reply.status = status;
    front_.refusal(request_, reply);
    send_whole(std::move(reply));
  }

  template <class Message>
  void head_fields(Message& m, const HttpReply& reply) {
    m.set(http::field::content_type, reply.content_type);
    for (const auto& [k, v] : reply.headers) m.set(k, v);
    m.keep_alive(keep_alive_);
  }

  // A whole reply: written from the I/O thread (posted there from a worker), then the next
  // request on a kept-alive connection.
  void send_whole(HttpReply reply) {
    auto message = std::make_shared<http::response<http::string_body>>(http::status(reply.status),
                                                                       11, std::move(reply.body));
    head_fields(*message, reply);
    message->prepare_payload();
    if (request_.method == "HEAD") message->body().clear();  // the length stays the GET's
    net::dispatch(front_.io, [self = shared_from_this(), message] {
      if (self->closed_) return;
      self->arm(self->front_.options.write_timeout);
      http::async_write(self->socket_, *message, [self, message](error_code ec, size_t) {
        self->disarm();
        if (ec) return self->close();
        if (!self->keep_alive_) return self->linger_close();
        self->read_request();
      });
    });
  }

  // A chunked reply, driven from the worker: the head, the handler's chunks, the last chunk.
  void stream(HttpReply& reply) {
    auto self = shared_from_this();
    bool ok = on_io([self, &reply](std::function<void(bool)> done) {
      self->head_.emplace(http::status(reply.status), 11);
      self->head_fields(*self->head_, reply);
      self->head_->chunked(true);
      self->head_writer_.emplace(*self->head_);
      self->arm(self->front_.options.write_timeout);
      http::async_write_header(self->socket_, *self->head_writer_,
                               [self, done](error_code ec, size_t) {
                                 self->disarm();
                                 done(!ec);
                               });
    });
    if (!ok) failed_ = true;
    while (!failed_ && reply.stream(*this)) {
    }
    if (!failed_) {
      ok = on_io([self](std::function<void(bool)> done) {
        self->arm(self->front_.options.write_timeout);
        net::async_write(self->socket_, http::make_chunk_last(),
                         [self, done](error_code ec, size_t) {
                           self->disarm();
                           done(!ec);
                         });
      });
      failed_ = !ok;
    }
    if (reply.stream_end) reply.stream_end(!failed_);
    net::post(front_.io, [self] {
      if (self->failed_) return self->close();
      if (!self->keep_alive_) return self->linger_close();
      self->read_request();
    });
  }

  // After a last reply: our side is shut, and what the client still sends (a body refused
  // unread) is read and dropped until it closes, so the close does not reset the connection
  // before the client has read the reply (nginx's lingering close).
  void linger_close() {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(std::chrono::milliseconds(2000));
    drain();
  }
  void drain() {
    socket_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](error_code ec, size_t) {
                              if (ec) return self->close();
                              self->drain();
                            });
  }

  HttpFront::Impl& front_;
  tcp::socket socket_;
  net::steady_timer deadline_;
  uint64_t generation_ = 0;  // a timer firing for an older deadline does nothing
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;
  bool keep_alive_ = false;
  std::optional<http::response<http::empty_body>> head_;
  std::optional<http::response_serializer<http::empty_body>> head_writer_;
  std::array<char, 4096> discard_;
  std::atomic<bool> closed_{false}, failed_{false};
};

// The soft RLIMIT_NOFILE raised to the hard one: each connection is a descriptor, and
// Debian's default soft limit (1024) would cap the server near a thousand clients.
size_t descriptors_allowed() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = std::min<rlim_t>(r.rlim_max, 1 << 20);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return size_t(r.rlim_cur);
}

}  // namespace

void HttpFront::Impl::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors (or another transient failure): try again shortly, not in a spin.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](error_code e) {
        if (!e) accept();
      });
      return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // SSE chunks go out as they come
    auto c = std::make_shared<Connection>(*this, std::move(socket));
    size_t open = 0;
    {
      std::lock_guard<std::mutex> lock(connections_mu);
      open = connections.size();
      connections[c.get()] = c;
    }
    if (open >= options.max_connections)
      c->refuse_at_once(503);
    else
      c->start();
    accept();
  });
}

HttpFront::HttpFront(HttpFrontOptions options) : impl_(std::make_unique<Impl>(options)) {}

HttpFront::~HttpFront() {
  stop();
}

void HttpFront::route(std::string method, std::string path, HttpHandler handler, bool inline_io) {
  impl_->routes.push_back({std::move(method), std::move(path), std::move(handler), inline_io});
}

void HttpFront::set_guard(std::function<bool(const HttpRequest&, HttpReply&)> guard) {
  impl_->guard = std::move(guard);
}

void HttpFront::set_refusal(std::function<void(const HttpRequest&, HttpReply&)> refusal) {
  impl_->refusal = std::move(refusal);
}

int HttpFront::listen(const std::string& host, int port, std::string& why) {
  Impl& f = *impl_;
  error_code ec;
  tcp::endpoint endpoint;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, uint16_t(port));
  } else {
    tcp::resolver resolver(f.io);
    const auto found = resolver.resolve(host, std::to_string(port), ec);
    if (!ec && !found.empty()) endpoint = found.begin()->endpoint();
  }
  // SO_REUSEADDR only (a restart may rebind a port in TIME_WAIT); never SO_REUSEPORT, which
  // would let a second server bind the same port and take half its connections.
  if (!ec) f.acceptor.open(endpoint.protocol(), ec);
  if (!ec) f.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) f.acceptor.bind(endpoint, ec);
  if (!ec) f.acceptor.listen(1024, ec);
  if (ec) {
    error_code ignored;
    f.acceptor.close(ignored);
    why = "cannot listen on " + host + ":" + std::to_string(port) +
          " (in use, or not an address of this machine)";
    return -1;
  }
  const size_t allowed = descriptors_allowed();
  f.options.max_connections =
      std::min(f.options.max_connections, allowed > 256 ? allowed - 128 : allowed / 2);
  const int bound = f.acceptor.local_endpoint().port();
  f.work.emplace(net::make_work_guard(f.io));
  f.accept();
  f.workers.start(f.options.workers);
  f.io_thread = std::thread([&f] {
    for (;;) {
      try {
        f.io.run();
        return;
      } catch (const std::exception& e) {  // a handler's bug must not end the server
        spdlog::error("http: {}", e.what());
      }
    }
  });
  f.running = true;
  return bound;
}

void HttpFront::stop() {
  Impl& f = *impl_;
  if (!f.running) return;
  f.running = false;
  // The I/O thread closes the listener and every socket, so pending reads end and a worker's
  // writes fail at once; the workers are joined while it still runs, then it is stopped.
  std::promise<void> closed;
  net::post(f.io, [&f, &closed] {
    error_code ignored;
    f.acceptor.close(ignored);
    f.accept_retry.cancel();
    std::vector<std::shared_ptr<Connection>> open;
    {
      std::lock_guard<std::mutex> lock(f.connections_mu);
      for (auto& [raw, weak] : f.connections)
        if (auto c = weak.lock()) open.push_back(std::move(c));
    }
    for (auto& c : open) c->close();
    closed.set_value();
  });
  closed.get_future().wait();
  f.workers.stop();
  f.work.reset();
  f.io.stop();
  if (f.io_thread.joinable()) f.io_thread.join();
}

}  // namespace sy::cli
