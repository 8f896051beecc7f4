// The HTTP side of `switchyard serve` (docs/serve.md), on cpp-httplib: the OpenAI endpoints
// over core/serving's scheduler, /health, /metrics (Prometheus text), /v1/models, llama-server's
// /tokenize and /detokenize, and
// Switchyard's own /v1/plan and /v1/plugins. Every refusal is an OpenAI-shaped error object
// whose `code` is the SY catalog code.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/serving/openai_request.hpp"
#include "core/serving/scheduler.hpp"

namespace httplib {
class Server;
struct Request;
struct Response;
class DataSink;
}  // namespace httplib

namespace sy::cli {

enum class ServeState { loading, ready, draining };

struct ServeConfig {
  std::string alias;    // the model id clients name
  std::string api_key;  // empty: none required
  int64_t timeout_s = 600;
  int64_t parallel = 8, max_queue = 64;
  size_t max_body_bytes = size_t(4) << 20;
};

// What the handlers reach once the model is loaded (null before).
struct ServeModel {
  const OpenedModel* model = nullptr;
  Scheduler* scheduler = nullptr;
  int64_t context = 0, vocab = 0;
  nlohmann::json plan, plugins;
};

class ServeHttp {
 public:
  explicit ServeHttp(ServeConfig config);
  ~ServeHttp();
  // Binds host:port (0: any free port) and serves on worker threads sized so that --parallel
  // open streams and --max-queue waiting requests never starve /health, /metrics and the
  // 429/503 replies. Returns the bound port, or -1 with `why`.
  int listen(const std::string& host, int port, std::string& why);
  void set_model(const ServeModel& model);
  void set_state(ServeState state) { state_ = state; }
  ServeState state() const { return state_; }
  void stop();  // after the scheduler drained

 private:
  struct Counters;
  struct Call;
  void routes();
  // POST /v1/chat/completions and /v1/completions.
  void complete(RequestKind kind, const std::string& path, const httplib::Request& req,
                httplib::Response& res);
  // POST /tokenize (true) and /detokenize.
  void tokens(bool tokenize, const httplib::Request& req, httplib::Response& res);
  void reply_whole(const std::shared_ptr<Call>& call, httplib::Response& res);
  void reply_stream(const std::shared_ptr<Call>& call, httplib::Response& res);
  bool stream_some(const std::shared_ptr<Call>& call, bool& first, size_t offset,
                   httplib::DataSink& sink);
  void log_call(const Call& call, int status);
  const ServeConfig config_;
  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<Counters> counters_;
  std::atomic<ServeState> state_{ServeState::loading};
  std::mutex model_mu_;
  ServeModel model_;
  std::atomic<uint64_t> next_id_{1};
  int listen_fd_ = -1;
  std::thread listener_;  // runs listen_after_bind; joined by stop()
};

}  // namespace sy::cli
