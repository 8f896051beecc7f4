#include "core/runtime/runtime.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <sstream>

#include "core/capability/vocabulary.hpp"

namespace sy {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

OpenedModel OpenedModel::open(const std::string& path,
                              const std::vector<std::string>& allowed_keys) {
  std::unique_ptr<ModelSource> source = ModelSource::open(path, allowed_keys);
  Tokenizer tokenizer = source->tokenizer();
  GenerationSettings generation = source->generation(tokenizer);
  return {std::move(source), std::move(tokenizer), std::move(generation)};
}

Prompt build_prompt(const OpenedModel& model, const PromptRequest& request) {
  if (!request.chat)
    return {plain_prompt_ids(model.tokenizer, model.generation, request.text), request.text};
  ChatMessages messages = request.messages;
  if (messages.empty()) {
    if (request.system) messages.emplace_back("system", *request.system);
    messages.emplace_back("user", request.text);
  }
  return {chat_prompt_ids(model.tokenizer, model.generation, messages, true, std::time(nullptr)),
          ""};
}

std::unique_ptr<PlannedModel> plan_model_for(const ModelSource& model, const ImportOptions& options,
                                             const Registry& registry, const Inventory& inventory,
                                             const Policy& policy) {
  auto import = [&](KvLayout layout) {
    ImportOptions o = options;
    o.kv_layout = layout;
    if (policy.kv_blocks) o.kv_blocks = *policy.kv_blocks;
    return model.import(o);
  };
  LayoutPlan lp = plan_layouts(import, options.max_sequences, registry, inventory, policy);
  auto p = std::make_unique<PlannedModel>();
  p->graph = std::move(lp.graph);
  p->inventory = inventory;
  p->plan = std::move(lp.plan);
  return p;
}

std::unique_ptr<PlannedModel> plan_model(ModelSource& model, const ImportOptions& options,
                                         const Registry& registry, const Policy& policy) {
  auto p = plan_model_for(model, options, registry, live_inventory(registry), policy);
  // Which host weights the file stores as the kernels read them: the executor maps those.
  if (!p->plan.ok() || !model.has_weights()) return p;
  WeightLoader load = model.weights();
  if (!load.map) return p;
  const std::set<std::string> on_host = parameters_at(p->graph, p->plan, kHostLocation);
  for (auto& l : p->plan.memory.locations) {
    if (l.location != kHostLocation) continue;
    for (const auto& v : p->graph.phases.front().values)
      if (v.kind == ValueKind::weight && on_host.count(v.name))
        if (const void* at = load.map(v); at && reinterpret_cast<uintptr_t>(at) % 32 == 0)
          l.weights_mapped += host_allocation_bytes(buffer_bytes(v.bytes()));
  }
  return p;
}

LoadedModel LoadedModel::plan(ModelSource& source, const ImportOptions& options,
                              const Registry& registry, const Policy& policy) {
  LoadedModel out;
  out.planned = plan_model(source, options, registry, policy);
  return out;
}

void LoadedModel::load(ModelSource& source, const Registry& registry,
                       const ContextOptions& context_options,
                       const std::function<WeightLoader(WeightLoader)>& wrap) {
  const PlannedModel& p = *planned;
  if (!p.plan.ok()) throw *p.plan.error;
  auto t0 = std::chrono::steady_clock::now();
  WeightLoader weights = source.weights();
  if (wrap) weights = wrap(weights);
  model = std::make_unique<Model>(p.graph, p.plan, registry, p.inventory, weights);
  context = std::make_unique<Context>(*model, context_options);
  load_ms = ms_since(t0);
}

LoadedModel LoadedModel::load(ModelSource& source, const ImportOptions& options,
                              const Registry& registry, const Policy& policy,
                              const ContextOptions& context_options,
                              const std::function<WeightLoader(WeightLoader)>& wrap) {
  LoadedModel out = plan(source, options, registry, policy);
  if (out.planned->plan.ok()) out.load(source, registry, context_options, wrap);
  return out;
}

Policy run_policy(const std::string& prefer, const std::string& attention, bool strict) {
  Policy policy;
  policy.attention = attention;
  policy.strict = strict;
  policy.prefer = {kDLCUDA, kDLCPU};
  if (!prefer.empty()) {
    policy.prefer.clear();
    std::stringstream ss(prefer);
    for (std::string item; std::getline(ss, item, ',');)
      if (auto t = parse_device_type(item)) policy.prefer.push_back(*t);
    policy.prefer_given = true;
  }
  return policy;
}

void run_tokens(Context& context, SeqId seq, std::span<const int64_t> tokens, bool every_logits,
                const std::function<void(size_t, const float*)>& on_logits,
                const AbortCheck& abort) {
  const size_t chunk = size_t(std::max<int64_t>(1, context.bounds().max_batch_tokens));
  Batch batch;
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    if (abort && abort()) return;
    const size_t end = std::min(tokens.size(), begin + chunk);
    int64_t position = context.sequence_length(seq);
    batch.clear();
    for (size_t i = begin; i < end; ++i)
      batch.add(tokens[i], position++, seq, every_logits || i + 1 == tokens.size());
    StepResult r = context.decode(batch);
    if (!r.ran) throw r.refused.front().error;
    for (size_t row = 0; row < context.logits_rows(); ++row)
      on_logits(every_logits ? begin + row : tokens.size() - 1, context.logits(row));
  }
}

Generation Generator::generate(const std::vector<int64_t>& prompt, const SamplingOptions& o,
                               const TokenCallback& on_token) {
  const SeqId seq = context_.add_sequence();
  const int64_t cached = context_.reuse_prefix(seq, prompt);
  std::vector<int64_t> rest(prompt.begin() + cached, prompt.end());
  Generation g = generate(seq, rest, o, on_token);
  g.prompt_tokens = int64_t(prompt.size());
  g.cached_tokens = cached;
  return g;
}

Generation Generator::continue_sequence(SeqId seq, const std::vector<int64_t>& conversation,
                                        const SamplingOptions& options,
                                        const TokenCallback& on_token, const AbortCheck& abort) {
  const std::vector<int64_t>& held = context_.sequence_tokens(seq);
  size_t common = 0;
  while (common < held.size() && common < conversation.size() &&
         held[common] == conversation[common])
    ++common;
  common = std::min(common, conversation.empty() ? 0 : conversation.size() - 1);
  context_.truncate_sequence(seq, int64_t(common));
  std::vector<int64_t> rest(conversation.begin() + long(common), conversation.end());
  Generation g = generate(seq, rest, options, on_token, abort);
  g.cached_tokens = int64_t(common);
  return g;
}

namespace {

// Collects one stream into a Generation and passes its tokens on to the caller's callback.
class GenerationSink final : public OutputSink {
 public:
  GenerationSink(Generation& g, const TokenCallback& on_token) : g_(g), on_token_(on_token) {}
  bool on_token(int64_t id, const std::string& text, const TokenLogprobs*) override {
    if (g_.ids.empty()) first_token_ = std::chrono::steady_clock::now();
    g_.ids.push_back(id);
    g_.text += text;
    return !on_token_ || on_token_(id, text);
  }
  void on_finish(FinishReason reason, const std::string& tail, const Error* error) override {
    g_.reason = reason;
    g_.text += tail;
    if (on_token_ && !tail.empty()) on_token_(-1, tail);
    if (error) error_ = *error;
    done_ = true;
  }
  bool done() const { return done_; }
  const std::optional<Error>& error() const { return error_; }
  std::chrono::steady_clock::time_point first_token() const { return first_token_; }

 private:
  Generation& g_;
  const TokenCallback& on_token_;
  std::optional<Error> error_;
  bool done_ = false;
  std::chrono::steady_clock::time_point first_token_{};
};

}  // namespace

Generation Generator::generate(SeqId seq, const std::vector<int64_t>& prompt,
                               const SamplingOptions& o, const TokenCallback& on_token,
                               const AbortCheck& abort) {
  const int64_t held = context_.sequence_length(seq);
  if (prompt.empty()) throw Error(Errc::invalid_argument, "generate: the prompt is empty");
  if (held + int64_t(prompt.size()) + o.max_tokens > context_.context_length())
    throw Error(Errc::prompt_too_long,
                "the prompt (" + std::to_string(prompt.size()) + " tokens" +
                    (held ? ", after the " + std::to_string(held) + " the sequence holds" : "") +
                    ") plus max_tokens " + std::to_string(o.max_tokens) +
                    " exceed the context of " + std::to_string(context_.context_length()));
  Generation g;
  g.prompt_tokens = int64_t(prompt.size());
  GenerationSink sink(g, on_token);
  const auto t0 = std::chrono::steady_clock::now();
  engine_.start(seq, prompt, o, sink);
  while (!sink.done()) {
    if (abort && abort())
      engine_.cancel(seq, FinishReason::callback);
    else
      engine_.step();
  }
  if (sink.error()) throw *sink.error();
  const auto t1 = g.ids.empty() ? std::chrono::steady_clock::now() : sink.first_token();
  g.prefill_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  g.decode_ms = ms_since(t1);
  // The last sampled token is not run (a next turn finds it by continue_sequence()).
  g.decode_steps = std::max<int64_t>(0, int64_t(g.ids.size()) - 1);
  return g;
}

nlohmann::json prediction_check(int64_t predicted, int64_t measured) {
  if (measured > 0) return {{"error", double(predicted - measured) / double(measured)}};
  return {{"error", nullptr},
          {"problem", "nothing was measured (" + std::to_string(measured) +
                          " bytes): the prediction of " + std::to_string(predicted) +
                          " bytes is unchecked"}};
}

nlohmann::json memory_report(const Plan& plan, const Model& model, const Context& context) {
  nlohmann::json out = nlohmann::json::object();
  std::map<std::string, int64_t> allocated = model.allocated_bytes(),
                                 drop = model.device_free_drop();
  for (const auto& [loc, b] : context.memory_bytes()) allocated[loc] += b;
  for (const auto& [loc, b] : context.device_free_drop()) drop[loc] += b;
  const int64_t resident = model.host_resident_growth() + context.host_resident_growth();
  const bool paged = plan.bounds.kv_layout == KvLayout::paged;
  for (const auto& l : plan.memory.locations) {
    const int64_t buffers = l.total() - l.workspace - l.weights_mapped;
    auto a = allocated.find(l.location);
    const int64_t got = a == allocated.end() ? 0 : a->second;
    nlohmann::json j{{"predicted_bytes", l.total()},
                     {"predicted",
                      {{"weights", l.weights},
                       {"kv_cache", l.kv_cache},
                       {"activations", l.activations},
                       {"copies", l.copies},
                       {"workspace", l.workspace}}},
                     {"buffers",
                      {{"predicted_bytes", buffers},
                       {"allocated_bytes", got},
                       {"by", "the allocator's size of each buffer (host: malloc_usable_size)"}}}};
    j["buffers"].update(prediction_check(buffers, got));
    // Everything the location gave while the session was made, measured outside the executor:
    // the device's own free-memory figure, or the host process's resident anonymous memory.
    std::optional<int64_t> measured;
    std::string by;
    int64_t predicted = l.total();
    if (auto d = drop.find(l.location); d != drop.end()) {
      measured = d->second, by = "drop of the device's free memory (its plugin's memory_info)";
    } else if (l.location == kHostLocation) {
      measured = resident, by = "growth of the process's resident anonymous memory (RssAnon)";
      // Mapped weights are the file's pages, not anonymous memory; an untouched KV pool is not
      // resident yet (its pages arrive as blocks are written).
      predicted -= l.weights_mapped + (paged ? l.kv_cache : 0);
    }
    j["predicted"]["weights_mapped"] = l.weights_mapped;
    if (measured) {
      j["measured"] = {{"bytes", *measured}, {"by", by}, {"predicted_bytes", predicted}};
      j["measured"].update(prediction_check(predicted, *measured));
    }
    out[l.location] = j;
  }
  return out;
}

}  // namespace sy
