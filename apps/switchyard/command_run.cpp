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
#include "apps/switchyard/plan_flags.hpp"
#include "core/capability/vocabulary.hpp"
#include "core/errors/errors.hpp"
#include "core/executor/model_weights.hpp"
#include "core/generation/generation.hpp"
#include "core/generation/harmony.hpp"
#include "core/importer/importer.hpp"
#include "core/runtime/model_source.hpp"
#include "core/sampling/json_schema.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;

namespace fs = std::filesystem;
using nlohmann::json;

struct RunArgs {
  std::string model, prompt, prompt_file, chat, system, json_schema_file, grammar_file;
  std::vector<std::string> stop;
  PlanFlags flags;
  int64_t max_tokens = 32;
  SamplingParams sampling;
  bool profile = false, json = false, ignore_eos = false, json_object = false;
  bool has_prompt = false, has_chat = false, has_system = false;
};

// The text --prompt, --prompt-file or --chat names ("-": standard input), or the usage error.
std::optional<std::string> prompt_text(const RunArgs& a, const po::variables_map& vm,
                                       std::string& why) {
  const int sources = int(a.has_prompt) + int(vm.count("prompt-file") > 0) + int(a.has_chat);
  if (sources != 1 || (a.has_system && !a.has_chat)) {
    why = "give exactly one of --prompt, --prompt-file and --chat (--system goes with --chat)";
    return std::nullopt;
  }
  if (a.has_chat) return a.chat == "-" ? read_source("-", why) : a.chat;
  if (a.has_prompt) return a.prompt == "-" ? read_source("-", why) : a.prompt;
  return read_source(a.prompt_file, why);
}

// The grammar --json-object, --json-schema or --grammar-file asks for (null: none), or `why` not.
std::shared_ptr<const Grammar> answer_grammar(const RunArgs& a, std::string& why) {
  const int asked =
      int(a.json_object) + int(!a.json_schema_file.empty()) + int(!a.grammar_file.empty());
  if (asked > 1) {
    why = "give at most one of --json-object, --json-schema and --grammar-file";
    return nullptr;
  }
  if (a.json_object) return json_object_grammar();
  const std::string& file = a.json_schema_file.empty() ? a.grammar_file : a.json_schema_file;
  if (file.empty()) return nullptr;
  const char* flag = a.json_schema_file.empty() ? "--grammar-file" : "--json-schema";
  const std::optional<std::string> source = read_source(file, why);
  if (!source) {
    why = std::string(flag) + ": " + why;
    return nullptr;
  }
  try {
    if (a.grammar_file.empty()) return json_schema_grammar(nlohmann::ordered_json::parse(*source));
    return Grammar::from_gbnf(*source);
  } catch (const std::exception& e) {  // json's parse_error, SchemaError, GrammarError
    why = std::string(flag) + " " + file + ": " + e.what();
    return nullptr;
  }
}

json profile_json(const StepProfile& p) {
  json ops = json::array();
  for (const auto& t : p.per_kind) ops.push_back({{"op", t.key}, {"ms", t.ms}, {"calls", t.calls}});
  return {{"total_ms", p.total_ms},
          {"kernels_ms", p.kernels_ms},
          {"copies_ms", p.copies_ms},
          {"steps", p.steps},
          {"ops", ops}};
}

void print_profile(const char* name, const StepProfile& p) {
  std::printf("%s: total %.2f ms over %lld steps, kernels %.2f ms, copies %.2f ms\n", name,
              p.total_ms, (long long)p.steps, p.kernels_ms, p.copies_ms);
  std::vector<OpTiming> rows = p.per_kind;
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.ms > y.ms; });
  for (const auto& t : rows)
    std::printf("  %-36s %9.2f ms  %6lld calls\n", t.key.c_str(), t.ms, (long long)t.calls);
}

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
      "json-object", po::bool_switch(&a.json_object),
      "constrain the answer to one JSON object (OpenAI's response_format json_object): it ends "
      "when the object is whole")(
      "json-schema", po::value(&a.json_schema_file),
      "constrain the answer to a JSON Schema read from this file (response_format "
      "json_schema's subset, docs/serve.md); it ends when the value is whole")(
      "grammar-file", po::value(&a.grammar_file),
      "constrain the answer to a GBNF grammar (llama.cpp's syntax, rule root) read from this "
      "file")("max-tokens", po::value(&a.max_tokens)->default_value(32), "tokens to generate")(
      "temperature", po::value(&a.sampling.temperature)->default_value(0), "0 = greedy")(
      "top-k", po::value(&a.sampling.top_k)->default_value(0),
      "sample from the k most likely (0 = all)")(
      "top-p", po::value(&a.sampling.top_p)->default_value(1.0), "nucleus mass")(
      "min-p", po::value(&a.sampling.min_p)->default_value(0.0),
      "drop tokens below this share of the most likely one's probability")(
      "presence-penalty", po::value(&a.sampling.presence_penalty)->default_value(0.0),
      "subtracted from the logit of every token generated already (OpenAI's, -2 to 2)")(
      "frequency-penalty", po::value(&a.sampling.frequency_penalty)->default_value(0.0),
      "subtracted per time a token was generated (OpenAI's, -2 to 2)")(
      "repetition-penalty", po::value(&a.sampling.repetition_penalty)->default_value(1.0),
      "divides positive and multiplies negative logits of the prompt's and generated tokens "
      "(1 = none)")("seed", po::value(&a.sampling.seed)->default_value(0), "sampling seed")(
      "profile", po::bool_switch(&a.profile),
      "time per op kind and plugin, and overhead (each op driven on its own, segments too)")(
      "json", po::bool_switch(&a.json), "figures as JSON (the text goes to stderr)");
  a.flags.add(desc, 1, 1024);
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
  if (a.max_tokens < 0) {
    std::cerr << "switchyard run: --max-tokens must be at least 0\n";
    return kExitUsage;
  }
  if (auto bad = a.sampling.validate()) {
    std::string flag = bad->field;
    std::replace(flag.begin(), flag.end(), '_', '-');
    std::cerr << "switchyard run: --" << flag << " " << bad->message << "\n";
    return kExitUsage;
  }
  std::string why;
  std::shared_ptr<const Grammar> grammar = answer_grammar(a, why);
  if (!why.empty()) {
    std::cerr << "switchyard run: " << why << "\n";
    return kExitUsage;
  }
  std::optional<std::string> text = prompt_text(a, vm, why);
  if (!text) {
    std::cerr << "switchyard run: " << why << "\n";
    return kExitUsage;
  }
  ImportOptions opts;
  Policy policy;
  if (auto usage = a.flags.apply(opts, policy)) {
    std::cerr << "switchyard run: " << *usage << "\n";
    return kExitUsage;
  }
  std::ostream& text_out = a.json ? std::cerr : std::cout;
  try {
    OpenedModel model = OpenedModel::open(a.model, a.flags.allowed_config_keys);
    PromptRequest request{*text, a.has_chat, std::nullopt, {}};
    if (a.has_system) request.system = a.system;
    const Prompt prompt = build_prompt(model, request);
    const std::vector<int64_t>& ids = prompt.ids;
    if (ids.empty())
      return fail("run", Error(Errc::prompt_too_long, "the prompt encodes to no token"), a.json);
    if (int64_t(ids.size()) + a.max_tokens > a.flags.context)
      return fail(
          "run",
          Error(Errc::prompt_too_long,
                "the prompt (" + std::to_string(ids.size()) + " tokens) plus --max-tokens " +
                    std::to_string(a.max_tokens) + " exceed the context of " +
                    std::to_string(a.flags.context) + " (--context)"),
          a.json);
    Registry reg = discover_plugins(global, default_load_options());
    LoadedModel loaded = LoadedModel::plan(*model.source, opts, reg, policy);
    const Plan& plan = loaded.planned->plan;
    if (!plan.ok()) return fail("run", *plan.error, a.json);
    // Before any weight loads: a token the model has no row for never reaches a kernel.
    const Value* table = loaded.planned->graph.find(ValueRole::token_embedding);
    const int64_t vocab = table ? table->shape[0] : 0;
    for (int64_t id : ids)
      if (id >= vocab)
        return fail("run",
                    Error(Errc::bad_tokenizer, "prompt token id " + std::to_string(id) +
                                                   " is outside the model's vocabulary of " +
                                                   std::to_string(vocab)),
                    a.json);
    const uint64_t weight_bytes = model.source->weight_bytes();
    ContextOptions context_options;
    context_options.time_each_op = a.profile;  // the profile's rows per op kind
    loaded.load(*model.source, reg, context_options,
                [&](WeightLoader w) { return with_progress(w, weight_bytes); });
    Context& context = *loaded.context;
    SamplingOptions sampling;
    static_cast<SamplingParams&>(sampling) = a.sampling;
    sampling.max_tokens = a.max_tokens;
    sampling.ignore_eos = a.ignore_eos;
    sampling.grammar = grammar;
    sampling.stop = a.stop;
    Generator generator(context, model.tokenizer, model.generation);
    text_out << prompt.echo << std::flush;
    // A harmony model's chat (gpt-oss): the answer is its `final` channel, printed as the
    // output; the other channels (its analysis, tool preambles) go to standard error.
    std::optional<HarmonyReader> harmony;
    if (auto markers =
            a.has_chat ? harmony_markers(model.tokenizer, model.generation) : std::nullopt)
      harmony.emplace(*markers, [&](const std::string& channel, const std::string& text) {
        (channel == "final" ? text_out : std::cerr) << text << std::flush;
      });
    Generation g = generator.generate(ids, sampling, [&](int64_t id, const std::string& piece) {
      if (harmony)
        harmony->feed(id, piece);
      else
        text_out << piece << std::flush;
      return true;
    });
    if (harmony) harmony->finish();
    text_out << "\n";
    const bool paged = context.layout() == KvLayout::paged;
    // Paged, prefill and decode steps run the one "step" phase: decode's share is its steps.
    const StepProfile& dp = context.profile(paged ? "step" : "decode");
    const StepProfile& pp = context.profile(paged ? "step" : "prefill");
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    const double prefill_tps = double(ids.size()) / (g.prefill_ms / 1e3);
    const double decode_tps = g.decode_steps > 0 ? double(g.decode_steps) / (g.decode_ms / 1e3) : 0;
    const double overhead =
        dp.total_ms > 0 ? (dp.total_ms - dp.kernels_ms - dp.copies_ms) / dp.total_ms : 0;
    json j{{"status", "ok"},
           {"prompt_tokens", ids.size()},
           {"generated_tokens", g.ids.size()},
           {"generated_ids", g.ids},
           {"text", g.text},
           {"stop_reason", finish_reason_name(g.reason)},
           {"eos_ids", a.ignore_eos ? std::vector<int64_t>{} : model.generation.eos_ids},
           {"load_ms", loaded.load_ms},
           {"prefill_ms", g.prefill_ms},
           {"prefill_tokens_per_s", prefill_tps},
           {"decode_ms", g.decode_ms},
           {"decode_tokens_per_s", decode_tps},
           {"decode_overhead_share", overhead},
           {"peak_rss_bytes", int64_t(ru.ru_maxrss) * 1024},
           {"kv_layout", kv_layout_name(context.layout())},
           {"plan_hash", plan.hash}};
    if (harmony) {  // "text" stays every generated byte; these are its harmony reading
      j["answer"] = harmony->answer();
      j["reasoning"] = harmony->reasoning();
    }
    if (a.json && g.decode_steps > 0) {
      // Bytes a step reads at the middle step's depth, over the mean step time, against a short
      // triad measured now (3 × 64 MiB: past the last-level cache, 0.2 s).
      const Phase& phase = loaded.planned->graph.phases.back();
      const StepBytes bytes =
          step_bytes(phase, {1, 1, 1, int64_t(ids.size()) + g.decode_steps / 2 + 1});
      const double gbps = bytes.total() / (g.decode_ms / double(g.decode_steps) * 1e-3) / 1e9;
      const double triad = triad_gbps(bench_threads(), size_t(16) << 20, 5);
      j["decode_bytes_per_step"] = bytes.total();
      j["decode_kv_bytes_per_step"] = bytes.kv;
      j["decode_gbps"] = gbps;
      j["machine_bandwidth_gbps"] = triad;
      j["decode_bandwidth_ratio"] = triad > 0 ? gbps / triad : 0;
    }
    j["memory"] = memory_report(plan, *loaded.model, context);
    if (a.profile) {
      j["profile"] = paged ? json{{"step", profile_json(pp)}}
                           : json{{"prefill", profile_json(pp)}, {"decode", profile_json(dp)}};
      j["profile"]["segments"] = segments_json(context);
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
        finish_reason_name(g.reason), g.ids.size(), ids.size(), g.prefill_ms, prefill_tps,
        (long long)g.decode_steps, decode_tps, 100 * overhead, double(ru.ru_maxrss) / 1024,
        loaded.load_ms);
    if (a.profile) {
      if (paged) {
        print_profile("step", pp);
      } else {
        print_profile("prefill", pp);
        print_profile("decode", dp);
      }
      print_segments(context);
    }
    return kExitOk;
  } catch (const Error& e) {
    return fail("run", e, a.json);
  }
}

}  // namespace sy::cli
