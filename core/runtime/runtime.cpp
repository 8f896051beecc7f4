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

std::string token_text(const Tokenizer& tok, int64_t id) {
  if (id < 0 || id >= tok.vocab_size()) return "<" + std::to_string(id) + ">";
  return tok.decode_token(id);
}

StopReason from_rule(StopRule::Reason r) {
  switch (r) {
    case StopRule::Reason::eos: return StopReason::eos;
    case StopRule::Reason::stop_text: return StopReason::stop_text;
    default: return StopReason::none;
  }
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
  std::string rendered =
      render_chat_prompt(model.generation, request.text, request.system, std::time(nullptr));
  return {model.tokenizer.encode(rendered), ""};
}

std::unique_ptr<PlannedModel> plan_model(const ModelSource& model, const ImportOptions& options,
                                         const Registry& registry, const Policy& policy) {
  auto p = std::make_unique<PlannedModel>();
  p->graph = model.import(options);
  p->inventory = live_inventory(registry);
  p->plan = plan_graph(p->graph, registry, p->inventory, policy);
  return p;
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

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::eos: return "eos";
    case StopReason::stop_text: return "stop_text";
    case StopReason::callback: return "callback";
    case StopReason::max_tokens: return "max_tokens";
    default: return "none";
  }
}

int64_t sample(const std::vector<float>& logits, const SamplingOptions& o, std::mt19937& rng) {
  if (o.temperature <= 0)
    return int64_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<std::pair<double, int64_t>> p;
  double mx = *std::max_element(logits.begin(), logits.end());
  for (size_t i = 0; i < logits.size(); ++i)
    p.emplace_back(std::exp((logits[i] - mx) / o.temperature), int64_t(i));
  std::sort(p.begin(), p.end(), std::greater<>());
  if (o.top_k > 0 && size_t(o.top_k) < p.size()) p.resize(size_t(o.top_k));
  double total = 0;
  for (const auto& x : p) total += x.first;
  double kept = 0;
  size_t n = 0;
  while (n < p.size() && (n == 0 || kept / total < o.top_p)) kept += p[n++].first;
  std::uniform_real_distribution<double> u(0, kept);
  double r = u(rng);
  for (size_t i = 0; i < n; ++i)
    if ((r -= p[i].first) <= 0) return p[i].second;
  return p[n - 1].second;
}

Generation Generator::generate(const std::vector<int64_t>& prompt, const SamplingOptions& o,
                               const TokenCallback& on_token) {
  if (int64_t(prompt.size()) + o.max_tokens > session_.context())
    throw Error(Errc::prompt_too_long,
                "the prompt (" + std::to_string(prompt.size()) + " tokens) plus max_tokens " +
                    std::to_string(o.max_tokens) + " exceed the context of " +
                    std::to_string(session_.context()));
  Generation g;
  g.prompt_tokens = int64_t(prompt.size());
  std::mt19937 rng(static_cast<std::mt19937::result_type>(o.seed));
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits = session_.prefill(prompt);
  g.prefill_ms = ms_since(t0);
  StopRule stop(o.ignore_eos ? std::vector<int64_t>{} : settings_.eos_ids, o.stop);
  auto t1 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.max_tokens && g.reason == StopReason::none; ++i) {
    const int64_t next = sample(logits, o, rng);
    g.ids.push_back(next);
    std::string emit;
    g.reason = from_rule(stop.feed(next, token_text(tokenizer_, next), emit));
    g.text += emit;
    if (on_token && !on_token(next, emit) && g.reason == StopReason::none)
      g.reason = StopReason::callback;
    if (g.reason == StopReason::none && i + 1 < o.max_tokens) {
      logits = session_.decode(next);
      ++g.decode_steps;
    }
  }
  if (g.reason == StopReason::none || g.reason == StopReason::callback) {
    std::string rest = stop.flush();  // the held-back tail was no stop text after all
    g.text += rest;
    if (on_token && !rest.empty()) on_token(-1, rest);
  }
  if (g.reason == StopReason::none) g.reason = StopReason::max_tokens;
  g.decode_ms = ms_since(t1);
  return g;
}

nlohmann::json memory_report(const Plan& plan, const Session& session) {
  nlohmann::json out = nlohmann::json::object();
  const auto allocated = session.memory_bytes();
  const auto& drop = session.device_free_drop();
  auto error = [](int64_t predicted, int64_t measured) {
    return measured > 0 ? double(predicted - measured) / double(measured) : 0.0;
  };
  for (const auto& l : plan.memory.locations) {
    const int64_t buffers = l.total() - l.workspace;
    auto a = allocated.find(l.location);
    const int64_t got = a == allocated.end() ? 0 : a->second;
    nlohmann::json j{
        {"predicted_bytes", l.total()},
        {"predicted",
         {{"weights", l.weights},
          {"kv_cache", l.kv_cache},
          {"activations", l.activations},
          {"copies", l.copies},
          {"workspace", l.workspace}}},
        {"buffers",
         {{"predicted_bytes", buffers}, {"allocated_bytes", got}, {"error", error(buffers, got)}}}};
    // Everything the location gave while the session was made, measured outside the executor:
    // the device's own free-memory figure, or the host process's resident anonymous memory.
    std::optional<int64_t> measured;
    std::string by;
    if (auto d = drop.find(l.location); d != drop.end())
      measured = d->second, by = "drop of the device's free memory (its plugin's memory_info)";
    else if (l.location == "host")
      measured = session.host_resident_growth(),
      by = "growth of the process's resident anonymous memory (RssAnon)";
    if (measured)
      j["measured"] = {{"bytes", *measured}, {"by", by}, {"error", error(l.total(), *measured)}};
    out[l.location] = j;
  }
  return out;
}

}  // namespace sy
