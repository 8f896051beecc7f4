// `config-keys`: every config.json key per family and what the importer does with it — the
// table behind SY207's "not a key Switchyard knows", printed as the Markdown of
// docs/config-keys.md (which is how that file is regenerated).
#include <iostream>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "core/importer/importer.hpp"

namespace sy::cli {

int run_config_keys(const GlobalOptions&, const Args& args) {
  namespace po = boost::program_options;
  bool markdown = false;
  po::options_description desc("switchyard config-keys options");
  desc.add_options()("help,h", "show this help")(
      "markdown", po::bool_switch(&markdown), "the same table (it is Markdown; kept for scripts)");
  auto vm = parse_command(args, desc);
  if (vm.count("help")) {
    std::cout << "Usage: switchyard config-keys [--markdown]\n" << desc << "\n" << kExitCodeHelp;
    return kExitOk;
  }
  std::cout << config_keys_markdown();
  return kExitOk;
}

}  // namespace sy::cli
