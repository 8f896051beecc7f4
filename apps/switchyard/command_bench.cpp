// `bench attention|matmul` (decode: command_bench_decode.cpp): times a kernel through the ABI and,
// in the same run, measures the machine's own GEMM rate and memory bandwidth, so every figure comes
// with its ceiling.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/switchyard/bench_support.hpp"
#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/model_cost.hpp"
#include "core/capability/vocabulary.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

struct AttentionArgs {
  int64_t batch = 1, q_len = 2048, kv_len = 2048, heads = 32, kv_heads = 8, head_dim = 128;
  std::string dtype = "f32", device = "cpu", family;
  bool causal = false, sinks = false;
  int64_t window = -1;
};

struct Common {
  bool json = false;
  int repeats = 7, warmup = 2;
};

void add_common(po::options_description& desc, Common& c) {
  desc.add_options()("help,h", "show this help")("json", po::bool_switch(&c.json),
                                                 "machine-readable output")(
      "repeats", po::value<int>(&c.repeats)->default_value(7), "timed runs (median reported)")(
      "warmup", po::value<int>(&c.warmup)->default_value(2), "untimed runs first");
}

std::optional<sy_dtype> dtype_arg(const std::string& name) {
  auto d = parse_dtype(name);
  if (!d || (*d != SY_DTYPE_F32 && *d != SY_DTYPE_BF16 && *d != SY_DTYPE_F16)) return std::nullopt;
  return d;
}

OpDesc attention_op(const AttentionArgs& a, sy_dtype dt, sy_memory_kind mem) {
  OpDesc op;
  op.op = SY_OP_ATTENTION;
  op.inputs = {{dt, {a.batch, a.q_len, a.heads, a.head_dim}, mem},
               {dt, {a.batch, a.kv_len, a.kv_heads, a.head_dim}, mem},
               {dt, {a.batch, a.kv_len, a.kv_heads, a.head_dim}, mem}};
  if (a.sinks) op.inputs.push_back({SY_DTYPE_F32, {a.heads}, mem});
  op.outputs = {{dt, {a.batch, a.q_len, a.heads, a.head_dim}, mem}};
  if (a.causal) op.set(SY_ATTR_CAUSAL, int64_t{1});
  if (a.window >= 0) op.set(SY_ATTR_WINDOW_LEFT, a.window);
  return op;
}

json machine_json(const MachineFigures& m, double gemm) {
  return {{"machine_gemm_gflops", gemm},
          {"machine_gemm_f32_gflops", m.gemm_f32_gflops},
          {"machine_gemm_bf16_gflops", m.gemm_bf16_gflops},
          {"machine_bandwidth_gbps", m.triad_gbps},
          {"threads", m.threads}};
}

// The ceilings a kernel's figures are divided by, for where it ran: the host's GEMM rate
// and triad bandwidth, or a device's bf16 GEMM rate and copy bandwidth.
struct Ceilings {
  double gemm_gflops = 0, bandwidth_gbps = 0;
  std::string where, gemm_dtype, bandwidth_kind, line;
  json fields;
};

Ceilings measure_ceilings(const Registry& reg, const Plugin& plugin, uint32_t device, sy_dtype dt) {
  Ceilings c;
  if (plugin.devices()[device].memory_is_host) {
    MachineFigures m = measure_machine(reg, bench_threads());
    c.gemm_gflops = dt == SY_DTYPE_F32 ? m.gemm_f32_gflops : m.gemm_bf16_gflops;
    c.bandwidth_gbps = m.triad_gbps;
    c.where = "machine's";
    c.gemm_dtype = dt == SY_DTYPE_F32 ? "f32" : "bf16";
    c.bandwidth_kind = "triad";
    char line[256];
    std::snprintf(line, sizeof line,
                  "machine (same run, %d threads): f32 GEMM %.1f GFLOP/s, bf16 GEMM %.1f GFLOP/s "
                  "(%s, n=2048), triad %.1f GB/s",
                  m.threads, m.gemm_f32_gflops, m.gemm_bf16_gflops, m.gemm_kernel.c_str(),
                  m.triad_gbps);
    c.line = line;
    c.fields = machine_json(m, c.gemm_gflops);
    return c;
  }
  DeviceFigures f = measure_device(reg, plugin, device);
  c.gemm_gflops = f.gemm_bf16_gflops;
  c.bandwidth_gbps = f.copy_gbps;
  c.where = "device's";
  c.gemm_dtype = "bf16";
  c.bandwidth_kind = "copy";
  char line[256];
  std::snprintf(line, sizeof line,
                "device %s (same run): bf16 GEMM %.1f GFLOP/s (%s, n=%lld), copy %.1f GB/s "
                "(read + write, %lld MiB)",
                f.device.c_str(), f.gemm_bf16_gflops,
                f.gemm_kernel.empty() ? "no matmul kernel" : f.gemm_kernel.c_str(),
                (long long)f.gemm_n, f.copy_gbps, (long long)(f.copy_bytes >> 20));
  c.line = line;
  c.fields = {{"machine_gemm_gflops", f.gemm_bf16_gflops},
              {"machine_gemm_bf16_gflops", f.gemm_bf16_gflops},
              {"machine_gemm_kernel", f.gemm_kernel},
              {"machine_gemm_n", f.gemm_n},
              {"machine_bandwidth_gbps", f.copy_gbps},
              {"machine_bandwidth_kind", "device_copy"},
              {"device", f.device}};
  return c;
}

int bench_attention(const GlobalOptions& global, const Args& args) {
  AttentionArgs a;
  Common c;
  po::options_description desc("switchyard bench attention options");
  add_common(desc, c);
  desc.add_options()("batch", po::value(&a.batch)->default_value(1), "B")(
      "q-len", po::value(&a.q_len)->default_value(2048), "Sq (1 = decode)")(
      "kv-len", po::value(&a.kv_len)->default_value(2048), "Skv")(
      "heads", po::value(&a.heads)->default_value(32), "query heads")(
      "kv-heads", po::value(&a.kv_heads)->default_value(8), "KV heads")(
      "head-dim", po::value(&a.head_dim)->default_value(128), "D")(
      "dtype", po::value(&a.dtype)->default_value("f32"), "f32|bf16|f16")(
      "causal", po::bool_switch(&a.causal), "causal mask (bottom-right)")(
      "window", po::value(&a.window)->default_value(-1), "sliding window, keys back")(
      "sinks", po::bool_switch(&a.sinks), "learnable sinks")(
      "device", po::value(&a.device)->default_value("cpu"), "cpu|cuda")(
      "family", po::value(&a.family), "only kernels of this family (sdpa, flash, ...)");
  auto vm = parse_command(args, desc);
  if (vm.count("help")) {
    std::cout << desc << "\n" << kExitCodeHelp;
    return kExitOk;
  }
  auto dt = dtype_arg(a.dtype);
  auto device = parse_device_type(a.device);
  if (!dt || !device || a.batch < 1 || a.q_len < 1 || a.kv_len < 1 || a.heads < 1 ||
      a.kv_heads < 1 || a.head_dim < 1 || c.repeats < 1) {
    std::cerr << "switchyard bench attention: sizes must be positive, --dtype f32|bf16|f16, "
                 "--device cpu|cuda\n";
    return kExitUsage;
  }
  Registry reg = discover_plugins(global, default_load_options());
  sy_memory_kind mem = *device == kDLCPU ? SY_MEMORY_HOST : SY_MEMORY_DEVICE;
  OpDesc op = attention_op(a, *dt, mem);
  Choice choice = choose_kernel(reg, op, *device, a.family);
  if (!choice.plugin) {
    std::cerr << "switchyard bench attention: no kernel can serve this attention on " << a.device
              << ":" << choice.reasons << "\n";
    return kExitNoPlan;
  }
  BenchRun run = make_run(choice, op);
  if (!run.kernel) {
    std::cerr << "switchyard bench attention: prepare failed: " << run.error << "\n";
    return kExitFailure;
  }
  Timing t = time_median([&] { run.execute(); }, c.warmup, c.repeats);
  run = BenchRun{};  // a device's memory goes back before its ceilings are measured
  Ceilings ceil = measure_ceilings(reg, *choice.plugin, choice.device, *dt);

  double flops = 4.0 * double(a.batch * a.heads * a.head_dim) *
                 visible_pairs(a.q_len, a.kv_len, a.causal, a.window);
  double gflops = flops / (t.median_ms * 1e-3) / 1e9;
  double kv_bytes = 2.0 * a.batch * a.kv_len * a.kv_heads * a.head_dim * sy_dtype_size(*dt);
  double gbps = kv_bytes / (t.median_ms * 1e-3) / 1e9;
  const double gemm = ceil.gemm_gflops;
  bool decode = a.q_len == 1;
  double ratio_gemm = gemm > 0 ? gflops / gemm : 0;
  double ratio_bw = ceil.bandwidth_gbps > 0 ? gbps / ceil.bandwidth_gbps : 0;
  // On the host, also a same-run read of one buffer of the KV's size: a KV that fits the
  // last-level cache reads faster than a triad streams.
  const double read =
      ceil.bandwidth_kind == "triad" ? read_gbps(bench_threads(), size_t(kv_bytes)) : 0;
  const double ratio_read = read > 0 ? gbps / read : 0;
  std::string kernel = choice.plugin->name() + "/" + choice.plugin->kernels()[choice.kernel].kernel;
  if (c.json) {
    json j = {{"bench", "attention"},
              {"kernel", kernel},
              {"shape",
               {{"batch", a.batch},
                {"q_len", a.q_len},
                {"kv_len", a.kv_len},
                {"heads", a.heads},
                {"kv_heads", a.kv_heads},
                {"head_dim", a.head_dim},
                {"dtype", a.dtype},
                {"causal", a.causal},
                {"window", a.window},
                {"sinks", a.sinks}}},
              {"ms_median", t.median_ms},
              {"ms_min", t.min_ms},
              {"repeats", t.repeats},
              {"gflops", gflops},
              {"gbps", gbps},
              {"ratio_gemm", ratio_gemm},
              {"ratio_bandwidth", ratio_bw},
              // null, not 0, where nothing was read (a device's KV: the host read says nothing)
              {"read_gbps", read > 0 ? json(read) : json(nullptr)},
              {"ratio_read", read > 0 ? json(ratio_read) : json(nullptr)},
              {"ratio", decode ? ratio_bw : ratio_gemm},
              {"ratio_of", decode ? "machine_bandwidth_gbps" : "machine_gemm_gflops"}};
    j.update(ceil.fields);
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("attention %s: B=%lld Sq=%lld Skv=%lld Hq=%lld Hkv=%lld D=%lld %s%s%s\n",
              kernel.c_str(), (long long)a.batch, (long long)a.q_len, (long long)a.kv_len,
              (long long)a.heads, (long long)a.kv_heads, (long long)a.head_dim, a.dtype.c_str(),
              a.causal ? " causal" : "", a.sinks ? " sinks" : "");
  std::printf("median %.3f ms over %d runs (min %.3f)\n", t.median_ms, t.repeats, t.min_ms);
  std::printf("useful %.1f GFLOP/s = %.2f of the %s %s GEMM rate\n", gflops, ratio_gemm,
              ceil.where.c_str(), ceil.gemm_dtype.c_str());
  std::printf("KV read %.1f GB/s = %.2f of the %s %s bandwidth", gbps, ratio_bw, ceil.where.c_str(),
              ceil.bandwidth_kind.c_str());
  if (read > 0) std::printf(", %.2f of reading a buffer of its size (%.1f GB/s)", ratio_read, read);
  std::printf("\n");
  std::printf("%s\n", ceil.line.c_str());
  return kExitOk;
}

int bench_matmul(const GlobalOptions& global, const Args& args) {
  int64_t m_ = 2048, n = 2048, k = 2048;
  std::string dtype = "f32", weight_dtype, kernel;
  bool transpose_b = false;
  Common c;
  po::options_description desc("switchyard bench matmul options");
  add_common(desc, c);
  desc.add_options()("m", po::value(&m_)->default_value(2048), "rows of a")(
      "n", po::value(&n)->default_value(2048), "columns of b")(
      "k", po::value(&k)->default_value(2048), "reduction")(
      "dtype", po::value(&dtype)->default_value("f32"), "f32|bf16")(
      "weight-dtype", po::value(&weight_dtype),
      "b's dtype when it differs: "
      "q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|iq4_xs|q2_k|q3_k|q4_k|q5_k|q6_k|mxfp4 "
      "(needs "
      "--transpose-b; zero "
      "blocks)")("transpose-b", po::bool_switch(&transpose_b),
                 "b stored [N, K] (Hugging Face weights)")(
      "kernel", po::value(&kernel),
      "only the kernel of this name (e.g. matmul_q16, what --numerics auto, the default, chooses "
      "for quantized weights)");
  auto vm = parse_command(args, desc);
  if (vm.count("help")) {
    std::cout << desc << "\n" << kExitCodeHelp;
    return kExitOk;
  }
  auto dt = dtype_arg(dtype);
  std::optional<sy_dtype> wt = weight_dtype.empty() ? dt : parse_dtype(weight_dtype);
  if (!dt || !wt || (*wt != *dt && (!sy_dtype_is_blocked(*wt) || !transpose_b)) || m_ < 1 ||
      n < 1 || k < 1 || c.repeats < 1) {
    std::cerr << "switchyard bench matmul: sizes must be positive, --dtype f32|bf16, "
                 "--weight-dtype a block-quantized type with --transpose-b\n";
    return kExitUsage;
  }
  Registry reg = discover_plugins(global, default_load_options());
  OpDesc op;
  op.op = SY_OP_MATMUL;
  op.inputs = {
      {*dt, {m_, k}, SY_MEMORY_HOST},
      {*wt, transpose_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, SY_MEMORY_HOST}};
  op.outputs = {{*dt, {m_, n}, SY_MEMORY_HOST}};
  if (transpose_b) op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
  Choice choice = choose_kernel(reg, op, kDLCPU, "", kernel);
  if (!choice.plugin) {
    std::cerr << "switchyard bench matmul: no kernel can serve this matmul:" << choice.reasons
              << "\n";
    return kExitNoPlan;
  }
  BenchRun run = make_run(choice, op);
  if (!run.kernel) {
    std::cerr << "switchyard bench matmul: prepare failed: " << run.error << "\n";
    return kExitFailure;
  }
  Timing t = time_median([&] { run.execute(); }, c.warmup, c.repeats);
  MachineFigures mf = measure_machine(reg, bench_threads());
  double gflops = 2.0 * m_ * n * k / (t.median_ms * 1e-3) / 1e9;
  double gemm = *dt == SY_DTYPE_F32 ? mf.gemm_f32_gflops : mf.gemm_bf16_gflops;
  const int64_t b_shape[2] = {n, k};
  double bytes =
      double(m_ * k + m_ * n) * sy_dtype_size(*dt) + double(sy_tensor_bytes(*wt, 2, b_shape));
  double gbps = bytes / (t.median_ms * 1e-3) / 1e9;
  const std::string kernel_name =
      choice.plugin->name() + "/" + choice.plugin->kernels()[choice.kernel].kernel;
  if (c.json) {
    json j = {{"bench", "matmul"},
              {"kernel", kernel_name},
              {"m", m_},
              {"n", n},
              {"k", k},
              {"dtype", dtype},
              {"weight_dtype", sy_dtype_name(*wt)},
              {"transpose_b", transpose_b},
              {"ratio_bandwidth", mf.triad_gbps > 0 ? gbps / mf.triad_gbps : 0},
              {"ms_median", t.median_ms},
              {"ms_min", t.min_ms},
              {"gflops", gflops},
              {"gbps", gbps},
              {"ratio", gemm > 0 ? gflops / gemm : 0}};
    j.update(machine_json(mf, gemm));
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf(
      "matmul (%s) m=%lld n=%lld k=%lld %s%s%s: median %.3f ms, %.1f GFLOP/s = %.2f of the "
      "machine's GEMM rate; %.1f GB/s of operands = %.2f of its triad\n",
      kernel_name.c_str(), (long long)m_, (long long)n, (long long)k, dtype.c_str(),
      *wt != *dt ? (std::string(" weights ") + sy_dtype_name(*wt)).c_str() : "",
      transpose_b ? " transposed b" : "", t.median_ms, gflops, gemm > 0 ? gflops / gemm : 0, gbps,
      mf.triad_gbps > 0 ? gbps / mf.triad_gbps : 0);
  print_machine(mf);
  return kExitOk;
}

}  // namespace

int run_bench(const GlobalOptions& global, const Args& args) {
  const bool known =
      !args.empty() && (args[0] == "attention" || args[0] == "matmul" || args[0] == "decode" ||
                        args[0] == "batch" || args[0] == "grammar");
  if (!known) {
    std::cerr
        << "Usage: switchyard bench attention|matmul|decode|batch|grammar [options] (see --help of "
           "each)\n";
    return args.size() == 1 && (args[0] == "--help" || args[0] == "-h") ? kExitOk : kExitUsage;
  }
  Args rest(args.begin() + 1, args.end());
  if (args[0] == "decode") return bench_decode(global, rest);
  if (args[0] == "batch") return bench_batch(global, rest);
  if (args[0] == "grammar") return bench_grammar(global, rest);
  return args[0] == "attention" ? bench_attention(global, rest) : bench_matmul(global, rest);
}

}  // namespace sy::cli
