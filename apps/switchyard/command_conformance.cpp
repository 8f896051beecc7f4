// `conformance PLUGIN.so|NAME`: runs core/conformance's checks on one plugin in a child process
// and prints the report — per kernel the cases inside and outside its envelope, how many ran
// against the reference plugin, and every failure with its verdict, case and what was seen.
// Exit 0 when everything passes, 9 when a check failed, 5 when the plugin cannot be found or
// loaded.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "core/conformance/conformance.hpp"
#include "core/registry/registry.hpp"

namespace sy::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

// A path as given, or NAME.so in the plugin search path's folders (nothing is loaded here).
std::optional<fs::path> find_plugin(const std::string& what, const GlobalOptions& global) {
  if (what.find('/') != std::string::npos || what.ends_with(".so"))
    return fs::exists(what) ? std::optional<fs::path>(fs::absolute(what)) : std::nullopt;
  std::vector<fs::path> dirs = search_path(global).dirs;
  dirs.push_back(executable_path(global).parent_path().parent_path() / "lib/switchyard/reference");
  for (const fs::path& d : dirs)
    if (fs::exists(d / (what + ".so"))) return d / (what + ".so");
  return std::nullopt;
}

void print_text(const ConformanceReport& r) {
  std::cout << "conformance of " << (r.plugin.empty() ? r.path : r.plugin) << " " << r.version
            << " (" << r.path << ", sha256 " << r.sha256 << ", ABI " << r.abi_major << "."
            << r.abi_minor << ")\n";
  if (!r.load_error.empty()) std::cout << "  does not load: " << r.load_error << "\n";
  if (!r.executed && r.load_error.empty())
    std::cout << "  no host-memory device here: check and manifest only, nothing executed\n";
  for (const ConformanceKernel& k : r.kernels) {
    int failed = 0;
    for (const ConformanceFailure& f : r.failures) failed += f.kernel == k.kernel;
    std::printf(
        "  %-26s %-24s %s  %3d inside (%d narrowed, %d run%s), %d outside\n", k.kernel.c_str(),
        k.op.c_str(), failed ? "FAIL" : "pass", k.inside, k.narrowed, k.executed,
        k.packed ? (", " + std::to_string(k.packed) + " also packed").c_str() : "", k.outside);
  }
  for (const ConformanceFailure& f : r.failures)
    std::cout << "  " << f.verdict << ": " << (f.kernel.empty() ? "(plugin)" : f.kernel)
              << (f.case_label.empty() ? "" : " [" + f.case_label + "]") << ": " << f.detail
              << "\n";
  std::printf("%s in %.1f s\n", r.passed() ? "PASS" : "FAIL", r.seconds);
}

}  // namespace

int run_conformance_command(const GlobalOptions& global, const Args& args) {
  std::string plugin;
  ConformanceOptions o;
  bool json = false;
  std::string output;
  po::options_description desc("switchyard conformance options");
  desc.add_options()("help,h", "show this help")("plugin", po::value(&plugin),
                                                 "a plugin's .so, or its name on the search path")(
      "json", po::bool_switch(&json), "the report as JSON")(
      "kernel", po::value(&o.kernel), "only this kernel")("quick", po::bool_switch(&o.quick),
                                                          "fewer shapes per kernel")(
      "seed", po::value(&o.seed)->default_value(1), "seed of the generated inputs")(
      "output", po::value(&output),
      "also write the JSON report to this file (beside the plugin as NAME.conformance.json, it "
      "marks the kernels verified)")("reference", po::value<std::string>(),
                                     "the reference plugin (default: the installed one)");
  po::positional_options_description pos;
  pos.add("plugin", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help") || plugin.empty()) {
    std::cout << "Usage: switchyard conformance PLUGIN.so|NAME [options]\n"
              << desc << "\n"
              << kExitCodeHelp;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  const std::optional<fs::path> path = find_plugin(plugin, global);
  if (!path) {
    std::cerr << "switchyard conformance: no plugin " << plugin
              << " (a path to a .so, or a name on the plugin search path)\n";
    return kExitPluginError;
  }
  o.reference = vm.count("reference") ? fs::path(vm["reference"].as<std::string>())
                                      : executable_path(global).parent_path().parent_path() /
                                            "lib/switchyard/reference/reference.so";
  const ConformanceReport r = run_conformance_isolated(*path, o);
  if (!output.empty()) {  // whole or not at all: a temporary file renamed over the target
    const fs::path tmp = output + ".tmp";
    std::ofstream(tmp) << r.to_json().dump(2) << "\n";
    std::error_code ec;
    fs::rename(tmp, output, ec);
    if (ec) {
      std::cerr << "switchyard conformance: cannot write " << output << ": " << ec.message()
                << "\n";
      fs::remove(tmp, ec);
      return kExitUsage;
    }
  }
  if (json)
    std::cout << r.to_json().dump(2) << "\n";
  else if (output.empty())
    print_text(r);
  else
    std::cout << "conformance of " << r.path << ": " << (r.passed() ? "PASS" : "FAIL") << " ("
              << r.kernels.size() << " kernels, " << r.failures.size() << " failures) -> " << output
              << "\n";
  if (!r.load_error.empty()) return kExitPluginError;
  return r.passed() ? kExitOk : kExitNonconformant;
}

}  // namespace sy::cli
