// `bench grammar MODEL --json-schema FILE --document FILE`: what holding an answer to a grammar
// costs per token, on the model's own vocabulary. The document (a JSON text valid under the
// schema) is tokenized; along its tokens, each grammar state's mask is computed cold (the trie
// walk, as a state's first visit), then warm (the cache), and applied to a row of logits (what
// the engine does before the sampler). Medians over the document's tokens, in microseconds;
// compare them with `bench batch`'s step time of the same model.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/model_run.hpp"
#include "core/engine/engine.hpp"
#include "core/errors/errors.hpp"
#include "core/runtime/runtime.hpp"
#include "core/sampling/json_schema.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;

double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace

int bench_grammar(const GlobalOptions&, const Args& args) {
  std::string model, schema_file, document_file;
  bool as_json = false;
  po::options_description desc("switchyard bench grammar options");
  desc.add_options()("help,h", "show this help")("model", po::value(&model),
                                                 "model folder or GGUF file (its vocabulary)")(
      "json-schema", po::value(&schema_file), "the JSON Schema the answer is held to")(
      "document", po::value(&document_file), "a JSON text valid under it: the answer walked")(
      "json", po::bool_switch(&as_json), "figures as JSON");
  po::positional_options_description pos;
  pos.add("model", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help") || model.empty() || schema_file.empty() || document_file.empty()) {
    std::cout << "Usage: switchyard bench grammar MODEL --json-schema FILE --document FILE\n"
              << desc;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  std::string why;
  const auto schema_text = read_source(schema_file, why);
  const auto document = schema_text ? read_source(document_file, why) : std::nullopt;
  if (!document) {
    std::cerr << "switchyard bench grammar: " << why << "\n";
    return kExitUsage;
  }
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = json_schema_grammar(nlohmann::ordered_json::parse(*schema_text));
  } catch (const std::exception& e) {
    std::cerr << "switchyard bench grammar: --json-schema " << schema_file << ": " << e.what()
              << "\n";
    return kExitUsage;
  }
  try {
    const OpenedModel m = OpenedModel::open(model, {});
    const int64_t vocab = m.tokenizer.vocab_size();
    auto t0 = std::chrono::steady_clock::now();
    const auto table = vocabulary_table(m.tokenizer, vocab);
    const double table_us = us_since(t0);
    GrammarMasks cold(grammar, table), warm(grammar, table);
    auto masks = std::make_shared<GrammarMasks>(grammar, table);
    GrammarState state(grammar);
    std::vector<double> cold_us, warm_us, apply_us, sample_us, sample_top_us;
    std::vector<float> logits(static_cast<size_t>(vocab), 0.f);
    // Logits shaped like a model's (normal, sd 2.5; fixed seed): the sampler's cost depends on
    // the distribution. Two samplers: OpenAI's defaults (temperature 1, top_p 1) and a common
    // truncation (temperature 0.7, top_k 40, top_p 0.9).
    std::vector<float> shaped(logits.size());
    {
      std::mt19937 rng(7);
      std::normal_distribution<float> normal(0.f, 2.5f);
      for (float& l : shaped) l = normal(rng);
    }
    SamplingParams plain_params;
    plain_params.temperature = 1.0;
    SamplingParams top_params;
    top_params.temperature = 0.7, top_params.top_k = 40, top_params.top_p = 0.9;
    Sampler plain(plain_params), top(top_params);
    std::string text = *document;  // a file's last newline is not part of the answer
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    const std::vector<int64_t> ids = m.tokenizer.encode(text);
    for (int64_t id : ids) {
      t0 = std::chrono::steady_clock::now();
      cold.allowed(state);
      cold_us.push_back(us_since(t0));
      warm.allowed(state);
      t0 = std::chrono::steady_clock::now();
      warm.allowed(state);
      warm_us.push_back(us_since(t0));
      GrammarConstraint c(masks);
      std::copy(shaped.begin(), shaped.end(), logits.begin());
      t0 = std::chrono::steady_clock::now();
      c.mask(logits, {});
      apply_us.push_back(us_since(t0));
      t0 = std::chrono::steady_clock::now();
      plain.sample(logits);
      sample_us.push_back(us_since(t0));
      t0 = std::chrono::steady_clock::now();
      top.sample(logits);
      sample_top_us.push_back(us_since(t0));
      if (!state.feed(m.tokenizer.decode_token(id)))
        throw Error(Errc::invalid_argument,
                    "--document: the text leaves the schema's grammar at token " +
                        std::to_string(id) + " (\"" + m.tokenizer.decode_token(id) + "\")");
    }
    if (!state.finished())
      throw Error(Errc::invalid_argument, "--document: the text is not a whole answer");
    const double cold_med = quantile(cold_us, 0.5), cold_p90 = quantile(cold_us, 0.9),
                 warm_med = quantile(warm_us, 0.5), apply_med = quantile(apply_us, 0.5),
                 sample_med = quantile(sample_us, 0.5),
                 sample_top_med = quantile(sample_top_us, 0.5);
    // What the document's first request pays for its cold states, all together.
    double cold_total = 0;
    for (double us : cold_us) cold_total += us;
    if (as_json) {
      std::cout << nlohmann::json{{"bench", "grammar"},
                                  {"model", model},
                                  {"vocab", vocab},
                                  {"tokens", ids.size()},
                                  {"states", cold.cached()},
                                  {"table_us", table_us},
                                  {"cold_median_us", cold_med},
                                  {"cold_p90_us", cold_p90},
                                  {"cold_total_us", cold_total},
                                  {"warm_median_us", warm_med},
                                  {"apply_median_us", apply_med},
                                  {"sample_median_us", sample_med},
                                  {"sample_top_median_us", sample_top_med}}
                       .dump(2)
                << "\n";
      return kExitOk;
    }
    std::printf(
        "grammar of %s over a vocabulary of %lld: %zu tokens of the document, %zu distinct "
        "states; the vocabulary's trie in %.1f ms\n  mask per token: cold (first visit of a "
        "state) median %.1f us, p90 %.1f us, %.1f ms for the whole document; warm (cached) "
        "median %.2f us; applied to the logits median %.1f us\n  then the sampler on the masked "
        "logits: temperature 1 median %.1f us; temperature 0.7, top_k 40, top_p 0.9 median %.1f "
        "us\n",
        schema_file.c_str(), (long long)vocab, ids.size(), cold.cached(), table_us / 1e3, cold_med,
        cold_p90, cold_total / 1e3, warm_med, apply_med, sample_med, sample_top_med);
    return kExitOk;
  } catch (const Error& e) {
    return fail("bench grammar", e, as_json);
  }
}

}  // namespace sy::cli
