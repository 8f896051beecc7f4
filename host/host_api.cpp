// The host C API (include/switchyard/host.h) over core/runtime: handles are shared states in a
// registry of live pointers, so a NULL, destroyed or wrong-kind handle is SY401 rather than a
// crash; every entry point catches everything at the edge and answers with a catalog code.
#include "switchyard/host.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/capability/vocabulary.hpp"
#include "core/engine/engine.hpp"
#include "core/errors/errors.hpp"
#include "core/generation/generation.hpp"
#include "core/runtime/runtime.hpp"
#include "core/sampling/grammar.hpp"
#include "core/sampling/json_schema.hpp"
#include "core/sampling/token_mask.hpp"

namespace {

namespace fs = std::filesystem;
using sy::Errc;
using sy::Error;

// ---- handles ---------------------------------------------------------------------------------

struct RuntimeState {
  RuntimeState(sy::Registry r, std::shared_ptr<spdlog::logger> l)
      : registry(std::move(r)), logger(std::move(l)) {}
  sy::Registry registry;
  std::shared_ptr<spdlog::logger> logger;  // this runtime's log_callback, when it has one
  // Weights are loaded and contexts made one at a time: the model source maps its weights
  // then, and plugins prepare kernels.
  std::mutex loading;
};
struct ModelState {
  ModelState(std::shared_ptr<RuntimeState> r, sy::OpenedModel m)
      : runtime(std::move(r)), model(std::move(m)) {}
  std::shared_ptr<RuntimeState> runtime;
  sy::OpenedModel model;
};
struct PlanState {
  std::shared_ptr<ModelState> model;
  std::unique_ptr<sy::PlannedModel> planned;
  // The plan's weights, loaded by the first context or session that needs them and shared by
  // every one after (guarded by the runtime's `loading`).
  std::unique_ptr<sy::Model> weights;
};
// A context, and what its last step left for the caller (refusals).
struct ContextState {
  std::shared_ptr<PlanState> plan;
  std::unique_ptr<sy::Context> context;
  std::unique_ptr<sy::Generator> generator;
  std::vector<sy::SeqId> refused_seqs;
  std::vector<int32_t> refused_codes;
};
// A session: a context with one sequence of its own.
struct SessionState {
  std::shared_ptr<ContextState> context;
  sy::SeqId seq = 0;
};
// A sampler: the chain of core/sampling/ for one sequence, and its grammar's place.
struct SamplerState {
  std::shared_ptr<ModelState> model;
  sy::SamplingParams params;
  std::shared_ptr<const sy::Grammar> grammar;
  std::vector<int64_t> prompt;  // of the last reset
  std::optional<sy::Sampler> sampler;
  int64_t vocab = 0;  // the logits' length, fixed by the first sample (0: not yet)
  std::shared_ptr<sy::GrammarMasks> masks;
  std::optional<sy::GrammarConstraint> constraint;
  std::vector<float> masked;
};

enum class Kind { runtime, model, plan, context, session, sampler };

std::mutex g_handles_mu;
std::map<const void*, Kind> g_handles;

void add_handle(const void* h, Kind k) {
  std::lock_guard<std::mutex> lock(g_handles_mu);
  g_handles[h] = k;
}

// Removes `h` from the registry; false when it was not a live handle of kind `k`.
bool remove_handle(const void* h, Kind k) {
  std::lock_guard<std::mutex> lock(g_handles_mu);
  auto it = g_handles.find(h);
  if (!h || it == g_handles.end() || it->second != k) return false;
  g_handles.erase(it);
  return true;
}

// ---- errors ----------------------------------------------------------------------------------

int report(sy_host_error* out, const Error& e) {
  const sy::ErrorInfo& info = sy::error_info(e.code);
  if (out && out->struct_size >= sizeof(sy_host_error)) {
    out->code = int32_t(e.code);
    std::snprintf(out->code_text, sizeof out->code_text, "%s", info.code);
    std::snprintf(out->name, sizeof out->name, "%s", info.name);
    std::snprintf(out->message, sizeof out->message, "%s", e.what());
  }
  return int(e.code);
}

Error invalid_handle(const char* fn, const char* handle) {
  return Error(Errc::invalid_handle,
               std::string(fn) + ": the " + handle + " handle is NULL or was destroyed");
}

Error invalid_argument(const char* fn, const std::string& argument, const std::string& detail) {
  return Error(Errc::invalid_argument,
               std::string(fn) + ": " + argument + " is invalid: " + detail);
}

// Runs `body` with everything caught at the edge: a core Error keeps its code, anything else is
// an internal failure (SY301) or out of memory (SY305).
template <typename Body>
int guarded(const char* fn, sy_host_error* err, Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const Error& e) {
    return report(err, e);
  } catch (const std::bad_alloc&) {
    return report(err, Error(Errc::device_out_of_memory, std::string(fn) + ": out of host memory"));
  } catch (const std::exception& e) {
    return report(err, Error(Errc::kernel_failed, std::string(fn) + ": " + e.what()));
  } catch (...) {
    return report(err, Error(Errc::kernel_failed, std::string(fn) + ": unknown exception"));
  }
}

// Every options struct is at least as large as its 1.0 form, which ends with `last`.
template <typename T>
void require_size(const T* options, size_t minimum, const char* fn, const char* name) {
  if (options && options->struct_size < minimum)
    throw invalid_argument(fn, name,
                           "struct_size " + std::to_string(options->struct_size) +
                               " is smaller than version 1.0's " + std::to_string(minimum));
}
#define SY_MIN_SIZE(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

// ---- the runtime's plugin folders -------------------------------------------------------------

// `switchyard/plugins` beside this library: the layout of the install and of the build tree.
fs::path library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&sy_host_api_version), &info) && info.dli_fname)
    return fs::absolute(info.dli_fname).parent_path();
  return fs::current_path();
}

sy::SearchPath search_path(const sy_runtime_options* o) {
  sy::SearchPath path;
  if (o && o->num_plugin_dirs > 0) {
    if (!o->plugin_dirs)
      throw invalid_argument("sy_runtime_create", "options->plugin_dirs",
                             "NULL with num_plugin_dirs " + std::to_string(o->num_plugin_dirs));
    for (size_t i = 0; i < o->num_plugin_dirs; ++i)
      if (o->plugin_dirs[i]) path.dirs.emplace_back(o->plugin_dirs[i]);
    path.source = "sy_runtime_options.plugin_dirs";
    return path;
  }
  if (const char* env = std::getenv("SWITCHYARD_PLUGIN_PATH"); env && *env) {
    std::stringstream ss(env);
    for (std::string dir; std::getline(ss, dir, ':');)
      if (!dir.empty()) path.dirs.emplace_back(dir);
    path.source = "SWITCHYARD_PLUGIN_PATH";
    return path;
  }
  path.dirs.push_back(library_dir() / "switchyard" / "plugins");
  path.source = "default";
  return path;
}

// The core's logger (plugin/loader.hpp) for this process: silent unless `level` asks, and
// then on stderr. The embedding program's own spdlog default logger is left alone.
void set_logging(const char* level) {
  auto parsed = spdlog::level::off;
  if (level) {
    parsed = spdlog::level::from_str(level);
    if (parsed == spdlog::level::off && std::string(level) != "off")
      throw Error(Errc::invalid_argument,
                  std::string("sy_runtime_create: log_level is invalid: '") + level +
                      "' is not trace, debug, info, warn, err or off");
  }
  static std::mutex mu;  // two runtimes made at once must not both register the logger
  std::lock_guard<std::mutex> lock(mu);
  auto logger = spdlog::get(sy::kCoreLoggerName);
  if (!logger) logger = spdlog::stderr_color_mt(sy::kCoreLoggerName);
  logger->set_level(parsed);
}

nlohmann::json report_json(const sy::Registry& reg) {
  nlohmann::json plugins = nlohmann::json::array(), devices = nlohmann::json::array();
  for (const auto& r : reg.records()) {
    nlohmann::json p{{"name", r.name}, {"path", r.path.string()}, {"loaded", r.loaded()}};
    if (r.diagnostic) {
      p["stage"] = sy::load_stage_name(r.diagnostic->stage);
      p["reason"] = r.diagnostic->reason;
      p["code"] = sy::code_text(r.diagnostic->code());
    }
    if (r.loaded() && r.plugin->devices().empty())
      p["no_devices_reason"] = r.plugin->no_devices_reason();
    plugins.push_back(p);
  }
  for (const auto& d : sy::live_inventory(reg).devices) {
    nlohmann::json j{{"id", d.id},
                     {"name", d.info.name},
                     {"arch", d.info.arch},
                     {"available", d.info.available},
                     {"memory_bytes", d.info.memory_bytes},
                     {"plugins", d.plugins}};
    if (d.free_bytes) j["free_bytes"] = *d.free_bytes;
    if (!d.info.available) j["unavailable_reason"] = d.info.unavailable_reason;
    devices.push_back(j);
  }
  nlohmann::json dirs = nlohmann::json::array();
  for (const auto& d : reg.search_path().dirs) dirs.push_back(d.string());
  return {{"schema", "switchyard.host-report/1"},
          {"search_path", {{"dirs", dirs}, {"source", reg.search_path().source}}},
          {"plugins", plugins},
          {"devices", devices}};
}

sy::Policy plan_policy(const sy_plan_options& o) {
  sy::Policy p =
      sy::run_policy(o.prefer ? o.prefer : "", o.attention ? o.attention : "any", o.strict != 0);
  if (o.prefer && p.prefer.empty())
    throw invalid_argument("sy_plan_create", "options->prefer",
                           std::string("'") + o.prefer + "' names no device type (cpu, cuda)");
  if (o.memory_reserve_set) {
    if (o.memory_reserve < 0)
      throw invalid_argument("sy_plan_create", "options->memory_reserve", "negative");
    p.memory_reserve = o.memory_reserve;
  }
  for (size_t i = 0; i < o.num_memory_caps; ++i) {
    if (!o.memory_cap_locations || !o.memory_cap_locations[i] || !o.memory_cap_bytes ||
        o.memory_cap_bytes[i] < 0)
      throw invalid_argument("sy_plan_create", "options->memory_cap_*",
                             "entry " + std::to_string(i) + " needs a location and bytes >= 0");
    p.max_device_memory[sy::memory_location(o.memory_cap_locations[i])] = o.memory_cap_bytes[i];
  }
  return p;
}

// The engine's reasons as host.h names them: the context filling up is a length limit too.
int stop_code(sy::FinishReason r) {
  switch (r) {
    case sy::FinishReason::eos: return SY_STOP_EOS;
    case sy::FinishReason::stop_text: return SY_STOP_TEXT;
    case sy::FinishReason::callback:
    case sy::FinishReason::cancelled: return SY_STOP_CALLBACK;
    case sy::FinishReason::constraint_complete: return SY_STOP_GRAMMAR;
    default: return SY_STOP_MAX_TOKENS;
  }
}

// The state behind a live handle of kind `k`, copied under the registry's lock: a destroy on
// another thread either happened before (SY401) or frees the handle after the copy.
template <typename H>
auto state_of(H* h, Kind k, const char* fn, const char* name) {
  std::lock_guard<std::mutex> lock(g_handles_mu);
  auto it = g_handles.find(h);
  if (!h || it == g_handles.end() || it->second != k) throw invalid_handle(fn, name);
  return h->state;
}

// The vocabulary of a planned model: the rows of its token embedding.
int64_t vocab_of(const sy::PlannedModel& pm) {
  const sy::Value* table = pm.graph.find(sy::ValueRole::token_embedding);
  return table ? table->shape[0] : 0;
}

// Refuses a logits buffer too small before anything runs: a failed call changes nothing.
void require_logits_room(const sy::PlannedModel& pm, const float* out, size_t capacity,
                         const char* fn) {
  if (out && capacity < size_t(vocab_of(pm)))
    throw invalid_argument(
        fn, "capacity",
        std::to_string(capacity) + " floats, the vocabulary has " + std::to_string(vocab_of(pm)));
}

// A new context of a legal plan: the plan's weights loaded first if nothing of it did yet.
std::shared_ptr<ContextState> make_context(const std::shared_ptr<PlanState>& p,
                                           const sy::ContextOptions& options) {
  const sy::PlannedModel& pm = *p->planned;
  if (!pm.plan.ok()) throw *pm.plan.error;
  ModelState& m = *p->model;
  auto state = std::make_shared<ContextState>();
  state->plan = p;
  std::lock_guard<std::mutex> lock(m.runtime->loading);
  if (!p->weights)
    p->weights = std::make_unique<sy::Model>(pm.graph, pm.plan, m.runtime->registry, pm.inventory,
                                             m.model.source->weights());
  state->context = std::make_unique<sy::Context>(*p->weights, options);
  state->generator =
      std::make_unique<sy::Generator>(*state->context, m.model.tokenizer, m.model.generation);
  return state;
}

// The chain's parameters and grammar from sy_sampler_params (its zeros the defaults, as host.h
// says), checked by SamplingParams::validate against `vocab`; `name` is how errors name it.
struct Chain {
  sy::SamplingParams params;
  std::shared_ptr<const sy::Grammar> grammar;
};
Chain chain_of(const sy_sampler_params* p, int64_t vocab, const char* fn, const std::string& name) {
  require_size(p, SY_MIN_SIZE(sy_sampler_params, json_schema), fn, name.c_str());
  Chain c;
  c.params.temperature = p->temperature;
  c.params.top_k = p->top_k;
  c.params.top_p = p->top_p == 0 ? 1.0 : p->top_p;
  c.params.min_p = p->min_p;
  c.params.presence_penalty = p->presence_penalty;
  c.params.frequency_penalty = p->frequency_penalty;
  c.params.repetition_penalty = p->repetition_penalty == 0 ? 1.0 : p->repetition_penalty;
  c.params.seed = p->seed;
  if (p->num_logit_bias > 0 && (!p->logit_bias_ids || !p->logit_bias))
    throw invalid_argument(
        fn, name + "->logit_bias",
        "NULL ids or biases with num_logit_bias " + std::to_string(p->num_logit_bias));
  for (size_t i = 0; i < p->num_logit_bias; ++i)
    c.params.logit_bias.emplace_back(p->logit_bias_ids[i], double(p->logit_bias[i]));
  if (auto bad = c.params.validate(vocab))
    throw invalid_argument(fn, name + "->" + bad->field, bad->message);
  if (p->grammar && p->json_schema)
    throw invalid_argument(fn, name + "->grammar", "is set together with json_schema: give one");
  if (p->grammar) {
    try {
      c.grammar = sy::Grammar::from_gbnf(p->grammar);
    } catch (const sy::GrammarError& e) {
      throw invalid_argument(fn, name + "->grammar", e.what());
    }
  }
  if (p->json_schema) {
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(p->json_schema);
    } catch (const nlohmann::json::exception& e) {
      throw invalid_argument(fn, name + "->json_schema", std::string("is not JSON: ") + e.what());
    }
    try {
      c.grammar = sy::json_schema_grammar(schema);
    } catch (const sy::SchemaError& e) {
      throw invalid_argument(fn, name + "->json_schema at \"" + e.pointer() + "\"", e.message());
    }
  }
  return c;
}

// Sampling options from the C struct (NULL: every default), checked by SamplingParams::validate
// (top_p 0 means the default, 1, as host.h says).
sy::SamplingOptions sampling_of(const sy_generate_options* options, int64_t vocab, const char* fn) {
  sy::SamplingOptions o;
  if (!options) return o;
  if (options->max_tokens < 0)
    throw invalid_argument(fn, "options->max_tokens", "must be at least 0 (0: the default, 32)");
  o.max_tokens = options->max_tokens > 0 ? options->max_tokens : 32;
  const sy_sampler_params* chain =
      options->struct_size >= SY_MIN_SIZE(sy_generate_options, sampling) ? options->sampling
                                                                         : nullptr;
  if (chain) {
    for (const auto& [field, set] :
         {std::pair{"temperature", options->temperature != 0},
          std::pair{"top_k", options->top_k != 0}, std::pair{"top_p", options->top_p != 0},
          std::pair{"seed", options->seed != 0}})
      if (set)
        throw invalid_argument(fn, std::string("options->") + field,
                               "is set together with options->sampling, which has its own");
    Chain c = chain_of(chain, vocab, fn, "options->sampling");
    static_cast<sy::SamplingParams&>(o) = c.params;
    o.grammar = c.grammar;
  } else {
    o.temperature = options->temperature;
    o.top_k = options->top_k;
    o.top_p = options->top_p == 0 ? 1.0 : options->top_p;
    o.seed = options->seed;
    if (auto bad = o.validate()) throw invalid_argument(fn, "options->" + bad->field, bad->message);
  }
  o.ignore_eos = options->ignore_eos != 0;
  for (size_t i = 0; i < options->num_stop; ++i)
    if (options->stop && options->stop[i]) o.stop.emplace_back(options->stop[i]);
  return o;
}

sy::TokenCallback callback_of(const sy_generate_options* options) {
  if (!options || !options->on_token) return {};
  return [cb = options->on_token, user = options->user_data](int64_t id, const std::string& text) {
    return cb(user, id, text.data(), text.size()) == 0;
  };
}

sy::AbortCheck abort_of(const sy_generate_options* options) {
  if (!options || options->struct_size < SY_MIN_SIZE(sy_generate_options, abort_callback) ||
      !options->abort_callback)
    return {};
  return [cb = options->abort_callback, user = options->user_data] { return cb(user) != 0; };
}

// Ids the model cannot look up never reach a kernel: SY403, naming the first.
void require_vocab(const sy::PlannedModel& pm, const int64_t* ids, size_t count, const char* fn) {
  const int64_t vocab = vocab_of(pm);
  for (size_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      throw Error(Errc::bad_batch, std::string(fn) + ": token " + std::to_string(i) + ": id " +
                                       std::to_string(ids[i]) + " is outside the vocabulary [0, " +
                                       std::to_string(vocab) + ")");
}

void fill_result(const sy::Generation& g, sy_generate_result* result) {
  if (!result) return;
  result->generated_tokens = int64_t(g.ids.size());
  result->stop_reason = stop_code(g.reason);
  result->decode_steps = g.decode_steps;
  result->prefill_ms = g.prefill_ms;
  result->decode_ms = g.decode_ms;
  if (result->struct_size >= SY_MIN_SIZE(sy_generate_result, cached_tokens))
    result->cached_tokens = g.cached_tokens;
}

// `ids` into the caller's buffer, as sy_model_tokenize promises: the count always, the ids
// only when they fit.
void copy_ids(const std::vector<int64_t>& out, int64_t* ids, size_t capacity, size_t* count,
              const char* fn) {
  *count = out.size();
  if (out.size() > capacity)
    throw invalid_argument(
        fn, "capacity",
        std::to_string(capacity) + " ids, the text has " + std::to_string(out.size()));
  if (!out.empty() && !ids) throw invalid_argument(fn, "ids", "NULL");
  std::copy(out.begin(), out.end(), ids);
}

// A runtime's own logger: everything it and its plugins log goes to the program's callback.
class CallbackSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  CallbackSink(void (*fn)(void*, int32_t, const char*), void* user) : fn_(fn), user_(user) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string text(msg.payload.data(), msg.payload.size());
    const int32_t level = msg.level <= spdlog::level::trace   ? 0
                          : msg.level == spdlog::level::debug ? 1
                          : msg.level == spdlog::level::info  ? 2
                          : msg.level == spdlog::level::warn  ? 3
                                                              : 4;
    fn_(user_, level, text.c_str());
  }
  void flush_() override {}

 private:
  void (*fn_)(void*, int32_t, const char*);
  void* user_;
};

std::shared_ptr<spdlog::logger> callback_logger(void (*fn)(void*, int32_t, const char*), void* user,
                                                const char* level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && std::string(level) != "off")
    throw Error(Errc::invalid_argument, std::string("sy_runtime_create: log_level is invalid: '") +
                                            level +
                                            "' is not trace, debug, info, warn, err or off");
  auto logger = std::make_shared<spdlog::logger>("switchyard-runtime",
                                                 std::make_shared<CallbackSink>(fn, user));
  logger->set_level(parsed);
  return logger;
}

}  // namespace

struct sy_runtime {
  std::shared_ptr<RuntimeState> state;
};
struct sy_model {
  std::shared_ptr<ModelState> state;
};
struct sy_plan {
  std::shared_ptr<PlanState> state;
};
struct sy_context {
  std::shared_ptr<ContextState> state;
};
struct sy_session {
  std::shared_ptr<SessionState> state;
};
struct sy_sampler {
  std::shared_ptr<SamplerState> state;
};

namespace {

template <typename H>
int destroy(H* h, Kind k) {
  if (!remove_handle(h, k)) return int(Errc::invalid_handle);
  delete h;
  return 0;
}

}  // namespace

extern "C" {

uint32_t sy_host_api_version(void) {
  return (uint32_t(SY_HOST_API_VERSION_MAJOR) << 16) | SY_HOST_API_VERSION_MINOR;
}

const char* sy_host_error_name(int32_t code) {
  for (const auto& e : sy::error_catalog())
    if (int32_t(e.errc) == code) return e.name;
  return nullptr;
}

void sy_host_string_free(char* text) {
  std::free(text);
}

int sy_runtime_create(const sy_runtime_options* options, sy_runtime** runtime,
                      sy_host_error* error) {
  return guarded("sy_runtime_create", error, [&] {
    if (!runtime) throw invalid_argument("sy_runtime_create", "runtime", "NULL");
    require_size(options, SY_MIN_SIZE(sy_runtime_options, log_level), "sy_runtime_create",
                 "options");
    std::shared_ptr<spdlog::logger> logger;
    if (options && options->struct_size >= SY_MIN_SIZE(sy_runtime_options, log_user_data) &&
        options->log_callback)
      logger = callback_logger(options->log_callback, options->log_user_data,
                               options->log_level ? options->log_level : "info");
    else
      set_logging(options ? options->log_level : nullptr);
    sy::LoadOptions load;
    load.logger = logger;
    if (options && options->num_threads > 0)
      load.init_options.emplace_back("num_threads", std::to_string(options->num_threads));
    else if (const char* t = std::getenv("SWITCHYARD_NUM_THREADS"); t && *t)
      load.init_options.emplace_back("num_threads", t);
    auto state =
        std::make_shared<RuntimeState>(sy::Registry::discover(search_path(options), load), logger);
    auto* h = new sy_runtime{std::move(state)};
    add_handle(h, Kind::runtime);
    *runtime = h;
  });
}

int sy_runtime_destroy(sy_runtime* runtime) {
  return destroy(runtime, Kind::runtime);
}

int sy_runtime_report_json(sy_runtime* runtime, char** json, sy_host_error* error) {
  return guarded("sy_runtime_report_json", error, [&] {
    auto rt = state_of(runtime, Kind::runtime, "sy_runtime_report_json", "runtime");
    if (!json) throw invalid_argument("sy_runtime_report_json", "json", "NULL");
    *json = copy_string(report_json(rt->registry).dump(2));
  });
}

int sy_model_open(sy_runtime* runtime, const char* path, sy_model** model, sy_host_error* error) {
  return guarded("sy_model_open", error, [&] {
    auto rt = state_of(runtime, Kind::runtime, "sy_model_open", "runtime");
    if (!path || !*path) throw invalid_argument("sy_model_open", "path", "NULL or empty");
    if (!model) throw invalid_argument("sy_model_open", "model", "NULL");
    auto state = std::make_shared<ModelState>(rt, sy::OpenedModel::open(path, {}));
    auto* h = new sy_model{std::move(state)};
    add_handle(h, Kind::model);
    *model = h;
  });
}

int sy_model_destroy(sy_model* model) {
  return destroy(model, Kind::model);
}

int sy_model_tokenize(sy_model* model, const char* text, sy_prompt_kind kind, int64_t* ids,
                      size_t capacity, size_t* count, sy_host_error* error) {
  return guarded("sy_model_tokenize", error, [&] {
    auto m = state_of(model, Kind::model, "sy_model_tokenize", "model");
    if (!text) throw invalid_argument("sy_model_tokenize", "text", "NULL");
    if (!count) throw invalid_argument("sy_model_tokenize", "count", "NULL");
    if (kind != SY_PROMPT_PLAIN && kind != SY_PROMPT_CHAT)
      throw invalid_argument("sy_model_tokenize", "kind", std::to_string(int(kind)));
    sy::Prompt p = sy::build_prompt(m->model, {text, kind == SY_PROMPT_CHAT, std::nullopt, {}});
    copy_ids(p.ids, ids, capacity, count, "sy_model_tokenize");
  });
}

int sy_model_tokenize_chat(sy_model* model, const sy_chat_message* messages, size_t num_messages,
                           int32_t add_generation_prompt, int64_t* ids, size_t capacity,
                           size_t* count, sy_host_error* error) {
  return guarded("sy_model_tokenize_chat", error, [&] {
    auto m = state_of(model, Kind::model, "sy_model_tokenize_chat", "model");
    if (!count) throw invalid_argument("sy_model_tokenize_chat", "count", "NULL");
    if (num_messages == 0 || !messages)
      throw invalid_argument("sy_model_tokenize_chat", "messages", "NULL or empty");
    sy::ChatMessages list;
    for (size_t i = 0; i < num_messages; ++i) {
      if (!messages[i].role || !messages[i].content)
        throw invalid_argument("sy_model_tokenize_chat", "messages[" + std::to_string(i) + "]",
                               "NULL role or content");
      list.emplace_back(messages[i].role, messages[i].content);
    }
    copy_ids(sy::chat_prompt_ids(m->model.tokenizer, m->model.generation, list,
                                 add_generation_prompt != 0, std::time(nullptr)),
             ids, capacity, count, "sy_model_tokenize_chat");
  });
}

int sy_model_detokenize(sy_model* model, const int64_t* ids, size_t count, char* text,
                        size_t capacity, size_t* length, size_t* complete, sy_host_error* error) {
  return guarded("sy_model_detokenize", error, [&] {
    auto m = state_of(model, Kind::model, "sy_model_detokenize", "model");
    if (!length || !complete)
      throw invalid_argument("sy_model_detokenize", "length or complete", "NULL");
    if (count > 0 && !ids) throw invalid_argument("sy_model_detokenize", "ids", "NULL");
    const sy::Tokenizer& tok = m->model.tokenizer;
    std::string out;
    for (size_t i = 0; i < count; ++i) {
      if (ids[i] < 0 || ids[i] >= tok.vocab_size())
        throw invalid_argument("sy_model_detokenize", "ids[" + std::to_string(i) + "]",
                               std::to_string(ids[i]) + " is not a token of the tokenizer's " +
                                   std::to_string(tok.vocab_size()));
      out += tok.decode_token(ids[i]);
    }
    *length = out.size();
    *complete = out.size() - sy::incomplete_utf8_tail(out);
    if (out.size() > capacity)
      throw invalid_argument(
          "sy_model_detokenize", "capacity",
          std::to_string(capacity) + " bytes, the text has " + std::to_string(out.size()));
    if (!out.empty()) std::memcpy(text, out.data(), out.size());
  });
}

int sy_model_vocab_size(sy_model* model, int64_t* vocab, sy_host_error* error) {
  return guarded("sy_model_vocab_size", error, [&] {
    auto m = state_of(model, Kind::model, "sy_model_vocab_size", "model");
    if (!vocab) throw invalid_argument("sy_model_vocab_size", "vocab", "NULL");
    *vocab = m->model.tokenizer.vocab_size();
  });
}

int sy_plan_create(sy_model* model, const sy_plan_options* options, sy_plan** plan,
                   sy_host_error* error) {
  int planned_code = 0;
  const int status = guarded("sy_plan_create", error, [&] {
    auto m = state_of(model, Kind::model, "sy_plan_create", "model");
    if (!options) throw invalid_argument("sy_plan_create", "options", "NULL");
    require_size(options, SY_MIN_SIZE(sy_plan_options, num_memory_caps), "sy_plan_create",
                 "options");
    if (!plan) throw invalid_argument("sy_plan_create", "plan", "NULL");
    if (options->prompt_tokens < 1)
      throw invalid_argument("sy_plan_create", "options->prompt_tokens", "must be >= 1");
    if (options->context < 0)
      throw invalid_argument("sy_plan_create", "options->context", "negative");
    sy::ImportOptions opts;
    opts.max_batch_tokens = options->prompt_tokens;
    opts.context = options->context > 0 ? options->context : 1024;
    if (options->dtype) opts.dtype_override = options->dtype;
    sy::Policy policy = plan_policy(*options);
    if (options->struct_size >= SY_MIN_SIZE(sy_plan_options, kv_blocks)) {
      if (options->max_sequences < 0 || options->kv_blocks < 0)
        throw invalid_argument("sy_plan_create", "options->max_sequences or kv_blocks", "negative");
      if (options->max_sequences > 0) opts.max_sequences = options->max_sequences;
      if (options->kv_blocks > 0) policy.kv_blocks = options->kv_blocks;
    }
    if (options->struct_size >= SY_MIN_SIZE(sy_plan_options, numerics) && options->numerics) {
      const auto n = sy::parse_numerics(options->numerics);
      if (!n)
        throw invalid_argument(
            "sy_plan_create", "options->numerics",
            std::string("'") + options->numerics + "' is not " + sy::kNumericsChoices);
      policy.numerics = *n;
    }
    auto state = std::make_shared<PlanState>();
    state->model = m;
    state->planned = sy::plan_model(*m->model.source, opts, m->runtime->registry, policy);
    if (!state->planned->plan.ok()) planned_code = report(error, *state->planned->plan.error);
    auto* h = new sy_plan{std::move(state)};
    add_handle(h, Kind::plan);
    *plan = h;
  });
  return status ? status : planned_code;
}

int sy_plan_destroy(sy_plan* plan) {
  return destroy(plan, Kind::plan);
}

int sy_plan_status(sy_plan* plan, sy_host_error* error) {
  int code = 0;
  const int status = guarded("sy_plan_status", error, [&] {
    auto p = state_of(plan, Kind::plan, "sy_plan_status", "plan");
    if (!p->planned->plan.ok()) code = report(error, *p->planned->plan.error);
  });
  return status ? status : code;
}

int sy_plan_json(sy_plan* plan, char** json, sy_host_error* error) {
  return guarded("sy_plan_json", error, [&] {
    auto p = state_of(plan, Kind::plan, "sy_plan_json", "plan");
    if (!json) throw invalid_argument("sy_plan_json", "json", "NULL");
    *json = copy_string(sy::to_json(p->planned->plan).dump(2));
  });
}

int sy_context_create(sy_plan* plan, const sy_context_options* options, sy_context** context,
                      sy_host_error* error) {
  return guarded("sy_context_create", error, [&] {
    auto p = state_of(plan, Kind::plan, "sy_context_create", "plan");
    if (!context) throw invalid_argument("sy_context_create", "context", "NULL");
    require_size(options, SY_MIN_SIZE(sy_context_options, kv_blocks), "sy_context_create",
                 "options");
    sy::ContextOptions o;
    if (options) {
      if (options->kv_blocks < 0)
        throw invalid_argument("sy_context_create", "options->kv_blocks", "negative");
      o.kv_blocks = options->kv_blocks;
    }
    auto* h = new sy_context{make_context(p, o)};
    add_handle(h, Kind::context);
    *context = h;
  });
}

int sy_context_destroy(sy_context* context) {
  return destroy(context, Kind::context);
}

int sy_seq_add(sy_context* context, sy_seq_id* seq, sy_host_error* error) {
  return guarded("sy_seq_add", error, [&] {
    auto c = state_of(context, Kind::context, "sy_seq_add", "context");
    if (!seq) throw invalid_argument("sy_seq_add", "seq", "NULL");
    *seq = c->context->add_sequence();
  });
}

int sy_seq_remove(sy_context* context, sy_seq_id seq, sy_host_error* error) {
  return guarded("sy_seq_remove", error, [&] {
    auto c = state_of(context, Kind::context, "sy_seq_remove", "context");
    c->context->remove_sequence(seq);
  });
}

int sy_seq_fork(sy_context* context, sy_seq_id seq, sy_seq_id* fork, sy_host_error* error) {
  return guarded("sy_seq_fork", error, [&] {
    auto c = state_of(context, Kind::context, "sy_seq_fork", "context");
    if (!fork) throw invalid_argument("sy_seq_fork", "fork", "NULL");
    *fork = c->context->fork_sequence(seq);
  });
}

int sy_seq_truncate(sy_context* context, sy_seq_id seq, int64_t length, sy_host_error* error) {
  return guarded("sy_seq_truncate", error, [&] {
    auto c = state_of(context, Kind::context, "sy_seq_truncate", "context");
    c->context->truncate_sequence(seq, length);
  });
}

int sy_seq_length(sy_context* context, sy_seq_id seq, int64_t* length, sy_host_error* error) {
  return guarded("sy_seq_length", error, [&] {
    auto c = state_of(context, Kind::context, "sy_seq_length", "context");
    if (!length) throw invalid_argument("sy_seq_length", "length", "NULL");
    *length = c->context->sequence_length(seq);
  });
}

int sy_seq_reuse_prefix(sy_context* context, sy_seq_id seq, const int64_t* tokens, size_t count,
                        int64_t* reused, sy_host_error* error) {
  return guarded("sy_seq_reuse_prefix", error, [&] {
    auto c = state_of(context, Kind::context, "sy_seq_reuse_prefix", "context");
    if (!reused || (count > 0 && !tokens))
      throw invalid_argument("sy_seq_reuse_prefix", "tokens or reused", "NULL");
    *reused = c->context->reuse_prefix(seq, std::span(tokens, count));
  });
}

int sy_context_decode(sy_context* context, const sy_batch* batch, sy_decode_result* result,
                      sy_host_error* error) {
  int refused = 0;
  const int status = guarded("sy_context_decode", error, [&] {
    auto c = state_of(context, Kind::context, "sy_context_decode", "context");
    if (!batch) throw invalid_argument("sy_context_decode", "batch", "NULL");
    require_size(batch, SY_MIN_SIZE(sy_batch, logits), "sy_context_decode", "batch");
    require_size(result, SY_MIN_SIZE(sy_decode_result, refused_codes), "sy_context_decode",
                 "result");
    if (batch->n_tokens > 0 && (!batch->tokens || !batch->positions || !batch->seq_ids))
      throw invalid_argument("sy_context_decode", "batch", "NULL tokens, positions or seq_ids");
    sy::Batch b;
    for (size_t i = 0; i < batch->n_tokens; ++i)
      b.add(batch->tokens[i], batch->positions[i], batch->seq_ids[i],
            batch->logits ? batch->logits[i] != 0 : i + 1 == batch->n_tokens);
    c->refused_seqs.clear();
    c->refused_codes.clear();
    sy::StepResult r = c->context->decode(b);
    for (const auto& x : r.refused) {
      c->refused_seqs.push_back(x.seq);
      c->refused_codes.push_back(int32_t(x.error.code));
    }
    if (result) {
      result->ran = r.ran ? 1 : 0;
      result->n_logits = r.ran ? c->context->logits_rows() : 0;
      result->n_refused = r.refused.size();
      result->refused_seqs = c->refused_seqs.data();
      result->refused_codes = c->refused_codes.data();
    }
    if (!r.ran) refused = report(error, r.refused.front().error);
  });
  return status ? status : refused;
}

int sy_context_logits(sy_context* context, size_t i, const float** logits, sy_host_error* error) {
  return guarded("sy_context_logits", error, [&] {
    auto c = state_of(context, Kind::context, "sy_context_logits", "context");
    if (!logits) throw invalid_argument("sy_context_logits", "logits", "NULL");
    if (i >= c->context->logits_rows())
      throw invalid_argument("sy_context_logits", "i",
                             std::to_string(i) + " is not below the last step's " +
                                 std::to_string(c->context->logits_rows()) + " rows of logits");
    *logits = c->context->logits(i);
  });
}

int sy_context_generate(sy_context* context, sy_seq_id seq, const int64_t* prompt,
                        size_t prompt_count, const sy_generate_options* options, int64_t* out_ids,
                        size_t capacity, sy_generate_result* result, sy_host_error* error) {
  return guarded("sy_context_generate", error, [&] {
    auto c = state_of(context, Kind::context, "sy_context_generate", "context");
    if (!prompt || prompt_count == 0)
      throw invalid_argument("sy_context_generate", "prompt", "NULL or empty");
    require_size(options, SY_MIN_SIZE(sy_generate_options, user_data), "sy_context_generate",
                 "options");
    require_size(result, SY_MIN_SIZE(sy_generate_result, decode_ms), "sy_context_generate",
                 "result");
    if (capacity > 0 && !out_ids) throw invalid_argument("sy_context_generate", "out_ids", "NULL");
    require_vocab(*c->plan->planned, prompt, prompt_count, "sy_context_generate");
    const sy::SamplingOptions o =
        sampling_of(options, vocab_of(*c->plan->planned), "sy_context_generate");
    sy::Generation g =
        c->generator->continue_sequence(seq, std::vector<int64_t>(prompt, prompt + prompt_count), o,
                                        callback_of(options), abort_of(options));
    std::copy_n(g.ids.begin(), std::min(capacity, g.ids.size()), out_ids);
    fill_result(g, result);
  });
}

int sy_session_create(sy_plan* plan, sy_session** session, sy_host_error* error) {
  return guarded("sy_session_create", error, [&] {
    auto p = state_of(plan, Kind::plan, "sy_session_create", "plan");
    if (!session) throw invalid_argument("sy_session_create", "session", "NULL");
    auto state = std::make_shared<SessionState>();
    state->context = make_context(p, {});
    state->seq = state->context->context->add_sequence();
    auto* h = new sy_session{std::move(state)};
    add_handle(h, Kind::session);
    *session = h;
  });
}

int sy_session_destroy(sy_session* session) {
  return destroy(session, Kind::session);
}

int sy_session_info_get(sy_session* session, sy_session_info* info, sy_host_error* error) {
  return guarded("sy_session_info_get", error, [&] {
    auto s = state_of(session, Kind::session, "sy_session_info_get", "session");
    if (!info) throw invalid_argument("sy_session_info_get", "info", "NULL");
    require_size(info, SY_MIN_SIZE(sy_session_info, position), "sy_session_info_get", "info");
    const sy::Context& c = *s->context->context;
    info->vocab_size = c.vocab();
    info->context = c.context_length();
    info->prompt_tokens = c.bounds().max_batch_tokens;
    info->position = c.sequence_length(s->seq);
  });
}

// Runs `ids` after what the session's sequence holds and writes the last one's logits.
void session_run(SessionState& s, const int64_t* ids, size_t count, float* logits) {
  sy::Context& c = *s.context->context;
  sy::run_tokens(c, s.seq, std::span(ids, count), false, [&](size_t, const float* row) {
    if (logits) std::copy(row, row + c.vocab(), logits);
  });
}

int sy_session_prefill(sy_session* session, const int64_t* ids, size_t count, float* logits,
                       size_t capacity, sy_host_error* error) {
  return guarded("sy_session_prefill", error, [&] {
    auto s = state_of(session, Kind::session, "sy_session_prefill", "session");
    if (!ids || count == 0) throw invalid_argument("sy_session_prefill", "ids", "NULL or empty");
    const sy::PlannedModel& pm = *s->context->plan->planned;
    require_logits_room(pm, logits, capacity, "sy_session_prefill");
    require_vocab(pm, ids, count, "sy_session_prefill");
    sy::Context& c = *s->context->context;
    if (int64_t(count) > c.context_length())
      throw Error(Errc::prompt_too_long, "sy_session_prefill: the prompt has " +
                                             std::to_string(count) + " tokens, the context " +
                                             std::to_string(c.context_length()));
    c.truncate_sequence(s->seq, 0);  // prefill starts over, as in 1.0
    session_run(*s, ids, count, logits);
  });
}

int sy_session_decode(sy_session* session, int64_t token, float* logits, size_t capacity,
                      sy_host_error* error) {
  return guarded("sy_session_decode", error, [&] {
    auto s = state_of(session, Kind::session, "sy_session_decode", "session");
    const sy::PlannedModel& pm = *s->context->plan->planned;
    require_logits_room(pm, logits, capacity, "sy_session_decode");
    require_vocab(pm, &token, 1, "sy_session_decode");
    session_run(*s, &token, 1, logits);
  });
}

int sy_session_generate(sy_session* session, const int64_t* prompt, size_t prompt_count,
                        const sy_generate_options* options, int64_t* out_ids, size_t capacity,
                        sy_generate_result* result, sy_host_error* error) {
  return guarded("sy_session_generate", error, [&] {
    auto s = state_of(session, Kind::session, "sy_session_generate", "session");
    if (!prompt || prompt_count == 0)
      throw invalid_argument("sy_session_generate", "prompt", "NULL or empty");
    require_size(options, SY_MIN_SIZE(sy_generate_options, user_data), "sy_session_generate",
                 "options");
    require_size(result, SY_MIN_SIZE(sy_generate_result, decode_ms), "sy_session_generate",
                 "result");
    if (capacity > 0 && !out_ids) throw invalid_argument("sy_session_generate", "out_ids", "NULL");
    require_vocab(*s->context->plan->planned, prompt, prompt_count, "sy_session_generate");
    const sy::SamplingOptions o =
        sampling_of(options, vocab_of(*s->context->plan->planned), "sy_session_generate");
    // The session's sequence starts over: what it shares with the prompt from the start stays.
    sy::Generation g = s->context->generator->continue_sequence(
        s->seq, std::vector<int64_t>(prompt, prompt + prompt_count), o, callback_of(options),
        abort_of(options));
    std::copy_n(g.ids.begin(), std::min(capacity, g.ids.size()), out_ids);
    fill_result(g, result);
  });
}

int sy_session_memory_json(sy_session* session, char** json, sy_host_error* error) {
  return guarded("sy_session_memory_json", error, [&] {
    auto s = state_of(session, Kind::session, "sy_session_memory_json", "session");
    if (!json) throw invalid_argument("sy_session_memory_json", "json", "NULL");
    const ContextState& c = *s->context;
    *json =
        copy_string(sy::memory_report(c.plan->planned->plan, *c.plan->weights, *c.context).dump(2));
  });
}

}  // extern "C"

// ---- sampler --------------------------------------------------------------------------------

namespace {

void reset_sampler(SamplerState& s) {
  s.sampler.emplace(s.params, s.prompt);
  if (s.masks) s.constraint.emplace(s.masks);
}

// The grammar's masks over the vocabulary, made once the sampler's vocabulary is fixed (the
// first sample's logits, or the tokenizer's when a token is accepted first).
void ensure_masks(SamplerState& s) {
  if (s.masks) return;
  const sy::Tokenizer& tok = s.model->model.tokenizer;
  if (s.vocab == 0) s.vocab = tok.vocab_size();
  s.masks = std::make_shared<sy::GrammarMasks>(s.grammar, sy::vocabulary_table(tok, s.vocab));
  s.constraint.emplace(s.masks);
}

}  // namespace

int sy_sampler_create(sy_model* model, const sy_sampler_params* params, sy_sampler** sampler,
                      sy_host_error* error) {
  return guarded("sy_sampler_create", error, [&] {
    auto m = state_of(model, Kind::model, "sy_sampler_create", "model");
    if (!params) throw invalid_argument("sy_sampler_create", "params", "NULL");
    if (!sampler) throw invalid_argument("sy_sampler_create", "sampler", "NULL");
    Chain c = chain_of(params, m->model.tokenizer.vocab_size(), "sy_sampler_create", "params");
    auto state = std::make_shared<SamplerState>();
    state->model = m;
    state->params = std::move(c.params);
    state->grammar = std::move(c.grammar);
    reset_sampler(*state);
    auto* h = new sy_sampler{std::move(state)};
    add_handle(h, Kind::sampler);
    *sampler = h;
  });
}

int sy_sampler_destroy(sy_sampler* sampler) {
  return destroy(sampler, Kind::sampler);
}

int sy_sampler_reset(sy_sampler* sampler, const int64_t* prompt, size_t count,
                     sy_host_error* error) {
  return guarded("sy_sampler_reset", error, [&] {
    auto s = state_of(sampler, Kind::sampler, "sy_sampler_reset", "sampler");
    if (count > 0 && !prompt) throw invalid_argument("sy_sampler_reset", "prompt", "NULL");
    s->prompt.assign(prompt, prompt + count);
    reset_sampler(*s);
  });
}

int sy_sampler_sample(sy_sampler* sampler, const float* logits, size_t n_vocab, int64_t* token,
                      sy_host_error* error) {
  return guarded("sy_sampler_sample", error, [&] {
    const char* fn = "sy_sampler_sample";
    auto s = state_of(sampler, Kind::sampler, fn, "sampler");
    if (!logits || n_vocab == 0) throw invalid_argument(fn, "logits", "NULL or empty");
    if (!token) throw invalid_argument(fn, "token", "NULL");
    if (s->vocab != 0 && int64_t(n_vocab) != s->vocab)
      throw invalid_argument(
          fn, "n_vocab",
          std::to_string(n_vocab) + ", the sampler's first was " + std::to_string(s->vocab));
    for (const auto& [id, bias] : s->params.logit_bias)
      if (id >= int64_t(n_vocab))
        throw invalid_argument(
            fn, "n_vocab",
            std::to_string(n_vocab) + " leaves out logit_bias id " + std::to_string(id));
    s->vocab = int64_t(n_vocab);
    const std::span<const float> row(logits, n_vocab);
    if (!s->grammar) {
      *token = s->sampler->sample(row);
      return;
    }
    ensure_masks(*s);
    s->masked.assign(row.begin(), row.end());
    if (s->constraint->mask(s->masked, s->model->model.generation.eos_ids) == 0)
      throw Error(Errc::bad_tokenizer, std::string(fn) +
                                           ": no token of the vocabulary continues the grammar "
                                           "here (it needs bytes no token has)");
    *token = s->sampler->sample(s->masked);
    s->constraint->accept(*token);
  });
}

int sy_sampler_accept(sy_sampler* sampler, int64_t token, sy_host_error* error) {
  return guarded("sy_sampler_accept", error, [&] {
    const char* fn = "sy_sampler_accept";
    auto s = state_of(sampler, Kind::sampler, fn, "sampler");
    const sy::Tokenizer& tok = s->model->model.tokenizer;
    if (token < 0 || (s->vocab > 0 ? token >= s->vocab : token >= tok.vocab_size()))
      throw invalid_argument(fn, "token", std::to_string(token) + " is outside the vocabulary");
    if (s->grammar) {
      ensure_masks(*s);
      const auto& eos = s->model->model.generation.eos_ids;
      const bool is_eos = std::find(eos.begin(), eos.end(), token) != eos.end();
      const sy::TokenTable& table = *s->masks->table();
      sy::GrammarState probe = s->constraint->state();
      const bool fits =
          is_eos ? probe.accepting() : !table.control(token) && probe.feed(table.bytes(token));
      if (!fits)
        throw invalid_argument(
            fn, "token", std::to_string(token) + " cannot continue the grammar's output here");
      s->constraint->accept(token);
    }
    s->sampler->accept(token);
  });
}

int sy_sampler_complete(sy_sampler* sampler, int32_t* complete, sy_host_error* error) {
  return guarded("sy_sampler_complete", error, [&] {
    auto s = state_of(sampler, Kind::sampler, "sy_sampler_complete", "sampler");
    if (!complete) throw invalid_argument("sy_sampler_complete", "complete", "NULL");
    *complete = s->constraint && s->constraint->complete() ? 1 : 0;
  });
}
