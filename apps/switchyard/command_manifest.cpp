// `manifest`: writes a plugin's manifest from the plugin's own runtime declaration. The
// build runs it after linking each plugin, so the manifest cannot drift from the code.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "core/plugin/manifest.hpp"

namespace sy::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// Writes beside the target and renames, so a failure never leaves a partial manifest.
bool write_atomically(const fs::path& target, const std::string& text, std::string& error) {
  fs::path tmp = target;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) {
      error = "cannot write " + tmp.string();
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    error = "cannot rename into " + target.string() + ": " + ec.message();
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace

int run_manifest(const GlobalOptions&, const Args& args) {
  std::string library, output;
  po::options_description desc("switchyard manifest options");
  desc.add_options()("help,h", "show this help")("library", po::value<std::string>(&library),
                                                 "the plugin's shared object")(
      "output,o", po::value<std::string>(&output), "file to write (default: standard output)");
  po::positional_options_description pos;
  pos.add("library", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help")) {
    std::cout << "Usage: switchyard manifest PLUGIN.so [--output PLUGIN.json]\n" << desc;
    return kExitOk;
  }
  if (library.empty()) {
    std::cerr << "switchyard manifest: missing PLUGIN.so\n";
    return kExitUsage;
  }
  LoadOptions load = default_load_options();
  load.require_manifest = false;    // this command is what writes it
  load.probe_capabilities = false;  // a lie is reported when the plugin is loaded for use
  LoadOutcome out = load_plugin(fs::absolute(library), load);
  if (!out.plugin) {
    std::cerr << "switchyard manifest: " << library << " failed at stage "
              << load_stage_name(out.diagnostic->stage) << ": " << out.diagnostic->reason << "\n";
    return kExitPluginError;
  }
  std::string text = manifest_json(*out.plugin).dump(2) + "\n";
  if (output.empty()) {
    std::cout << text;
    return kExitOk;
  }
  std::string error;
  if (!write_atomically(output, text, error)) {
    std::cerr << "switchyard manifest: " << error << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace sy::cli
