// `perplexity MODEL --file TEXT`: teacher-forced mean negative log-likelihood and perplexity of a
// text under the model — how a user checks that a quantized model is sound.
//
// The text is tokenized as a plain prompt (the model's own BOS rule, once at the start). Windows
// of at most --context tokens advance by --stride (default: --context), as in Hugging Face's
// strided perplexity: each window's prefill computes every position's logits, and it scores only
// the tokens no earlier window scored (a window's first token has no logits for it, so with
// disjoint windows each window's first token is not scored). The mean NLL is over every scored
// token, in nats; perplexity = exp(mean NLL).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/model_run.hpp"
#include "core/generation/generation.hpp"
#include "core/runtime/model_source.hpp"
#include "core/runtime/runtime.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

struct PerplexityArgs {
  std::string model, file, prefer, dtype;
  std::vector<std::string> allowed_config_keys;
  int64_t context = 512, stride = 0;
  bool json = false;
};

// A window ids[begin, end) whose targets are the ids at [first_target, end).
struct Window {
  int64_t begin, end, first_target;
};

std::vector<Window> windows_of(int64_t tokens, int64_t context, int64_t stride) {
  std::vector<Window> out;
  int64_t scored_to = 1;  // ids[0] is never a target
  for (int64_t begin = 0; scored_to < tokens; begin += stride) {
    const int64_t end = std::min(begin + context, tokens);
    out.push_back({begin, end, std::max(scored_to, begin + 1)});
    scored_to = end;
  }
  return out;
}

// -log softmax(row)[id], in double.
double nll_of(const float* row, int64_t vocab, int64_t id) {
  double mx = row[0];
  for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, double(row[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(row[i]) - mx);
  return std::log(sum) - (double(row[id]) - mx);
}

// One model and context for every window: each window is a new sequence whose tokens all ask
// for their logits (the plan computes up to --context of them per step).
class Scorer {
 public:
  Scorer(ModelSource& model, const PerplexityArgs& a, const GlobalOptions& global)
      : reg_(discover_plugins(global, default_load_options())) {
    ImportOptions o;
    o.max_batch_tokens = o.max_outputs = o.context = a.context;
    o.dtype_override = a.dtype;
    o.every_position_logits = true;  // the contiguous layout's, for plugins before ABI 1.5
    o.allowed_config_keys = a.allowed_config_keys;
    const uint64_t bytes = model.weight_bytes();
    loaded_ = LoadedModel::load(model, o, reg_, run_policy(a.prefer, "any", false), {},
                                [&](WeightLoader w) { return with_progress(w, bytes); });
    if (!loaded_.planned->plan.ok()) throw *loaded_.planned->plan.error;
  }

  // Every position's logits of ids[w.begin, w.end), [positions, vocab].
  std::vector<float> logits(const std::vector<int64_t>& ids, const Window& w) {
    Context& c = *loaded_.context;
    const size_t v = size_t(vocab());
    std::vector<float> out(size_t(w.end - w.begin) * v);
    const SeqId seq = c.add_sequence();
    run_tokens(
        c, seq, std::span(ids.data() + w.begin, size_t(w.end - w.begin)), true,
        [&](size_t i, const float* row) { std::copy(row, row + v, out.begin() + long(i * v)); });
    c.remove_sequence(seq);
    return out;
  }
  int64_t vocab() const { return loaded_.model->vocab(); }

 private:
  Registry reg_;
  LoadedModel loaded_;
};

struct Score {
  double nll_sum = 0;
  int64_t scored = 0;
};

Score score(Scorer& scorer, const std::vector<int64_t>& ids, const std::vector<Window>& windows) {
  Score s;
  const bool progress = isatty(2);
  for (size_t n = 0; n < windows.size(); ++n) {
    const Window& w = windows[n];
    const std::vector<float> logits = scorer.logits(ids, w);
    for (int64_t t = w.first_target; t < w.end; ++t)  // row t-1-begin predicts ids[t]
      s.nll_sum +=
          nll_of(logits.data() + (t - 1 - w.begin) * scorer.vocab(), scorer.vocab(), ids[t]);
    s.scored += w.end - w.first_target;
    if (progress)
      std::fprintf(stderr, "\rperplexity: window %zu of %zu, %lld tokens scored, running %.4f",
                   n + 1, windows.size(), (long long)s.scored,
                   std::exp(s.nll_sum / double(s.scored)));
  }
  if (progress) std::fprintf(stderr, "\n");
  return s;
}

int run(const GlobalOptions& global, const PerplexityArgs& a) {
  std::string why;
  std::optional<std::string> text = read_source(a.file, why);
  if (!text) {
    std::cerr << "switchyard perplexity: " << why << "\n";
    return kExitUsage;
  }
  try {
    std::unique_ptr<ModelSource> model = ModelSource::open(a.model, a.allowed_config_keys);
    const Tokenizer tok = model->tokenizer();
    const std::vector<int64_t> ids = plain_prompt_ids(tok, model->generation(tok), *text);
    if (ids.size() < 2)
      return fail("perplexity",
                  Error(Errc::prompt_too_long,
                        "the text encodes to " + std::to_string(ids.size()) +
                            " tokens; perplexity needs at least 2",
                        a.file),
                  a.json);
    const std::vector<Window> windows = windows_of(int64_t(ids.size()), a.context, a.stride);
    const auto t0 = std::chrono::steady_clock::now();
    Scorer scorer(*model, a, global);
    const auto t1 = std::chrono::steady_clock::now();
    const Score s = score(scorer, ids, windows);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    const double load_s = std::chrono::duration<double>(t1 - t0).count();
    const double mean = s.nll_sum / double(s.scored), ppl = std::exp(mean);
    int64_t evaluated = 0;
    for (const Window& w : windows) evaluated += w.end - w.begin;
    if (a.json) {
      json j = {{"status", "ok"},
                {"model", a.model},
                {"file", a.file},
                {"tokens", ids.size()},
                {"scored_tokens", s.scored},
                {"windows", windows.size()},
                {"context", a.context},
                {"stride", a.stride},
                {"mean_nll", mean},
                {"perplexity", ppl},
                {"seconds", secs},
                {"load_seconds", load_s},
                {"tokens_per_s", double(evaluated) / secs}};
      std::cout << j.dump(2) << "\n";
    } else {
      std::printf(
          "perplexity %.4f (mean NLL %.6f nats over %lld tokens; %zu window%s of up to %lld "
          "tokens, stride %lld); %.2f s, %.0f tokens/s\n",
          ppl, mean, (long long)s.scored, windows.size(), windows.size() == 1 ? "" : "s",
          (long long)a.context, (long long)a.stride, secs, double(evaluated) / secs);
    }
    return kExitOk;
  } catch (const Error& e) {
    return fail("perplexity", e, a.json);
  }
}

}  // namespace

int run_perplexity(const GlobalOptions& global, const Args& args) {
  PerplexityArgs a;
  po::options_description desc("switchyard perplexity options");
  desc.add_options()("help,h", "show this help")("model", po::value(&a.model),
                                                 "model folder or GGUF file")(
      "file", po::value(&a.file), "the text to score (- reads standard input)")(
      "context", po::value(&a.context)->default_value(512), "tokens per window")(
      "stride", po::value(&a.stride), "tokens a window advances by (default: --context)")(
      "prefer", po::value(&a.prefer), "device order, e.g. cpu,cuda")(
      "dtype", po::value(&a.dtype), "run in f32|bf16 instead of the model's dtype")(
      "allow-config-key", po::value(&a.allowed_config_keys),
      "accept this unknown config key as without effect; repeatable")(
      "json", po::bool_switch(&a.json), "the figures as JSON");
  po::positional_options_description pos;
  pos.add("model", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help") || a.model.empty() || a.file.empty()) {
    std::cout << "Usage: switchyard perplexity MODEL --file TEXT [options]\n"
              << desc << "\n"
              << kExitCodeHelp;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  if (!vm.count("stride")) a.stride = a.context;
  if (a.context < 2 || a.stride < 1 || a.stride > a.context) {
    std::cerr << "switchyard perplexity: --context must be at least 2 and --stride in [1, "
                 "--context]\n";
    return kExitUsage;
  }
  return run(global, a);
}

}  // namespace sy::cli
