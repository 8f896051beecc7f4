// `errors`: the documented error catalog (core/errors/), as a table, one entry, JSON, or the
// Markdown of docs/errors.md (hidden --markdown, which is how that file is regenerated).
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/text_table.hpp"
#include "core/errors/errors.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

json entry_json(const ErrorInfo& e) {
  return json{{"code", e.code},       {"name", e.name}, {"message", e.message},
              {"meaning", e.meaning}, {"fix", e.fix},   {"exit_code", e.exit_code}};
}

// `text` word-wrapped to `width` columns, every line indented by `indent` spaces.
std::string wrapped(const std::string& text, size_t indent, size_t width = 80) {
  std::istringstream words(text);
  std::string word, out, line;
  auto flush = [&] {
    if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
    line.clear();
  };
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) flush();
    line += (line.empty() ? "" : " ") + word;
  }
  flush();
  return out;
}

void print_entry(const ErrorInfo& e) {
  std::cout << e.code << " " << e.name << "\n\n"
            << "Message:   " << e.message << "\n"
            << "Exit code: " << e.exit_code << " (" << error_exit_code_meaning(e.exit_code)
            << ")\n\n"
            << "What it means:\n"
            << wrapped(e.meaning, 2) << "\n"
            << "How to fix it:\n"
            << wrapped(e.fix, 2);
}

}  // namespace

int run_errors(const GlobalOptions&, const Args& args) {
  std::string key;
  bool as_json = false, markdown = false;
  po::options_description desc("switchyard errors options");
  desc.add_options()("help,h", "show this help")("json", po::bool_switch(&as_json),
                                                 "machine-readable output");
  po::options_description hidden;
  hidden.add_options()("code", po::value<std::string>(&key), "code or name")(
      "markdown", po::bool_switch(&markdown), "print docs/errors.md");
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description pos;
  pos.add("code", 1);
  auto vm = parse_command(args, all, &pos);
  if (vm.count("help")) {
    std::cout << "Usage: switchyard errors [CODE|NAME] [--json]\n"
              << "Without CODE, lists every documented error; with one, prints what it means\n"
              << "and how to fix it. docs/errors.md has the same text.\n\n"
              << desc << "\n"
              << kExitCodeHelp;
    return kExitOk;
  }
  if (markdown) {
    if (!key.empty() || as_json) {
      std::cerr << "switchyard errors: --markdown takes no CODE and no --json\n";
      return kExitUsage;
    }
    std::cout << render_errors_markdown();
    return kExitOk;
  }
  if (!key.empty()) {
    const ErrorInfo* e = find_error(key);
    if (!e) {
      std::cerr << "switchyard errors: unknown error code or name '" << key
                << "' (run `switchyard errors` to list them all)\n";
      return kExitUsage;
    }
    if (as_json)
      std::cout << entry_json(*e).dump(2) << "\n";
    else
      print_entry(*e);
    return kExitOk;
  }
  if (as_json) {
    json out = json::array();
    for (const auto& e : error_catalog()) out.push_back(entry_json(e));
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  TextTable table({"CODE", "NAME", "MESSAGE"});
  for (const auto& e : error_catalog()) table.add_row({e.code, e.name, e.message});
  table.print(std::cout);
  std::cout << "\n`switchyard errors CODE` (or NAME) shows what one means and how to fix it.\n";
  return kExitOk;
}

}  // namespace sy::cli
