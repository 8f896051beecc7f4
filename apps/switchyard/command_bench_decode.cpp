// `bench decode MODEL` (a folder or GGUF file): the model's own prefill and decode speed, against
// this machine's ceilings measured in the same run — prefill FLOP/s ÷ GEMM rate, decode bytes/s ÷
// triad. The figures users and the issues quote. Weights come from the folder; the tokens are fixed
// ids (speed does not depend on them), decoded greedily from there.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/switchyard/bench_support.hpp"
#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/model_cost.hpp"
#include "core/errors/errors.hpp"
#include "core/importer/importer.hpp"
#include "core/runtime/model_source.hpp"
#include "core/runtime/runtime.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using nlohmann::json;

struct DecodeArgs {
  std::string model, dtype, depths = "0,512", numerics;
  int64_t prompt_len = 512, steps = 16;
  int repeats = 3;
  bool json = false;
};

struct DepthFigures {
  int64_t depth = 0;
  double ms_per_token = 0, tokens_per_s = 0, gbps = 0, ratio = 0;
  double read_gbps = 0, ratio_read = 0;  // a same-run read of a buffer of the step's bytes
  StepBytes bytes;
};

// Runs `tokens` after sequence `seq`'s cache (chunks of the plan's step), and returns the argmax
// of the last token's logits.
int64_t feed(Context& c, SeqId seq, std::span<const int64_t> tokens) {
  int64_t next = 0;
  run_tokens(c, seq, tokens, false, [&](size_t, const float* row) {
    next = int64_t(std::max_element(row, row + c.vocab()) - row);
  });
  return next;
}

// Median time of one decode step from `depth`: `steps` greedy steps, `repeats` times over, on a
// sequence holding the prompt cut (or decoded on) to `depth`.
DepthFigures time_decode(Context& c, const Phase& phase, const std::vector<int64_t>& prompt,
                         int64_t depth, const DecodeArgs& a, double triad) {
  std::vector<double> step_ms;
  for (int r = 0; r < a.repeats; ++r) {
    const SeqId seq = c.add_sequence();
    const size_t fed = size_t(std::min<int64_t>(depth, int64_t(prompt.size())));
    int64_t token = fed > 0 ? feed(c, seq, std::span(prompt.data(), fed)) : 1;
    while (c.sequence_length(seq) < depth) token = feed(c, seq, std::span(&token, 1));
    for (int64_t i = 0; i < a.steps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      token = feed(c, seq, std::span(&token, 1));
      step_ms.push_back(ms_since(t0));
    }
    c.remove_sequence(seq);
  }
  DepthFigures f;
  f.depth = depth;
  f.ms_per_token = median(step_ms);
  f.tokens_per_s = 1e3 / f.ms_per_token;
  f.bytes = step_bytes(phase, {1, 1, 1, depth + a.steps / 2 + 1});  // the middle step's cache
  f.gbps = f.bytes.total() / (f.ms_per_token * 1e-3) / 1e9;
  f.ratio = triad > 0 ? f.gbps / triad : 0;
  f.read_gbps = read_gbps(bench_threads(), size_t(f.bytes.total()));
  f.ratio_read = f.read_gbps > 0 ? f.gbps / f.read_gbps : 0;
  return f;
}

std::vector<int64_t> parse_depths(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
    }
    if (used != item.size() || v < 0) return {};
    out.push_back(v);
  }
  return out;
}

}  // namespace

int bench_decode(const GlobalOptions& global, const Args& args) {
  DecodeArgs a;
  po::options_description desc("switchyard bench decode options");
  desc.add_options()("help,h", "show this help")(
      "model", po::value(&a.model), "model folder or GGUF file")("json", po::bool_switch(&a.json),
                                                                 "machine-readable output")(
      "dtype", po::value(&a.dtype), "run in f32|bf16 instead of the config's dtype")(
      "prompt-len", po::value(&a.prompt_len)->default_value(512), "tokens prefilled")(
      "depths", po::value(&a.depths)->default_value("0,512"),
      "cache depths decode is timed at, comma-separated")(
      "steps", po::value(&a.steps)->default_value(16), "decode steps timed per depth and repeat")(
      "repeats", po::value(&a.repeats)->default_value(3), "timed repeats (median reported)")(
      "numerics", po::value(&a.numerics)->default_value(numerics_name(kDefaultNumerics)),
      "exact|auto|fast (docs/numerics.md)");
  po::positional_options_description pos;
  pos.add("model", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help") || a.model.empty()) {
    std::cout << "Usage: switchyard bench decode MODEL [options]\n"
              << desc << "\n"
              << kExitCodeHelp;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  std::vector<int64_t> depths = parse_depths(a.depths);
  if (!parse_numerics(a.numerics)) {
    std::cerr << "switchyard bench decode: --numerics must be " << kNumericsChoices << "\n";
    return kExitUsage;
  }
  if (depths.empty() || a.prompt_len < 1 || a.steps < 1 || a.repeats < 1) {
    std::cerr << "switchyard bench decode: --prompt-len, --steps and --repeats must be positive, "
                 "--depths a comma-separated list of depths >= 0\n";
    return kExitUsage;
  }
  const int64_t deepest = *std::max_element(depths.begin(), depths.end());
  try {
    std::unique_ptr<ModelSource> model = ModelSource::open(a.model, {});
    ImportOptions opts;
    opts.max_batch_tokens = a.prompt_len;
    opts.context = std::max(a.prompt_len, deepest) + a.steps + 1;
    opts.dtype_override = a.dtype;
    Registry reg = discover_plugins(global, default_load_options());
    Policy policy;
    policy.prefer = {kDLCPU};
    policy.numerics = *parse_numerics(a.numerics);
    LoadedModel loaded = LoadedModel::load(*model, opts, reg, policy);
    if (!loaded.planned->plan.ok()) throw *loaded.planned->plan.error;
    Context& context = *loaded.context;
    const Graph& graph = loaded.planned->graph;
    const Phase& prefill = graph.phases.front();  // paged: the one step phase
    const Phase& decode = graph.phases.back();
    // The activations' dtype (a GGUF file's embedding may be quantized): the final norm's.
    const sy_dtype dtype = prefill.value("norm")->dtype;

    // Ceilings first: the model's buffers are allocated, its weights not yet in cache.
    const int threads = bench_threads();
    MachineFigures m = measure_machine(reg, threads);
    const double gemm = dtype == SY_DTYPE_F32 ? m.gemm_f32_gflops : m.gemm_bf16_gflops;

    std::vector<int64_t> prompt(size_t(a.prompt_len));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int64_t(1 + i % 200);
    std::vector<double> prefill_ms;
    for (int r = 0; r <= a.repeats; ++r) {  // the first is a warm-up
      const SeqId seq = context.add_sequence();
      auto t0 = std::chrono::steady_clock::now();
      feed(context, seq, prompt);
      if (r > 0) prefill_ms.push_back(ms_since(t0));
      context.remove_sequence(seq);
    }
    const double p_ms = median(prefill_ms);
    const double p_flops = step_flops(prefill, {a.prompt_len, 1, 1, a.prompt_len});
    const double p_gflops = p_flops / (p_ms * 1e-3) / 1e9;

    std::vector<DepthFigures> rows;
    time_decode(context, decode, prompt, 0, a, m.triad_gbps);  // warm-up
    for (int64_t d : depths)
      rows.push_back(time_decode(context, decode, prompt, d, a, m.triad_gbps));

    const Plugin* cpu = reg.find("cpu_onednn");
    const std::string arch =
        cpu_identity() + (cpu && !cpu->devices().empty() ? ", " + cpu->devices()[0].arch : "");
    const char* dt = dtype == SY_DTYPE_F32 ? "f32" : dtype == SY_DTYPE_BF16 ? "bf16" : "f16";
    if (a.json) {
      json dj = json::array();
      for (const auto& r : rows)
        dj.push_back({{"depth", r.depth},
                      {"ms_per_token", r.ms_per_token},
                      {"tokens_per_s", r.tokens_per_s},
                      {"weight_bytes", r.bytes.weights},
                      {"kv_bytes", r.bytes.kv},
                      {"bytes_per_step", r.bytes.total()},
                      {"gbps", r.gbps},
                      {"ratio_triad", r.ratio},
                      {"read_gbps", r.read_gbps},
                      {"ratio_read", r.ratio_read}});
      json j = {{"bench", "decode"},
                {"model", a.model},
                {"model_type", model->model_type()},
                {"dtype", dt},
                {"kv_layout", kv_layout_name(context.layout())},
                {"cpu", arch},
                {"prefill",
                 {{"tokens", a.prompt_len},
                  {"ms", p_ms},
                  {"tokens_per_s", double(a.prompt_len) / (p_ms * 1e-3)},
                  {"flops", p_flops},
                  {"gflops", p_gflops},
                  {"ratio_gemm", gemm > 0 ? p_gflops / gemm : 0}}},
                {"decode", dj},
                {"steps", a.steps},
                {"repeats", a.repeats},
                {"machine_gemm_f32_gflops", m.gemm_f32_gflops},
                {"machine_gemm_bf16_gflops", m.gemm_bf16_gflops},
                {"machine_bandwidth_gbps", m.triad_gbps},
                {"threads", m.threads}};
      std::cout << j.dump(2) << "\n";
      return kExitOk;
    }
    std::printf("model %s (%s, %s), on %s, %d threads\n", a.model.c_str(),
                model->model_type().c_str(), dt, arch.c_str(), threads);
    std::printf("prefill %lld tokens: %.1f ms, %.1f tokens/s, %.1f GFLOP/s = %.2f of the %s GEMM\n",
                (long long)a.prompt_len, p_ms, double(a.prompt_len) / (p_ms * 1e-3), p_gflops,
                gemm > 0 ? p_gflops / gemm : 0, dt);
    std::printf("%-7s %10s %10s %12s %10s %8s %8s %10s %8s\n", "depth", "tokens/s", "ms/token",
                "MB/step", "KV MB", "GB/s", "triad", "read GB/s", "read");
    for (const auto& r : rows)
      std::printf("%-7lld %10.1f %10.2f %12.1f %10.1f %8.1f %8.2f %10.1f %8.2f\n",
                  (long long)r.depth, r.tokens_per_s, r.ms_per_token, r.bytes.total() / 1e6,
                  r.bytes.kv / 1e6, r.gbps, r.ratio, r.read_gbps, r.ratio_read);
    std::printf(
        "read: the step's bytes over the same-run rate of reading a buffer of that size "
        "(MB/step), the ceiling where the weights sit in the last-level cache\n");
    print_machine(m);
    return kExitOk;
  } catch (const Error& e) {
    const ErrorInfo& info = error_info(e.code);
    std::cerr << "switchyard bench decode: error " << code_text(e.code) << " (" << info.name
              << "): " << e.what() << "\n";
    return info.exit_code;
  }
}

}  // namespace sy::cli
