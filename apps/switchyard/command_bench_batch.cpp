// `bench batch MODEL --sequences 1,4,8,16`: decode speed with many sequences in one step, the
// throughput a server gets from reading the weights once for all of them (the role llama.cpp's
// llama-batched-bench plays; the defaults are its -npp 128 -ntg 32). Per row: every sequence
// prefills its own prompt of --prompt-len tokens, then --steps decode steps run one token of
// every sequence each; aggregate tokens/s counts all sequences' decoded tokens. The machine's
// triad is measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/switchyard/bench_support.hpp"
#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/model_run.hpp"
#include "apps/switchyard/plan_flags.hpp"
#include "core/errors/errors.hpp"
#include "core/runtime/model_source.hpp"
#include "core/runtime/runtime.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

struct BatchArgs {
  std::string model, sequences = "1,4,8,16";
  int64_t prompt_len = 128, steps = 32;
  int repeats = 3;
  bool json = false;
  PlanFlags flags;
};

struct Row {
  int64_t sequences = 0;
  double step_ms = 0, aggregate = 0, per_sequence = 0;
  // Per timed step, from the context's profile (context.hpp StepProfile): the host's kernel
  // calls (one per segment), what the segments' plugins launched, replayed and waited for, and
  // the bytes of the step's outputs the host read (greedy ids: 8 a sequence).
  double calls = 0, launches = 0, graph_launches = 0, blocking_waits = 0, readback = 0;
};

// The profile's counters, summed: a step's share is the difference around it.
struct Counters {
  int64_t calls = 0, launches = 0, graphs = 0, waits = 0, readback = 0;
};
Counters counters(const Context& c) {
  const StepProfile& p = c.profile(c.layout() == KvLayout::paged ? "step" : "decode");
  return {p.kernel_calls, p.launches, p.graph_launches, p.blocking_waits, p.readback_bytes};
}

std::vector<int64_t> parse_counts(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
    }
    if (used != item.size() || v < 1) return {};
    out.push_back(v);
  }
  return out;
}

// Steps a batch and throws the first refusal (a bench sized its pool for every sequence).
void step(Context& c, const Batch& b) {
  StepResult r = c.decode(b);
  if (!r.ran) throw r.refused.front().error;
}

// `n` sequences, each with its own prompt, prefilled in steps of up to the plan's tokens (a
// prompt longer than a step runs in chunks); returns them with each one's next token (the
// greedy id of its prompt's last row, Context::greedy_token: what a greedy server stream takes).
std::vector<std::pair<SeqId, int64_t>> prefill(Context& c, int64_t n, int64_t prompt_len) {
  std::vector<std::pair<SeqId, int64_t>> seqs;
  for (int64_t s = 0; s < n; ++s) seqs.emplace_back(c.add_sequence(), 0);
  // Distinct prompts (no prefix is shared) of ids in [1, 1000], or the vocabulary's if smaller.
  const int64_t ids = std::min<int64_t>(1000, c.vocab() - 1);
  auto token = [&](int64_t s, int64_t i) { return 1 + (s * 7919 + i * 31) % ids; };
  const int64_t per_step = c.bounds().max_batch_tokens, max_seqs = c.bounds().max_sequences;
  int64_t s = 0, i = 0;  // the next prompt token to run: sequence s, position i
  while (s < n) {
    Batch b;
    std::vector<int64_t> done;  // sequences whose last prompt token is in this step
    int64_t in_step = 0;
    while (s < n && int64_t(b.tokens.size()) < per_step && in_step < max_seqs) {
      const int64_t take = std::min(prompt_len - i, per_step - int64_t(b.tokens.size()));
      for (int64_t k = 0; k < take; ++k, ++i)
        b.add(token(s, i), i, seqs[size_t(s)].first, i + 1 == prompt_len);
      ++in_step;
      if (i == prompt_len) done.push_back(s), ++s, i = 0;
    }
    step(c, b);
    for (size_t k = 0; k < done.size(); ++k) seqs[size_t(done[k])].second = c.greedy_token(k);
  }
  return seqs;
}

Row time_row(Context& c, int64_t n, const BatchArgs& a) {
  std::vector<double> step_ms;
  Counters sum;
  for (int r = 0; r < a.repeats; ++r) {
    auto seqs = prefill(c, n, a.prompt_len);
    for (int64_t i = 0; i < a.steps; ++i) {
      Batch b;
      for (const auto& [id, token] : seqs) b.add(token, c.sequence_length(id), id, true);
      const Counters before = counters(c);
      auto t0 = std::chrono::steady_clock::now();
      step(c, b);  // a step's time includes reading what the next one needs: the greedy ids
      for (size_t k = 0; k < seqs.size(); ++k) seqs[k].second = c.greedy_token(k);
      step_ms.push_back(ms_since(t0));
      const Counters after = counters(c);
      sum.calls += after.calls - before.calls;
      sum.launches += after.launches - before.launches;
      sum.graphs += after.graphs - before.graphs;
      sum.waits += after.waits - before.waits;
      sum.readback += after.readback - before.readback;
    }
    for (const auto& [id, token] : seqs) c.remove_sequence(id);
  }
  Row row;
  row.sequences = n;
  row.step_ms = median(step_ms);
  row.per_sequence = 1e3 / row.step_ms;
  row.aggregate = double(n) * row.per_sequence;
  const double steps = double(std::max<size_t>(step_ms.size(), 1));
  row.calls = double(sum.calls) / steps;
  row.launches = double(sum.launches) / steps;
  row.graph_launches = double(sum.graphs) / steps;
  row.blocking_waits = double(sum.waits) / steps;
  row.readback = double(sum.readback) / steps;
  return row;
}

}  // namespace

int bench_batch(const GlobalOptions& global, const Args& args) {
  BatchArgs a;
  po::options_description desc("switchyard bench batch options");
  desc.add_options()("help,h", "show this help")("model", po::value(&a.model),
                                                 "model folder or GGUF file")(
      "sequences", po::value(&a.sequences)->default_value("1,4,8,16"),
      "sequences decoded together, one row each, comma-separated")(
      "prompt-len", po::value(&a.prompt_len)->default_value(128), "each sequence's prompt")(
      "steps", po::value(&a.steps)->default_value(32), "decode steps timed per row and repeat")(
      "repeats", po::value(&a.repeats)->default_value(3), "timed repeats (median reported)")(
      "json", po::bool_switch(&a.json), "machine-readable output");
  a.flags.add(desc, 0, 0);
  po::positional_options_description pos;
  pos.add("model", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help") || a.model.empty()) {
    std::cout << "Usage: switchyard bench batch MODEL [options]\n" << desc << "\n" << kExitCodeHelp;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  const std::vector<int64_t> counts = parse_counts(a.sequences);
  if (counts.empty() || a.prompt_len < 1 || a.steps < 1 || a.repeats < 1) {
    std::cerr << "switchyard bench batch: --sequences a comma-separated list of counts >= 1, "
                 "--prompt-len, --steps and --repeats positive\n";
    return kExitUsage;
  }
  const int64_t most = *std::max_element(counts.begin(), counts.end());
  // Unless given: every row's sequences in one plan, each at its prompt plus the steps.
  if (vm["max-sequences"].defaulted()) a.flags.max_sequences = most;
  if (vm["context"].defaulted()) a.flags.context = a.prompt_len + a.steps + 1;
  ImportOptions opts;
  Policy policy;
  if (auto why = a.flags.apply(opts, policy)) {
    std::cerr << "switchyard bench batch: " << *why << "\n";
    return kExitUsage;
  }
  if (a.flags.max_sequences < most || a.flags.context < a.prompt_len + a.steps) {
    std::cerr << "switchyard bench batch: --max-sequences must hold the largest row and "
                 "--context a prompt plus the steps\n";
    return kExitUsage;
  }
  try {
    std::unique_ptr<ModelSource> model = ModelSource::open(a.model, a.flags.allowed_config_keys);
    Registry reg = discover_plugins(global, default_load_options());
    LoadedModel loaded = LoadedModel::load(*model, opts, reg, policy);
    if (!loaded.planned->plan.ok()) throw *loaded.planned->plan.error;
    Context& context = *loaded.context;
    const int threads = bench_threads();
    const double triad = triad_gbps(threads);
    time_row(context, counts.front(), a);  // warm-up
    std::vector<Row> rows;
    for (int64_t n : counts) rows.push_back(time_row(context, n, a));
    const sy_dtype dtype = loaded.planned->graph.phases.front().value("norm")->dtype;
    const char* dt = dtype == SY_DTYPE_F32 ? "f32" : dtype == SY_DTYPE_BF16 ? "bf16" : "f16";
    if (a.json) {
      json jr = json::array();
      for (const auto& r : rows)
        jr.push_back({{"sequences", r.sequences},
                      {"aggregate_tokens_per_s", r.aggregate},
                      {"per_sequence_tokens_per_s", r.per_sequence},
                      {"step_ms", r.step_ms},
                      {"host_calls_per_step", r.calls},
                      {"launches_per_step", r.launches},
                      {"graph_launches_per_step", r.graph_launches},
                      {"blocking_waits_per_step", r.blocking_waits},
                      {"readback_bytes_per_step", r.readback}});
      const json segments = segments_json(context);
      json j{{"bench", "batch"},      {"model", a.model},
             {"dtype", dt},           {"kv_layout", kv_layout_name(context.layout())},
             {"cpu", cpu_identity()}, {"prompt_len", a.prompt_len},
             {"steps", a.steps},      {"repeats", a.repeats},
             {"threads", threads},    {"rows", jr},
             {"segments", segments},  {"machine_bandwidth_gbps", triad}};
      std::cout << j.dump(2) << "\n";
      return kExitOk;
    }
    std::printf("model %s (%s, %s layout), on %s, %d threads; prompts of %lld tokens, %lld steps\n",
                a.model.c_str(), dt, kv_layout_name(context.layout()), cpu_identity().c_str(),
                threads, (long long)a.prompt_len, (long long)a.steps);
    std::printf("%-10s %16s %18s %10s %12s\n", "sequences", "aggregate tok/s", "per sequence tok/s",
                "step ms", "vs 1 seq");
    const double base = rows.front().sequences == 1 ? rows.front().aggregate : 0;
    for (const auto& r : rows) {
      std::printf("%-10lld %16.1f %18.1f %10.2f ", (long long)r.sequences, r.aggregate,
                  r.per_sequence, r.step_ms);
      if (base > 0)
        std::printf("%12.2f\n", r.aggregate / base);
      else
        std::printf("%12s\n", "-");  // no 1-sequence row to compare with
    }
    for (const auto& r : rows)
      std::printf(
          "%lld sequences, per step: %.0f host calls, %.0f launches (%.0f graphs), "
          "%.0f blocking waits, %.0f bytes read back\n",
          (long long)r.sequences, r.calls, r.launches, r.graph_launches, r.blocking_waits,
          r.readback);
    print_segments(context);
    std::printf("machine (same run, %d threads): triad %.1f GB/s\n", threads, triad);
    return kExitOk;
  } catch (const Error& e) {
    return fail("bench batch", e, a.json);
  }
}

}  // namespace sy::cli
