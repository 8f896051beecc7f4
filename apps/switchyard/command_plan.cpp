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
#include "apps/switchyard/plan_flags.hpp"
#include "core/capability/vocabulary.hpp"
#include "core/errors/errors.hpp"
#include "core/gguf_model/gguf_model.hpp"
#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "core/runtime/model_source.hpp"
#include "core/runtime/runtime.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

struct PlanArgs {
  std::string model, target, kv_cache_device, explain;
  PlanFlags flags;
  bool no_transfers = false, json = false;
};

// Plans MODEL: a graph JSON (schema switchyard.graph/1) as it is; a Hugging Face config.json, a
// folder with one or a GGUF file in the paged layout, or in the contiguous one for a single
// sequence when a kernel lacks the paged form (plan_layouts).
Plan plan_model_file(const PlanArgs& a, const ImportOptions& opts, const Registry& reg,
                     const Inventory& inv, const Policy& policy) {
  fs::path path = a.model;
  const bool live = a.target.empty();
  if (is_gguf_file(path.string()) ||
      (fs::is_directory(path) && fs::exists(path / "model.safetensors"))) {
    auto source = ModelSource::open(path.string(), opts.allowed_config_keys);
    return live ? plan_model(*source, opts, reg, policy)->plan
                : plan_model_for(*source, opts, reg, inv, policy)->plan;
  }
  if (fs::is_directory(path)) path /= "config.json";
  std::ifstream in(path);
  if (!in) throw Error(Errc::bad_config, "cannot read the file", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("schema")) {
    Graph graph = parse_graph(text, path.string());
    return plan_graph(graph, reg, inv, policy);
  }
  auto import = [&](KvLayout layout) {
    ImportOptions o = opts;
    o.kv_layout = layout;
    if (policy.kv_blocks) o.kv_blocks = *policy.kv_blocks;
    return import_hf_config(path.string(), o);
  };
  return plan_layouts(import, opts.max_sequences, reg, inv, policy).plan;
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
      "kv-cache-device", po::value(&a.kv_cache_device), "where KV caches live: cpu|cuda")(
      "no-transfers", po::bool_switch(&a.no_transfers), "forbid copies between memories")(
      "explain", po::value(&a.explain), "print every candidate of this op with all its reasons")(
      "json", po::bool_switch(&a.json), "machine-readable plan (schema switchyard.plan/1)");
  a.flags.add(desc, 1, 4096);
  po::positional_options_description pos;
  pos.add("model", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help") || a.model.empty()) {
    std::cout << "Usage: switchyard plan MODEL [options]\n" << desc << "\n" << kExitCodeHelp;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  Policy policy;
  ImportOptions opts;
  if (auto why = a.flags.apply(opts, policy)) {
    std::cerr << "switchyard plan: " << *why << "\n";
    return kExitUsage;
  }
  policy.transfers = !a.no_transfers;
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
    // For a described machine nothing runs here: plugins are taken from their manifests and
    // their libraries are not opened (a CUDA plugin plans on a machine that cannot load it).
    LoadOptions load = default_load_options();
    load.manifest_only = !a.target.empty();
    Registry reg = discover_plugins(global, load);
    Inventory inv = a.target.empty() ? live_inventory(reg) : load_target(a.target);
    Plan plan = plan_model_file(a, opts, reg, inv, policy);
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
