#include "apps/switchyard/serve_http.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <sstream>

#include "core/errors/errors.hpp"
#include "core/generation/harmony.hpp"
#include "core/generation/reasoning.hpp"

namespace sy::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// The OpenAI error object: {"error": {"message", "type", "code", "param"}}.
// Generated text may hold bytes that are not UTF-8 (a byte-level token of half a character):
// they go out as U+FFFD, as Tokenizer::decode shows them, never as an exception.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void error_reply(HttpReply& res, int status, const Error& e, const std::string& param = "") {
  json body{{"error",
             {{"message", e.what()},
              {"type", error_type(status)},
              {"code", code_text(e.code)},
              {"param", param.empty() ? json() : json(param)}}}};
  res.status = status;
  // The message may quote what the client sent, bytes that are not UTF-8 included.
  res.set_content(dump(body), "application/json");
}

// The field a SY501 message names ("messages[0].role: ..."), for `param`.
std::string param_of(const Error& e) {
  const std::string m = e.what();
  const size_t colon = m.find(": ");
  return e.code == Errc::bad_request && colon != std::string::npos ? m.substr(0, colon) : "";
}

// The access log: one line per request on stderr, whatever --log-level says of the rest.
spdlog::logger& access_log() {
  static std::shared_ptr<spdlog::logger> log = [] {
    auto l = spdlog::stderr_logger_mt("switchyard.access");
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %v");
    l->set_level(spdlog::level::info);
    return l;
  }();
  return *log;
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string request_id(const char* prefix, uint64_t n) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s-%016llx", prefix, (unsigned long long)n);
  return buf;
}

void histogram_text(std::ostringstream& o, const char* name, const char* help, const Histogram& h) {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.buckets[i];
    o << name << "_bucket{le=\"" << h.bounds[i] << "\"} " << cumulative << "\n";
  }
  cumulative += h.buckets.back();
  o << name << "_bucket{le=\"+Inf\"} " << cumulative << "\n"
    << name << "_sum " << h.sum << "\n"
    << name << "_count " << h.count << "\n";
}

// The scheduler's series of /metrics (docs/serve.md, "Metrics").
void scheduler_metrics_text(std::ostringstream& o, const SchedulerMetrics& m) {
  auto sample = [&](const char* name, const char* type, const char* help, int64_t v) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
      << name << " " << v << "\n";
  };
  sample("switchyard_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         int64_t(m.prompt_tokens));
  sample("switchyard_prompt_tokens_cached_total", "counter",
         "Prompt tokens found in the KV pool and not computed again.",
         int64_t(m.cached_prompt_tokens));
  sample("switchyard_generated_tokens_total", "counter", "Tokens generated.",
         int64_t(m.generated_tokens));
  sample("switchyard_steps_total", "counter", "Batched steps run.", int64_t(m.steps));
  sample("switchyard_sequences_finished_total", "counter",
         "Generations that ended (stop or length).", int64_t(m.finished));
  sample("switchyard_sequences_cancelled_total", "counter",
         "Generations cancelled (client gone, deadline passed).", int64_t(m.cancelled));
  sample("switchyard_sequences_failed_total", "counter", "Generations that failed.",
         int64_t(m.failed));
  sample("switchyard_queue_depth", "gauge", "Requests waiting for a slot.", m.queued);
  sample("switchyard_running_sequences", "gauge", "Sequences running.", m.running);
  sample("switchyard_kv_blocks_used", "gauge", "KV blocks held by sequences.", m.kv_blocks_used);
  sample("switchyard_kv_blocks_reserved", "gauge", "KV blocks reserved by the running requests.",
         m.kv_blocks_reserved);
  sample("switchyard_kv_blocks_total", "gauge", "KV blocks of the pool.", m.kv_blocks_total);
  // The Gateway API Inference Extension's model-server protocol (docs/serve.md, "InferencePool"):
  // KV-cache utilisation as a fraction, and the cache's shape as vLLM's cache_config_info labels,
  // which its endpoint picker's prefix-cache scorer reads.
  o << "# HELP switchyard_kv_cache_usage_ratio KV blocks held by sequences over the pool's "
       "blocks (0 to 1).\n# TYPE switchyard_kv_cache_usage_ratio gauge\n"
       "switchyard_kv_cache_usage_ratio "
    << (m.kv_blocks_total > 0 ? double(m.kv_blocks_used) / double(m.kv_blocks_total) : 0.0)
    << "\n# HELP switchyard_cache_config_info The KV cache's block size (tokens) and block "
       "count.\n# TYPE switchyard_cache_config_info gauge\n"
       "switchyard_cache_config_info{block_size=\""
    << m.kv_block_tokens << "\",num_gpu_blocks=\"" << m.kv_blocks_total << "\"} 1\n";
  histogram_text(o, "switchyard_time_to_first_token_seconds",
                 "From a request's arrival to its first generated token.", m.ttft);
  histogram_text(o, "switchyard_inter_token_latency_seconds",
                 "Between consecutive tokens of a generation.", m.itl);
}

}  // namespace

struct ServeHttp::Counters {
  std::mutex mu;
  std::map<std::pair<std::string, int>, uint64_t> requests;  // (endpoint, status) -> count
  void count(const std::string& endpoint, int status) {
    std::lock_guard<std::mutex> lock(mu);
    ++requests[{endpoint, status}];
  }
};

ServeHttp::ServeHttp(ServeConfig config)
    : config_(std::move(config)), counters_(std::make_unique<Counters>()) {
  HttpFrontOptions o;
  // Every open stream holds a worker until it ends; the queue's requests wait in theirs. The
  // rest are for the 429 and 503 replies, which must always get one (/health and /metrics run
  // on the I/O thread and need none).
  o.workers = size_t(config_.parallel + config_.max_queue + 16);
  o.max_body_bytes = config_.max_body_bytes;
  o.request_timeout = std::chrono::seconds(config_.http_timeout_s);
  o.write_timeout = std::chrono::seconds(config_.http_timeout_s);
  front_ = std::make_unique<HttpFront>(o);
  routes();
}

ServeHttp::~ServeHttp() {
  stop();
}

int ServeHttp::listen(const std::string& host, int port, std::string& why) {
  return front_->listen(host, port, why);
}

void ServeHttp::set_model(const ServeModel& model) {
  std::lock_guard<std::mutex> lock(model_mu_);
  model_ = model;
}

void ServeHttp::stop() {
  front_->stop();
}

void ServeHttp::routes() {
  HttpFront& s = *front_;
  // Refusals the front makes itself (an unknown route, an unreadable request, a body over the
  // limit, a connection over the cap) get the same shape.
  s.set_refusal([this](const HttpRequest& req, HttpReply& res) {
    const int status = res.status;
    if (status == 413)
      error_reply(res, 413,
                  Error(Errc::bad_request, "body: is larger than the server's limit of " +
                                               std::to_string(config_.max_body_bytes) + " bytes"),
                  "body");
    else if (status == 404)
      error_reply(res, 404, Error(Errc::bad_request, "path: " + req.path + " is not an endpoint"),
                  "path");
    else if (status == 431)
      error_reply(res, 431, Error(Errc::bad_request, "headers: are larger than 64 KiB"), "headers");
    else if (status == 400)
      error_reply(res, 400, Error(Errc::bad_request, "request: is not an HTTP/1.1 request"));
    else if (status == 503)
      error_reply(res, 503, Error(Errc::unavailable, "the server holds its most connections"));
    else
      error_reply(res, status,
                  Error(Errc::unavailable, "the server failed this request (its log says why)"));
    counters_->count(req.path.empty() ? "-" : req.path, status);
  });
  s.set_guard([this](const HttpRequest& req, HttpReply& res) {
    if (config_.api_key.empty() || req.path == "/health") return false;
    if (req.header("Authorization") == "Bearer " + config_.api_key) return false;
    error_reply(res, 401, Error(Errc::unauthorized, "a valid API key is required"));
    counters_->count(req.path, 401);
    return true;
  });
  const bool on_io = true;
  s.route(
      "GET", "/health",
      [this](const HttpRequest&, HttpReply& res) {
        const ServeState st = state_;
        res.status = st == ServeState::ready ? 200 : 503;
        res.set_content(json{{"status", st == ServeState::ready     ? "ok"
                                        : st == ServeState::loading ? "loading"
                                                                    : "draining"}}
                            .dump(),
                        "application/json");
        counters_->count("/health", res.status);
      },
      on_io);
  s.route("GET", "/v1/models", [this](const HttpRequest&, HttpReply& res) {
    json model{{"id", config_.alias},
               {"object", "model"},
               {"created", int64_t(std::time(nullptr))},
               {"owned_by", "switchyard"}};
    {
      std::lock_guard<std::mutex> lock(model_mu_);
      if (model_.scheduler) model["max_model_len"] = model_.context;  // vLLM's name
    }
    json data = json::array({model});
    res.set_content(json{{"object", "list"}, {"data", data}}.dump(), "application/json");
    counters_->count("/v1/models", 200);
  });
  auto model_json = [this](const char* which, HttpReply& res) {
    std::lock_guard<std::mutex> lock(model_mu_);
    if (!model_.scheduler) return error_reply(res, 503, Error(Errc::unavailable, "loading"));
    res.set_content((std::string(which) == "plan" ? model_.plan : model_.plugins).dump(2),
                    "application/json");
  };
  s.route("GET", "/v1/plan", [=, this](const HttpRequest&, HttpReply& res) {
    model_json("plan", res);
    counters_->count("/v1/plan", res.status);
  });
  s.route("GET", "/v1/plugins", [=, this](const HttpRequest&, HttpReply& res) {
    model_json("plugins", res);
    counters_->count("/v1/plugins", res.status);
  });
  s.route(
      "GET", "/metrics",
      [this](const HttpRequest&, HttpReply& res) {
        std::ostringstream o;
        {
          std::lock_guard<std::mutex> lock(counters_->mu);
          o << "# HELP switchyard_requests_total Requests by endpoint and HTTP status.\n"
               "# TYPE switchyard_requests_total counter\n";
          for (const auto& [key, n] : counters_->requests)
            o << "switchyard_requests_total{endpoint=\"" << key.first << "\",status=\""
              << key.second << "\"} " << n << "\n";
        }
        Scheduler* sched = nullptr;
        {
          std::lock_guard<std::mutex> lock(model_mu_);
          sched = model_.scheduler;
        }
        if (sched) {
          scheduler_metrics_text(o, sched->metrics());
        }
        res.set_content(o.str(), "text/plain; version=0.0.4");
        counters_->count("/metrics", 200);
      },
      on_io);
  s.route("POST", "/tokenize",
          [this](const HttpRequest& req, HttpReply& res) { tokens(true, req, res); });
  s.route("POST", "/detokenize",
          [this](const HttpRequest& req, HttpReply& res) { tokens(false, req, res); });
  for (RequestKind kind : {RequestKind::chat, RequestKind::completion}) {
    const std::string path = kind == RequestKind::chat ? "/v1/chat/completions" : "/v1/completions";
    s.route("POST", path, [this, kind, path](const HttpRequest& req, HttpReply& res) {
      complete(kind, path, req, res);
    });
  }
}

}  // namespace sy::cli

namespace sy::cli {
namespace {

// A token id list for a request: its messages through the chat template (no role forging:
// chat_prompt_ids), or its prompt text (special tokens matched, as `run --prompt`) or ids.
// `rendered` receives a chat's prompt text.
std::vector<int64_t> prompt_ids_of(const CompletionRequest& r, const OpenedModel& m,
                                   std::string& rendered) {
  if (r.kind == RequestKind::chat) {
    nlohmann::ordered_json kwargs = r.template_kwargs;
    if (!r.tools.empty()) {
      // Refused before anything renders: a template that would drop the tools, or a call
      // format the server cannot read back (it would reach the client as text).
      if (!template_renders_tools(m.generation))
        throw Error(Errc::bad_request, "tools: the model's chat template does not render tools (" +
                                           m.generation.chat_template_origin + ")");
      if (tool_format(m.generation) == ToolFormat::harmony &&
          !harmony_markers(m.tokenizer, m.generation))
        throw Error(Errc::bad_request,
                    "tools: the template writes harmony calls, and the tokenizer lacks harmony's "
                    "control tokens (<|channel|>, <|message|>, <|call|>) to mark them");
      if (tool_format(m.generation) == ToolFormat::none)
        throw Error(Errc::bad_request,
                    "tools: the model's template writes tool calls in a format this server does "
                    "not read back yet (Hermes <tool_call> blocks, Llama 3.x JSON, Mistral's "
                    "[TOOL_CALLS] and harmony's recipients are read)");
      kwargs["tools"] = r.tools;
    }
    std::vector<nlohmann::ordered_json> fields = r.message_fields;
    prepare_tool_history(tool_format(m.generation), fields);
    return chat_prompt_ids(m.tokenizer, m.generation, r.messages, true, std::time(nullptr), kwargs,
                           &rendered, &fields);
  }
  if (!r.prompt_ids.empty()) return r.prompt_ids;
  return plain_prompt_ids(m.tokenizer, m.generation, r.prompt);
}

// Text as a client reads it once the reply is JSON: bytes that are not valid UTF-8 (a token
// holding part of a character) become U+FFFD, as dump() writes them.
std::string as_client_reads(const std::string& bytes) {
  return json::parse(dump(json(bytes))).get<std::string>();
}

// A token's piece for /tokenize's with_pieces: a string when its bytes are valid UTF-8, else
// the bytes (llama-server's shape).
json piece_of(const std::string& bytes) {
  if (as_client_reads(bytes) == bytes) return bytes;
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(int(c));
  return out;
}

}  // namespace

// POST /tokenize and /detokenize, llama-server's shapes, on the loaded model's tokenizer.
void ServeHttp::tokens(bool tokenize, const HttpRequest& req, HttpReply& res) {
  const std::string path = tokenize ? "/tokenize" : "/detokenize";
  ServeModel m;
  {
    std::lock_guard<std::mutex> lock(model_mu_);
    m = model_;
  }
  try {
    if (!m.model) throw Error(Errc::unavailable, "the server is loading");
    const Tokenizer& tok = m.model->tokenizer;
    json body;
    if (tokenize) {
      const TokenizeRequest r = parse_tokenize_request(req.body);
      const std::vector<int64_t> ids = r.add_special
                                           ? plain_prompt_ids(tok, m.model->generation, r.content)
                                           : tok.encode(r.content);
      json list = json::array();
      for (int64_t id : ids)
        list.push_back(r.with_pieces ? json{{"id", id}, {"piece", piece_of(tok.decode_token(id))}}
                                     : json(id));
      body = {{"tokens", list}};
    } else {
      const DetokenizeRequest r = parse_detokenize_request(req.body);
      for (size_t i = 0; i < r.tokens.size(); ++i)
        if (r.tokens[i] >= m.vocab)
          throw Error(Errc::bad_request,
                      "tokens[" + std::to_string(i) + "]: id " + std::to_string(r.tokens[i]) +
                          " is outside the vocabulary of " + std::to_string(m.vocab));
      body = {{"content", tok.decode(r.tokens)}};
    }
    res.set_content(dump(body), "application/json");
  } catch (const Error& e) {
    error_reply(res, e.code == Errc::unavailable ? 503 : 400, e, param_of(e));
  }
  counters_->count(path, res.status);
}

// One completion request in flight: what the client asked and the jobs the scheduler runs,
// one per choice (n); choices[0] is the one submitted, the rest its forks (Job::forks).
struct ServeHttp::Call {
  std::string id, path, model;
  RequestKind kind = RequestKind::chat;
  bool stream = false, include_usage = false, return_token_ids = false;
  std::vector<int64_t> prompt_ids;  // for return_token_ids
  int64_t logprobs = -1;            // the request's (CompletionRequest::logprobs)
  bool reasoning = false;           // the chat's text is split (reasoning_content)
  bool tools = false;               // the chat's content is read for tool calls
  const Tokenizer* tokenizer = nullptr;
  int64_t prompt_tokens = 0;
  int64_t created = 0;
  std::shared_ptr<Job> job;  // choices[0]
  std::vector<std::shared_ptr<Job>> choices;
  // What a stream has sent of each choice.
  struct Sent {
    size_t ids = 0, calls = 0, logprobs = 0;
    int64_t text_offset = 0;  // completion logprobs: bytes of text before the next entry
    bool finish = false;      // its finish chunk
  };
  std::vector<Sent> sent;
  Clock::time_point start = Clock::now();
  void cancel() {
    for (auto& c : choices) c->cancelled = true;
  }
  bool all_done() const {  // with the jobs' (shared) lock held
    return std::all_of(choices.begin(), choices.end(), [](const auto& c) { return c->done; });
  }
  int64_t completion_tokens() const {  // the same
    int64_t n = 0;
    for (const auto& c : choices) n += c->completion_tokens;
    return n;
  }
};

void ServeHttp::complete(RequestKind kind, const std::string& path, const HttpRequest& req,
                         HttpReply& res) {
  auto refuse = [&](int status, const Error& e) {
    error_reply(res, status, e, param_of(e));
    counters_->count(path, status);
    access_log().info("request {} {} status={} error={}", req.method, path, status,
                      code_text(e.code));
  };
  const ServeState st = state_;
  if (st != ServeState::ready)
    return refuse(
        503, Error(Errc::unavailable, std::string("the server is ") +
                                          (st == ServeState::loading ? "loading" : "draining")));
  ServeModel m;
  {
    std::lock_guard<std::mutex> lock(model_mu_);
    m = model_;
  }
  auto call = std::make_shared<Call>();
  call->path = path;
  call->kind = kind;
  call->created = int64_t(std::time(nullptr));
  call->id = request_id(kind == RequestKind::chat ? "chatcmpl" : "cmpl", next_id_++);
  try {
    const CompletionRequest r = parse_completion_request(req.body, kind);
    if (r.model && *r.model != config_.alias)
      return refuse(404, Error(Errc::model_not_found, "the model " + *r.model +
                                                          " does not exist; this server serves " +
                                                          config_.alias));
    if (r.n > config_.parallel)
      return refuse(400, Error(Errc::bad_request, "n: " + std::to_string(r.n) + " choices run as " +
                                                      std::to_string(r.n) +
                                                      " sequences at once, and this server "
                                                      "runs at most --parallel " +
                                                      std::to_string(config_.parallel)));
    std::string rendered;
    std::vector<int64_t> ids = prompt_ids_of(r, *m.model, rendered);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= m.vocab)
        return refuse(400, Error(Errc::bad_request,
                                 "prompt[" + std::to_string(i) + "]: id " + std::to_string(ids[i]) +
                                     " is outside the vocabulary of " + std::to_string(m.vocab)));
    if (ids.empty()) return refuse(400, Error(Errc::bad_request, "prompt: encodes to no token"));
    const int64_t room = m.context - int64_t(ids.size());
    if (room < 1 || (r.max_tokens && *r.max_tokens > room))
      return refuse(400, Error(Errc::prompt_too_long,
                               "the prompt (" + std::to_string(ids.size()) + " tokens) plus " +
                                   (r.max_tokens ? "max_tokens " + std::to_string(*r.max_tokens)
                                                 : std::string("one token")) +
                                   " exceed the context of " + std::to_string(m.context)));
    auto job = std::make_shared<Job>();
    job->prompt = std::move(ids);
    job->sampling =
        sampling_options(r, r.max_tokens.value_or(room), m.vocab, std::random_device{}());
    const ToolFormat format = tool_format(m.model->generation);
    if (r.tool_choice == ToolChoice::required || r.tool_choice == ToolChoice::function) {
      job->sampling.grammar = tool_call_grammar(format, r.tools, r.tool_name, r.parallel_tool_calls,
                                                think_lead_for(m.model->generation, rendered));
      job->sampling.grammar_specials = tool_call_markers(format, m.model->tokenizer);
    }
    job->deadline = Clock::now() + std::chrono::seconds(config_.timeout_s);
    if (kind == RequestKind::chat)
      job->reasoning = reasoning_split_for(m.model->tokenizer, m.model->generation, rendered);
    call->reasoning = job->reasoning != nullptr;
    if (!r.tools.empty())
      job->tools = std::make_unique<ToolCallReader>(format, std::random_device{}());
    call->tools = job->tools != nullptr;
    call->choices.push_back(job);
    for (int64_t i = 1; i < r.n; ++i) {
      auto fork = std::make_shared<Job>(job->signal);
      fork->sampling = job->sampling;
      fork->deadline = job->deadline;
      if (call->reasoning)
        fork->reasoning = reasoning_split_for(m.model->tokenizer, m.model->generation, rendered);
      if (call->tools)
        fork->tools = std::make_unique<ToolCallReader>(format, std::random_device{}());
      job->forks.push_back(fork);
      call->choices.push_back(fork);
    }
    call->sent.resize(call->choices.size());
    call->stream = r.stream;
    call->include_usage = r.include_usage;
    call->return_token_ids = r.return_token_ids;
    call->logprobs = r.logprobs;
    call->tokenizer = &m.model->tokenizer;
    if (r.return_token_ids) call->prompt_ids = job->prompt;
    call->prompt_tokens = int64_t(job->prompt.size());
    call->model = config_.alias;
    call->job = job;
  } catch (const Error& e) {
    return refuse(e.code == Errc::chat_template ? 400 : e.code == Errc::bad_request ? 400 : 500, e);
  }
  switch (m.scheduler->submit(call->job)) {
    case Scheduler::Admit::queued: break;
    case Scheduler::Admit::queue_full:
      res.set_header("Retry-After", "1");
      return refuse(
          429, Error(Errc::queue_full,
                     std::to_string(config_.max_queue) + " requests are waiting (--max-queue " +
                         std::to_string(config_.max_queue) + "); retry after 1 s"));
    case Scheduler::Admit::draining:
      return refuse(503, Error(Errc::unavailable, "the server is draining"));
    case Scheduler::Admit::too_large:
      return refuse(400, Error(Errc::kv_pool_full,
                               "the prompt and max_tokens need more KV memory than the whole pool "
                               "holds; lower max_tokens"));
  }
  if (call->stream)
    reply_stream(call, res);
  else
    reply_whole(call, res);
}

void ServeHttp::log_call(const Call& c, int status) {
  std::lock_guard<std::mutex> lock(c.job->mu);
  const double ttft = c.job->completion_tokens > 0
                          ? seconds_between(c.job->submitted, c.job->first_token) * 1e3
                          : 0;
  access_log().info(
      "request id={} {} status={} prompt={} cached={} completion={} finish={} ttft_ms={:.1f} "
      "total_ms={:.1f}{}",
      c.id, c.path, status, c.prompt_tokens, c.job->cached_tokens, c.completion_tokens(),
      finish_reason_name(c.job->finish_reason), ttft, seconds_between(c.start, Clock::now()) * 1e3,
      c.choices.size() > 1 ? " n=" + std::to_string(c.choices.size()) : "");
}

namespace {

// The prompt counts once, however many choices share it (as OpenAI bills n).
json usage_of(int64_t prompt, int64_t completion, const Job& job) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", job.cached_tokens}}}};
}

// A choice that ended without its answer: its error, or the cancellation (a timeout).
bool failed(const Job& job) {
  return job.error.has_value() || job.finish_reason == FinishReason::cancelled;
}

// A token's text in a logprobs entry: `token` (JSON text; where the token holds part of a UTF-8
// character, the replacement character) and `bytes`, whole, as OpenAI gives them.
json logprob_of(const Tokenizer& tok, int64_t id, double logprob) {
  const std::string text = tok.decode_token(id);
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(int(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
}

// `entries` in a choice's "logprobs": chat.completion's {"content": [...]}, or text_completion's
// parallel lists, whose text_offset counts bytes from `offset` (advanced past them).
json logprobs_json(const Tokenizer& tok, RequestKind kind, std::span<const TokenLogprobs> entries,
                   int64_t& offset) {
  if (kind == RequestKind::chat) {
    json content = json::array();
    for (const TokenLogprobs& e : entries) {
      json one = logprob_of(tok, e.id, e.logprob);
      json top = json::array();
      for (const auto& [id, lp] : e.top) top.push_back(logprob_of(tok, id, lp));
      one["top_logprobs"] = std::move(top);
      content.push_back(std::move(one));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       text_offset = json::array();
  for (const TokenLogprobs& e : entries) {
    const std::string text = tok.decode_token(e.id);
    tokens.push_back(text);
    token_logprobs.push_back(e.logprob);
    // Keyed by text as the client will read it (bytes of part of a character become U+FFFD):
    // tokens that read alike keep the likeliest one's value.
    json alternatives = json::object();
    for (const auto& [id, lp] : e.top) {
      const std::string key = as_client_reads(tok.decode_token(id));
      if (!alternatives.contains(key)) alternatives[key] = lp;
    }
    top.push_back(std::move(alternatives));
    text_offset.push_back(offset);
    offset += int64_t(text.size());
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(text_offset)}};
}

// "stop" and "length" as OpenAI names them; a cancelled or failed job has none of its own.
std::string finish_of(const Job& job) {
  const std::string f = openai_finish_reason(job.finish_reason);
  return f == "stop" && !job.tool_calls.empty() ? "tool_calls" : f;
}

// OpenAI's tool_calls entries; `from` numbers them (a stream's index).
json tool_calls_json(const std::vector<ToolCall>& calls, size_t from, bool indexed) {
  json out = json::array();
  for (size_t i = from; i < calls.size(); ++i) {
    json c{{"id", calls[i].id},
           {"type", "function"},
           {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (indexed) c["index"] = i;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

void ServeHttp::reply_whole(const std::shared_ptr<Call>& call, HttpReply& res) {
  std::unique_lock<std::mutex> lock(call->job->mu);
  call->job->cv.wait(lock, [&] { return call->all_done(); });
  for (const auto& c : call->choices) {
    if (!failed(*c)) continue;
    const Error e =
        c->error ? *c->error : Error(Errc::unavailable, "the request was cancelled (timeout)");
    lock.unlock();
    error_reply(res, c->error ? 500 : 503, e);
    counters_->count(call->path, res.status);
    log_call(*call, res.status);
    return;
  }
  json choices = json::array();
  for (size_t i = 0; i < call->choices.size(); ++i) {
    Job& job = *call->choices[i];
    json message{{"role", "assistant"}, {"content", job.pending}};
    if (call->tools && !job.tool_calls.empty()) {
      // The text around the calls is blank lines, as a rule: OpenAI's content is then null.
      if (job.pending.find_first_not_of(" \t\r\n") == std::string::npos)
        message["content"] = nullptr;
      message["tool_calls"] = tool_calls_json(job.tool_calls, 0, false);
    }
    if (call->reasoning)
      message["reasoning_content"] =
          job.pending_reasoning.empty() ? json() : json(job.pending_reasoning);
    json choice = call->kind == RequestKind::chat
                      ? json{{"index", i}, {"message", message}, {"finish_reason", finish_of(job)}}
                      : json{{"index", i},
                             {"text", job.pending},
                             {"logprobs", nullptr},
                             {"finish_reason", finish_of(job)}};
    if (call->return_token_ids) choice["token_ids"] = job.generated;
    if (call->logprobs >= 0)
      choice["logprobs"] =
          logprobs_json(*call->tokenizer, call->kind, job.logprobs, call->sent[i].text_offset);
    choices.push_back(std::move(choice));
  }
  json body{{"id", call->id},
            {"object", call->kind == RequestKind::chat ? "chat.completion" : "text_completion"},
            {"created", call->created},
            {"model", call->model},
            {"choices", std::move(choices)},
            {"usage", usage_of(call->prompt_tokens, call->completion_tokens(), *call->job)}};
  if (call->return_token_ids) body["prompt_token_ids"] = call->prompt_ids;
  res.set_header("X-Switchyard-Cached-Tokens", std::to_string(call->job->cached_tokens));
  lock.unlock();
  res.set_content(dump(body), "application/json");
  counters_->count(call->path, 200);
  log_call(*call, 200);
}

// Server-Sent Events, one chunk per piece of text as soon as it may be shown; `data: [DONE]`
// last. A client that goes away cancels its jobs: their sequences end at the next step.
void ServeHttp::reply_stream(const std::shared_ptr<Call>& call, HttpReply& res) {
  counters_->count(call->path, 200);
  res.set_header("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  res.stream = [this, call, first = true](ChunkSink& sink) mutable {
    try {
      return stream_some(call, first, sink);
    } catch (const std::exception& e) {  // never out of an HTTP worker thread
      spdlog::error("request id={}: stream failed: {}", call->id, e.what());
      call->cancel();
      return false;
    }
  };
  res.stream_end = [call](bool delivered) {
    if (!delivered) call->cancel();  // the connection closed before the end
  };
}

namespace {

// What one round of a stream takes from one choice, under the jobs' lock.
struct ChoiceNews {
  std::string text, reasoning;
  std::vector<int64_t> ids;
  std::vector<TokenLogprobs> entries;
  json calls = json::array();
  bool ends = false;  // it is done and its finish chunk is not sent yet
  bool any() const {
    return !text.empty() || !reasoning.empty() || !ids.empty() || !entries.empty() ||
           !calls.empty();
  }
};

}  // namespace

// One round of a stream: the role first (per choice), then whatever text is ready (waiting up
// to 200 ms), each choice's finish chunk when it ends, and after the last the usage when asked
// and [DONE]. False: the stream is over (its end sent, or the client gone).
bool ServeHttp::stream_some(const std::shared_ptr<Call>& call, bool& first, ChunkSink& sink) {
  const bool chat = call->kind == RequestKind::chat;
  // A chunk of choice `index` (and, under return_token_ids, the ids generated since the last).
  auto chunk = [&](size_t index, const json& delta_or_text, const json& finish,
                   const std::vector<int64_t>* ids = nullptr, const json* logprobs = nullptr) {
    json choice = chat ? json{{"index", index}, {"delta", delta_or_text}, {"finish_reason", finish}}
                       : json{{"index", index},
                              {"text", delta_or_text},
                              {"logprobs", nullptr},
                              {"finish_reason", finish}};
    if (ids) choice["token_ids"] = *ids;
    if (logprobs) choice["logprobs"] = *logprobs;
    json c{{"id", call->id},
           {"object", chat ? "chat.completion.chunk" : "text_completion"},
           {"created", call->created},
           {"model", call->model},
           {"choices", json::array({choice})}};
    if (ids && !finish.is_null()) c["prompt_token_ids"] = call->prompt_ids;
    return sink.write("data: " + dump(c) + "\n\n");
  };
  const size_t n = call->choices.size();
  if (first) {
    first = false;
    for (size_t i = 0; chat && i < n; ++i)
      if (!chunk(i, json{{"role", "assistant"}, {"content", ""}}, nullptr)) {
        call->cancel();
        return false;
      }
  }
  std::vector<ChoiceNews> news(n);
  std::unique_lock<std::mutex> lock(call->job->mu);
  call->job->cv.wait_for(lock, std::chrono::milliseconds(200), [&] {
    for (size_t i = 0; i < n; ++i) {
      const Job& job = *call->choices[i];
      if ((job.done && !call->sent[i].finish) || !job.pending.empty() ||
          !job.pending_reasoning.empty() || job.tool_calls.size() > call->sent[i].calls)
        return true;
    }
    return false;
  });
  for (size_t i = 0; i < n; ++i) {
    Job& job = *call->choices[i];
    Call::Sent& sent = call->sent[i];
    ChoiceNews& out = news[i];
    out.text.swap(job.pending);
    out.reasoning.swap(job.pending_reasoning);
    if (call->return_token_ids && sent.ids < job.generated.size()) {
      out.ids.assign(job.generated.begin() + long(sent.ids), job.generated.end());
      sent.ids = job.generated.size();
    }
    if (call->logprobs >= 0 && sent.logprobs < job.logprobs.size()) {
      out.entries.assign(job.logprobs.begin() + long(sent.logprobs), job.logprobs.end());
      sent.logprobs = job.logprobs.size();
    }
    if (call->tools && sent.calls < job.tool_calls.size()) {
      out.calls = tool_calls_json(job.tool_calls, sent.calls, true);
      sent.calls = job.tool_calls.size();
    }
    out.ends = job.done && !sent.finish;
  }
  const bool all_done = call->all_done();
  const Job* failure = nullptr;
  for (const auto& c : call->choices)
    if (c->done && failed(*c) && !failure) failure = c.get();
  const std::optional<Error> failure_error = failure ? failure->error : std::nullopt;
  const json usage = usage_of(call->prompt_tokens, call->completion_tokens(), *call->job);
  std::vector<std::string> finishes(n);
  for (size_t i = 0; i < n; ++i) finishes[i] = finish_of(*call->choices[i]);
  lock.unlock();

  for (size_t i = 0; i < n; ++i) {
    const ChoiceNews& out = news[i];
    if (!out.any()) continue;
    json delta = json::object();
    if (!out.reasoning.empty()) delta["reasoning_content"] = out.reasoning;
    if (!out.text.empty() || (out.reasoning.empty() && out.calls.empty()))
      delta["content"] = out.text;
    if (!out.calls.empty()) delta["tool_calls"] = out.calls;
    const json logprobs =
        call->logprobs >= 0
            ? logprobs_json(*call->tokenizer, call->kind, out.entries, call->sent[i].text_offset)
            : json();
    if (!chunk(i, chat ? delta : json(out.text), nullptr,
               call->return_token_ids ? &out.ids : nullptr,
               call->logprobs >= 0 ? &logprobs : nullptr)) {
      call->cancel();  // the client went away: free its slots at the next step
      return false;
    }
  }
  if (!sink.alive()) {
    call->cancel();
    return false;
  }
  if (failure) {
    // One choice failed (an error, or the deadline): the stream ends with the error event.
    call->cancel();
    sink.write("data: " +
               dump(json{{"error",
                          {{"message",
                            failure_error ? failure_error->what() : "the request was cancelled"},
                           {"type", "server_error"},
                           {"code", failure_error ? code_text(failure_error->code)
                                                  : code_text(Errc::unavailable)}}}}) +
               "\n\n");
    sink.write("data: [DONE]\n\n");
    log_call(*call, 200);
    return false;
  }
  const std::vector<int64_t> none;
  for (size_t i = 0; i < n; ++i) {
    if (!news[i].ends) continue;
    call->sent[i].finish = true;
    if (!chunk(i, chat ? json::object() : json(""), finishes[i],
               call->return_token_ids ? &none : nullptr)) {
      call->cancel();
      return false;
    }
  }
  if (!all_done) return true;
  if (call->include_usage) {
    json c{
        {"id", call->id},           {"object", chat ? "chat.completion.chunk" : "text_completion"},
        {"created", call->created}, {"model", call->model},
        {"choices", json::array()}, {"usage", usage}};
    sink.write("data: " + dump(c) + "\n\n");
  }
  sink.write("data: [DONE]\n\n");
  log_call(*call, 200);
  return false;
}

}  // namespace sy::cli
