// `plan MODEL`: before any weight is loaded, which plugin serves each op on this machine (or
// on a --target machine), what was refused and why — or the documented error.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/model_run.hpp"
#include "core/capability/vocabulary.hpp"
#include "core/errors/errors.hpp"
#include "core/gguf_model/gguf_model.hpp"
#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "core/runtime/model_source.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

struct PlanArgs {
  std::string model, target, prefer, attention = "any", kv_cache_device, explain, dtype;
  std::string memory_reserve;
  std::vector<std::string> allowed_config_keys, max_device_memory;
  bool strict = false, no_transfers = false, json = false, require_verified = false;
  int64_t prompt_len = 512, context = 4096, batch = 1;
};

// A graph JSON (schema switchyard.graph/1), a Hugging Face config.json, a folder with one, or
// a GGUF file.
Graph load_model(const PlanArgs& a) {
  fs::path path = a.model;
  ImportOptions opts;
  opts.batch = a.batch;
  opts.prompt_len = a.prompt_len;
  opts.context = a.context;
  opts.dtype_override = a.dtype;
  opts.allowed_config_keys = a.allowed_config_keys;
  if (is_gguf_file(path.string()))
    return ModelSource::open(path.string(), a.allowed_config_keys)->import(opts);
  if (fs::is_directory(path)) path /= "config.json";
  std::ifstream in(path);
  if (!in) throw Error(Errc::bad_config, "cannot read the file", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("schema"))
    return parse_graph(text, path.string());
  return import_hf_config(path.string(), opts);
}

// Parses "cuda,cpu" into device types; returns false on an unknown name.
bool parse_prefer(const std::string& text, std::vector<DLDeviceType>& out) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto t = parse_device_type(item);
    if (!t) return false;
    out.push_back(*t);
  }
  return !out.empty();
}

int print_input_error(const Error& e, bool json) {
  const ErrorInfo& info = error_info(e.code);
  if (json) {
    nlohmann::json j{
        {"schema", "switchyard.plan/1"},
        {"status", "error"},
        {"error", {{"code", code_text(e.code)}, {"name", info.name}, {"message", e.what()}}}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cerr << "switchyard plan: error " << code_text(e.code) << " (" << info.name
              << "): " << e.what() << "\n";
  }
  return info.exit_code;
}

}  // namespace

int run_plan(const GlobalOptions& global, const Args& args) {
  PlanArgs a;
  po::options_description desc("switchyard plan options");
  desc.add_options()("help,h", "show this help")(
      "model", po::value(&a.model), "config.json, model folder, GGUF file or graph JSON")(
      "target", po::value(&a.target), "plan for a described machine (examples/targets/*.json)")(
      "prefer", po::value(&a.prefer),
      "device order, e.g. cuda,cpu (default: accelerators, then cpu)")(
      "attention", po::value(&a.attention)->default_value("any"),
      "pin the attention family: flash|sdpa|flex|fused_decode|any")(
      "strict", po::bool_switch(&a.strict),
      "a refusal of the pinned/preferred choice is the error")(
      "kv-cache-device", po::value(&a.kv_cache_device), "where KV caches live: cpu|cuda")(
      "no-transfers", po::bool_switch(&a.no_transfers), "forbid copies between memories")(
      "require-verified", po::bool_switch(&a.require_verified),
      "use only kernels a conformance report beside their plugin verifies (SY010 otherwise)")(
      "prompt-len", po::value(&a.prompt_len)->default_value(512), "prefill length")(
      "context", po::value(&a.context)->default_value(4096), "KV cache length for decode")(
      "batch", po::value(&a.batch)->default_value(1), "sequences")(
      "dtype", po::value(&a.dtype), "override the model's dtype: f32|bf16|f16")(
      "allow-config-key", po::value(&a.allowed_config_keys),
      "accept this unknown config.json key as without effect; repeatable")(
      "memory-reserve", po::value(&a.memory_reserve),
      "memory left free on every device (default: 1GiB, or an eighth of a smaller device)")(
      "max-device-memory", po::value(&a.max_device_memory),
      "cap a device's memory for this plan, e.g. cuda:0=8GiB; repeatable")(
      "explain", po::value(&a.explain), "print every candidate of this op with all its reasons")(
      "json", po::bool_switch(&a.json), "machine-readable plan (schema switchyard.plan/1)");
  po::positional_options_description pos;
  pos.add("model", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help") || a.model.empty()) {
    std::cout << "Usage: switchyard plan MODEL [options]\n" << desc << "\n" << kExitCodeHelp;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  Policy policy;
  policy.attention = a.attention;
  policy.strict = a.strict;
  policy.transfers = !a.no_transfers;
  policy.require_verified = a.require_verified;
  if (auto why = apply_memory_options(a.memory_reserve, a.max_device_memory, policy)) {
    std::cerr << "switchyard plan: " << *why << "\n";
    return kExitUsage;
  }
  const std::vector<std::string> families = {"flash", "sdpa", "flex", "fused_decode", "any"};
  if (std::find(families.begin(), families.end(), a.attention) == families.end()) {
    std::cerr << "switchyard plan: --attention must be flash, sdpa, flex, fused_decode or any\n";
    return kExitUsage;
  }
  if (!a.prefer.empty()) {
    if (!parse_prefer(a.prefer, policy.prefer)) {
      std::cerr << "switchyard plan: --prefer takes device types, e.g. cuda,cpu\n";
      return kExitUsage;
    }
    policy.prefer_given = true;
  } else {
    policy.prefer = {kDLCUDA, kDLROCM, kDLCPU};
  }
  if (!a.kv_cache_device.empty()) {
    auto t = parse_device_type(a.kv_cache_device);
    if (!t) {
      std::cerr << "switchyard plan: --kv-cache-device takes a device type, e.g. cpu or cuda\n";
      return kExitUsage;
    }
    policy.kv_cache_device = t;
  }
  auto t0 = std::chrono::steady_clock::now();
  try {
    Graph graph = load_model(a);
    // For a described machine nothing runs here: plugins are taken from their manifests and
    // their libraries are not opened (a CUDA plugin plans on a machine that cannot load it).
    LoadOptions load = default_load_options();
    load.manifest_only = !a.target.empty();
    Registry reg = discover_plugins(global, load);
    Inventory inv = a.target.empty() ? live_inventory(reg) : load_target(a.target);
    Plan plan = plan_graph(graph, reg, inv, policy);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (a.json) {
      nlohmann::json j = to_json(plan);
      j["planning_ms"] = ms;
      std::cout << j.dump(2) << "\n";
    } else if (!a.explain.empty()) {
      std::cout << render_explain(plan, a.explain);
    } else {
      std::cout << render_plan(plan);
      std::cout << "planned in " << ms << " ms\n";
    }
    if (plan.error && !a.json)
      std::cerr << "switchyard plan: no legal plan: " << code_text(plan.error->code) << "\n";
    return plan.ok() ? kExitOk : kExitNoPlan;
  } catch (const Error& e) {
    return print_input_error(e, a.json);
  }
}

}  // namespace sy::cli
