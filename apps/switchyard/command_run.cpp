// `run MODEL --prompt TEXT | --prompt-file PATH | --chat TEXT`: plan, load, prefill, decode —
// printing the text as it is produced until an EOS id, a --stop text or --max-tokens, then the
// speeds, the memory and (with --profile) where the time went. --chat renders the model's own
// chat template (core/generation/); a plain prompt gets the special tokens the tokenizer declares.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>

#include <spdlog/spdlog.h>

#include <ctime>
#include <optional>

#include "apps/switchyard/bench_support.hpp"
#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/model_cost.hpp"
#include "apps/switchyard/model_run.hpp"
#include "core/capability/vocabulary.hpp"
#include "core/errors/errors.hpp"
#include "core/executor/model_weights.hpp"
#include "core/generation/generation.hpp"
#include "core/importer/importer.hpp"
#include "core/runtime/model_source.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
namespace fs = std::filesystem;
using nlohmann::json;

struct RunArgs {
  std::string model, prompt, prompt_file, chat, system, prefer, attention = "any", dtype;
  std::string memory_reserve;
  std::vector<std::string> stop, allowed_config_keys, max_device_memory;
  int64_t max_tokens = 32, context = 1024;
  double temperature = 0, top_p = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool strict = false, profile = false, json = false, ignore_eos = false, require_verified = false;
  bool has_prompt = false, has_chat = false, has_system = false;
};

}  // namespace

int run_run(const GlobalOptions& global, const Args& args) {
  RunArgs a;
  po::options_description desc("switchyard run options");
  desc.add_options()("help,h", "show this help")("model", po::value(&a.model),
                                                 "model folder or GGUF file")(
      "prompt", po::value(&a.prompt), "text to continue (- reads standard input)")(
      "prompt-file", po::value(&a.prompt_file), "read the text to continue from a file")(
      "chat", po::value(&a.chat),
      "a user message, rendered with the model's chat template (- reads standard input)")(
      "system", po::value(&a.system), "a system message before --chat")(
      "stop", po::value(&a.stop), "stop when this text is generated; repeatable")(
      "ignore-eos", po::bool_switch(&a.ignore_eos), "generate past the model's EOS tokens")(
      "allow-config-key", po::value(&a.allowed_config_keys),
      "accept this unknown config.json key as without effect; repeatable")(
      "max-tokens", po::value(&a.max_tokens)->default_value(32), "tokens to generate")(
      "context", po::value(&a.context)->default_value(1024), "KV cache length")(
      "temperature", po::value(&a.temperature)->default_value(0), "0 = greedy")(
      "top-k", po::value(&a.top_k)->default_value(0), "sample from the k most likely (0 = all)")(
      "top-p", po::value(&a.top_p)->default_value(1.0), "nucleus mass")(
      "seed", po::value(&a.seed)->default_value(0), "sampling seed")("prefer", po::value(&a.prefer),
                                                                     "device order, e.g. cpu,cuda")(
      "attention", po::value(&a.attention)->default_value("any"), "attention family pin")(
      "strict", po::bool_switch(&a.strict), "refusal of the pinned choice is an error")(
      "require-verified", po::bool_switch(&a.require_verified),
      "use only kernels a conformance report verifies")(
      "dtype", po::value(&a.dtype), "run in f32|bf16 instead of the config's dtype")(
      "memory-reserve", po::value(&a.memory_reserve),
      "memory left free on every device (default: 1GiB, or an eighth of a smaller device)")(
      "max-device-memory", po::value(&a.max_device_memory),
      "cap a device's memory, e.g. cuda:0=8GiB; repeatable")(
      "profile", po::bool_switch(&a.profile), "time per op kind and plugin, and overhead")(
      "json", po::bool_switch(&a.json), "figures as JSON (the text goes to stderr)");
  po::positional_options_description pos;
  pos.add("model", 1);
  auto vm = parse_command(args, desc, &pos);
  a.has_prompt = vm.count("prompt") > 0;
  a.has_chat = vm.count("chat") > 0;
  a.has_system = vm.count("system") > 0;
  if (vm.count("help") || a.model.empty()) {
    std::cout << "Usage: switchyard run MODEL (--prompt TEXT | --prompt-file PATH | --chat TEXT)"
                 " [options]\n"
              << desc << "\n"
              << kExitCodeHelp;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  if (a.max_tokens < 0 || a.context < 2 || a.temperature < 0 || a.top_p <= 0 || a.top_p > 1) {
    std::cerr << "switchyard run: --max-tokens >= 0, --context >= 2, --temperature >= 0, 0 < "
                 "--top-p <= 1\n";
    return kExitUsage;
  }
  const int sources = int(a.has_prompt) + int(vm.count("prompt-file") > 0) + int(a.has_chat);
  if (sources != 1 || (a.has_system && !a.has_chat)) {
    std::cerr << "switchyard run: give exactly one of --prompt, --prompt-file and --chat "
                 "(--system goes with --chat)\n";
    return kExitUsage;
  }
  std::string why;
  std::optional<std::string> text = a.has_chat     ? read_source(a.chat, why)
                                    : a.has_prompt ? read_source(a.prompt, why)
                                                   : read_source(a.prompt_file, why);
  if (a.has_chat && a.chat != "-") text = a.chat;
  if (a.has_prompt && a.prompt != "-") text = a.prompt;
  if (!text) {
    std::cerr << "switchyard run: " << why << "\n";
    return kExitUsage;
  }
  std::ostream& text_out = a.json ? std::cerr : std::cout;
  try {
    auto t_load = std::chrono::steady_clock::now();
    OpenedModel model = OpenedModel::open(a.model, a.allowed_config_keys);
    PromptRequest request{*text, a.has_chat, std::nullopt};
    if (a.has_system) request.system = a.system;
    const Prompt prompt = build_prompt(model, request);
    const std::vector<int64_t>& ids = prompt.ids;
    if (ids.empty())
      return fail("run", Error(Errc::prompt_too_long, "the prompt encodes to no token"), a.json);
    if (int64_t(ids.size()) + a.max_tokens > a.context)
      return fail("run",
                  Error(Errc::prompt_too_long,
                        "the prompt (" + std::to_string(ids.size()) +
                            " tokens) plus --max-tokens " + std::to_string(a.max_tokens) +
                            " exceed the context of " + std::to_string(a.context) + " (--context)"),
                  a.json);
    ImportOptions opts;
    opts.prompt_len = int64_t(ids.size());
    opts.context = a.context;
    opts.dtype_override = a.dtype;
    Registry reg = discover_plugins(global, default_load_options());
    Policy policy = run_policy(a.prefer, a.attention, a.strict);
    policy.require_verified = a.require_verified;
    if (auto why = apply_memory_options(a.memory_reserve, a.max_device_memory, policy)) {
      std::cerr << "switchyard run: " << *why << "\n";
      return kExitUsage;
    }
    std::unique_ptr<PlannedModel> planned = plan_model(*model.source, opts, reg, policy);
    const Graph& graph = planned->graph;
    const Plan& plan = planned->plan;
    for (int64_t id : ids)
      if (id >= graph.phases[0].value("embed_tokens")->shape[0])
        return fail("run",
                    Error(Errc::bad_tokenizer, "prompt token id " + std::to_string(id) +
                                                   " is outside the model's vocabulary"),
                    a.json);
    if (!plan.ok()) return fail("run", *plan.error, a.json);
    WeightLoader weights = model.source->weights();
    Session session(graph, plan, reg, planned->inventory,
                    with_progress(weights, model.source->weight_bytes()));
    double load_ms = ms_since(t_load);

    SamplingOptions sampling{a.max_tokens, a.temperature, a.top_k, a.top_p,
                             a.seed,       a.ignore_eos,  a.stop};
    Generator generator(session, model.tokenizer, model.generation);
    text_out << prompt.echo << std::flush;
    Generation g = generator.generate(ids, sampling, [&](int64_t, const std::string& piece) {
      text_out << piece << std::flush;
      return true;
    });
    text_out << "\n";
    const std::vector<int64_t>& generated = g.ids;
    const std::string& answer = g.text;
    const int64_t decode_steps = g.decode_steps;
    const double prefill_ms = g.prefill_ms, decode_ms = g.decode_ms;
    const char* reason = stop_reason_name(g.reason);
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    const StepProfile& dp = session.profile("decode");
    const StepProfile& pp = session.profile("prefill");
    double prefill_tps = double(ids.size()) / (prefill_ms / 1e3);
    double decode_tps = decode_steps > 0 ? double(decode_steps) / (dp.total_ms / 1e3) : 0;
    double overhead =
        dp.total_ms > 0 ? (dp.total_ms - dp.kernels_ms - dp.copies_ms) / dp.total_ms : 0;
    json j{{"status", "ok"},
           {"prompt_tokens", ids.size()},
           {"generated_tokens", generated.size()},
           {"generated_ids", generated},
           {"text", answer},
           {"stop_reason", reason},
           {"eos_ids", a.ignore_eos ? std::vector<int64_t>{} : model.generation.eos_ids},
           {"load_ms", load_ms},
           {"prefill_ms", prefill_ms},
           {"prefill_tokens_per_s", prefill_tps},
           {"decode_ms", decode_ms},
           {"decode_tokens_per_s", decode_tps},
           {"decode_overhead_share", overhead},
           {"peak_rss_bytes", int64_t(ru.ru_maxrss) * 1024},
           {"plan_hash", plan.hash}};
    if (a.json && decode_steps > 0) {
      // Bytes a step reads at the middle step's depth, over the mean step time, against a short
      // triad measured now (3 × 64 MiB: past the last-level cache, 0.2 s).
      const StepBytes bytes =
          decode_step_bytes(graph.phases[1], int64_t(ids.size()) + decode_steps / 2 + 1);
      const double gbps = bytes.total() / (dp.total_ms / double(decode_steps) * 1e-3) / 1e9;
      const double triad = triad_gbps(bench_threads(), size_t(16) << 20, 5);
      j["decode_bytes_per_step"] = bytes.total();
      j["decode_kv_bytes_per_step"] = bytes.kv;
      j["decode_gbps"] = gbps;
      j["machine_bandwidth_gbps"] = triad;
      j["decode_bandwidth_ratio"] = triad > 0 ? gbps / triad : 0;
    }
    j["memory"] = memory_report(plan, session);
    if (a.profile) {
      json per = json::object();
      for (const auto* p : {&pp, &dp}) {
        std::string phase = p == &pp ? "prefill" : "decode";
        json ops = json::array();
        for (const auto& t : p->per_kind)
          ops.push_back({{"op", t.key}, {"ms", t.ms}, {"calls", t.calls}});
        per[phase] = {{"total_ms", p->total_ms},
                      {"kernels_ms", p->kernels_ms},
                      {"copies_ms", p->copies_ms},
                      {"ops", ops}};
      }
      j["profile"] = per;
    }
    if (a.json) {
      std::cout << j.dump(2, ' ', false, json::error_handler_t::replace)
                << "\n";  // U+FFFD for bytes that are not UTF-8
      return kExitOk;
    }
    std::printf(
        "stopped: %s after %zu tokens; prefill: %zu tokens in %.1f ms (%.1f tokens/s); decode: "
        "%lld steps, %.1f tokens/s; runtime overhead %.1f%% of decode time; peak RSS %.1f MiB; "
        "load %.0f ms\n",
        reason, generated.size(), ids.size(), prefill_ms, prefill_tps, (long long)decode_steps,
        decode_tps, 100 * overhead, double(ru.ru_maxrss) / 1024, load_ms);
    if (a.profile)
      for (const auto* p : {&pp, &dp}) {
        std::printf("%s: total %.2f ms, kernels %.2f ms, copies %.2f ms\n",
                    p == &pp ? "prefill" : "decode", p->total_ms, p->kernels_ms, p->copies_ms);
        std::vector<OpTiming> rows = p->per_kind;
        std::sort(rows.begin(), rows.end(),
                  [](const auto& x, const auto& y) { return x.ms > y.ms; });
        for (const auto& t : rows)
          std::printf("  %-36s %9.2f ms  %6lld calls\n", t.key.c_str(), t.ms, (long long)t.calls);
      }
    return kExitOk;
  } catch (const Error& e) {
    return fail("run", e, a.json);
  }
}

}  // namespace sy::cli
