// The HTTP side of `switchyard serve` (docs/serve.md), on http_front (Boost.Beast): the OpenAI
// endpoints over core/serving's scheduler, /health, /metrics (Prometheus text), /v1/models,
// llama-server's /tokenize and /detokenize, and Switchyard's own /v1/plan and /v1/plugins. Every
// refusal is an OpenAI-shaped error object whose `code` is the SY catalog code.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "apps/switchyard/http_front.hpp"
#include "core/serving/openai_request.hpp"
#include "core/serving/scheduler.hpp"

namespace sy::cli {

enum class ServeState { loading, ready, draining };

struct ServeConfig {
  std::string alias;    // the model id clients name
  std::string api_key;  // empty: none required
  int64_t timeout_s = 600;
  int64_t parallel = 8, max_queue = 64;
  size_t max_body_bytes = size_t(4) << 20;
  int64_t http_timeout_s = 30;  // to deliver each request; for each write of a reply
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
  // Binds host:port (0: any free port) and serves: /health and /metrics on the I/O thread, the
  // rest on workers sized so that --parallel open streams and --max-queue waiting requests never
  // starve the 429/503 replies. Returns the bound port, or -1 with `why`.
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
  void complete(RequestKind kind, const std::string& path, const HttpRequest& req, HttpReply& res);
  // POST /tokenize (true) and /detokenize.
  void tokens(bool tokenize, const HttpRequest& req, HttpReply& res);
  void reply_whole(const std::shared_ptr<Call>& call, HttpReply& res);
  void reply_stream(const std::shared_ptr<Call>& call, HttpReply& res);
  bool stream_some(const std::shared_ptr<Call>& call, bool& first, ChunkSink& sink);
  void log_call(const Call& call, int status);
  const ServeConfig config_;
  std::unique_ptr<HttpFront> front_;
  std::unique_ptr<Counters> counters_;
  std::atomic<ServeState> state_{ServeState::loading};
  std::mutex model_mu_;
  ServeModel model_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace sy::cli
