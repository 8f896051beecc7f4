// switchyard — plan and run models across backend plugins.
#include <boost/program_options.hpp>
#include <functional>
#include <iostream>
#include <map>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"

namespace po = boost::program_options;
using namespace sy::cli;

namespace {

struct Command {
  std::function<int(const GlobalOptions&, const Args&)> run;
  const char* summary;
};

const std::map<std::string, Command>& commands() {
  static const std::map<std::string, Command> table = {
      {"plugins", {run_plugins, "discovered plugins, loaded or failed, with devices"}},
      {"devices", {run_devices, "devices of every loaded plugin"}},
      {"caps", {run_caps, "kernel envelopes: what each plugin can serve"}},
      {"manifest", {run_manifest, "write a plugin's manifest from its own declaration"}},
      {"run",
       {run_run,
        "generate text with a model folder (config, safetensors, tokenizer) or a GGUF file"}},
      {"perplexity",
       {run_perplexity, "teacher-forced mean NLL and perplexity of a text under a model"}},
      {"make-test-model", {run_make_test_model, "write a small seeded llama model to a folder"}},
      {"plan", {run_plan, "plan a model: which plugin serves each op, or why none can"}},
      {"bench", {run_bench, "time attention or matmul against this machine's own ceilings"}},
      {"errors", {run_errors, "the documented errors: what each means, how to fix it"}},
      {"conformance",
       {run_conformance_command, "check that a plugin does what it declares (child process)"}},
      {"config-keys", {run_config_keys, "every config.json key per family: honoured or refused"}},
      {"serve", {run_serve, "an OpenAI-compatible HTTP server with continuous batching"}},
  };
  return table;
}

void print_help(const po::options_description& global) {
  std::cout << "Usage: switchyard [global options] COMMAND [command options]\n\nCommands:\n";
  for (const auto& [name, cmd] : commands())
    std::cout << "  " << name << std::string(name.size() < 17 ? 17 - name.size() : 1, ' ')
              << cmd.summary << "\n";
  std::cout
      << "\n"
      << global << "\n"
      << "Every listing takes --json. `switchyard COMMAND --help` shows a command's options.\n"
      << "Environment: SWITCHYARD_PLUGIN_PATH (colon list of plugin folders),\n"
      << "             SWITCHYARD_LOG (log level), SWITCHYARD_NUM_THREADS.\n\n"
      << kExitCodeHelp;
}

}  // namespace

int main(int argc, char** argv) {
  GlobalOptions global;
  global.executable = argv[0];
  po::options_description desc("Global options");
  desc.add_options()("help,h", "show this help")("version", "print the version")(
      "log-level", po::value<std::string>(&global.log_level),
      "trace|debug|info|warn|error|off (default: SWITCHYARD_LOG or warn)")(
      "plugin-dir", po::value<std::vector<std::string>>(&global.plugin_dirs),
      "plugin folder; repeatable; replaces SWITCHYARD_PLUGIN_PATH and the default");
  po::options_description hidden;
  hidden.add_options()("command", po::value<std::string>())("args",
                                                            po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description pos;
  pos.add("command", 1).add("args", -1);

  try {
    po::parsed_options parsed = po::command_line_parser(argc, argv)
                                    .options(all)
                                    .positional(pos)
                                    .style(kOptionStyle)
                                    .allow_unregistered()
                                    .run();
    po::variables_map vm;
    po::store(parsed, vm);
    po::notify(vm);
    if (vm.count("version")) {
      std::cout << "switchyard " << SWITCHYARD_VERSION << " (plugin ABI " << SY_ABI_VERSION_MAJOR
                << "." << SY_ABI_VERSION_MINOR << ")\n";
      return kExitOk;
    }
    if (!vm.count("command")) {
      print_help(desc);
      return vm.count("help") ? kExitOk : kExitUsage;
    }
    std::string name = vm["command"].as<std::string>();
    auto it = commands().find(name);
    if (it == commands().end()) {
      std::cerr << "switchyard: unknown command '" << name << "' (see switchyard --help)\n";
      return kExitUsage;
    }
    Args rest = po::collect_unrecognized(parsed.options, po::include_positional);
    rest.erase(rest.begin());  // the command itself
    if (vm.count("help")) rest.push_back("--help");
    if (auto err = configure_logging(global.log_level)) {
      std::cerr << "switchyard: " << *err << "\n";
      return kExitUsage;
    }
    return it->second.run(global, rest);
  } catch (const po::error& e) {
    std::cerr << "switchyard: " << e.what() << " (see switchyard --help)\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "switchyard: internal error: " << e.what() << "\n";
    return kExitFailure;
  }
}
