// The CLI's commands. Each parses its own arguments and returns an exit code.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "apps/switchyard/cli_context.hpp"

namespace sy::cli {

using Args = std::vector<std::string>;

// No abbreviated long options: `--plugin` must never be guessed as `--plugin-dir`.
inline constexpr int kOptionStyle = boost::program_options::command_line_style::default_style &
                                    ~boost::program_options::command_line_style::allow_guessing;

int run_plugins(const GlobalOptions& global, const Args& args);
int run_devices(const GlobalOptions& global, const Args& args);
int run_caps(const GlobalOptions& global, const Args& args);
int run_manifest(const GlobalOptions& global, const Args& args);
int run_bench(const GlobalOptions& global, const Args& args);
int bench_decode(const GlobalOptions& global, const Args& args);   // `bench decode`
int bench_batch(const GlobalOptions& global, const Args& args);    // `bench batch`
int bench_grammar(const GlobalOptions& global, const Args& args);  // `bench grammar`
int run_plan(const GlobalOptions& global, const Args& args);
int run_run(const GlobalOptions& global, const Args& args);
int run_perplexity(const GlobalOptions& global, const Args& args);
int run_make_test_model(const GlobalOptions& global, const Args& args);
int run_errors(const GlobalOptions& global, const Args& args);
int run_config_keys(const GlobalOptions& global, const Args& args);
int run_conformance_command(const GlobalOptions& global, const Args& args);
int run_serve(const GlobalOptions& global, const Args& args);

// One plugin of `switchyard plugins --json` (and the server's GET /v1/plugins).
nlohmann::json plugin_json(const PluginRecord& record);

// Parses `args` against `desc` (and positionals); throws boost::program_options::error.
boost::program_options::variables_map parse_command(
    const Args& args, const boost::program_options::options_description& desc,
    const boost::program_options::positional_options_description* positional = nullptr);

}  // namespace sy::cli
