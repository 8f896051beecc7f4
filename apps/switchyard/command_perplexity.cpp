// `perplexity MODEL --file TEXT`: teacher-forced mean negative log-likelihood and perplexity of a
// text under the model — how a user checks that a quantized model is sound.
//
// The text is tokenized as a plain prompt (the model's own BOS rule, once at the start). Windows
// of at most --context tokens advance by --stride (default: --context), as in Hugging Face's
// strided perplexity: each window's prefill computes every position's logits, and it scores only
// the tokens no earlier window scored (a window's first token has no logits for it, so with
// disjoint windows each window's first token is not scored). The mean NLL is over every scored
// token, in nats; perplexity = exp(mean NLL).
//
// --numerics picks the arithmetic (docs/numerics.md); --compare-numerics scores the text under
// exact, then the --numerics given (auto, the default, when that is exact), and reports the
// difference of their mean NLLs and how often their top-1 predictions agree (--json also lists each
// run's top-1 ids).
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
  std::string model, file, prefer, dtype, numerics;
  std::vector<std::string> allowed_config_keys;
  int64_t context = 512, stride = 0;
  bool json = false, compare = false;
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
  Scorer(ModelSource& model, const PerplexityArgs& a, const GlobalOptions& global,
         Numerics numerics)
      : reg_(discover_plugins(global, default_load_options())) {
    ImportOptions o;
    o.max_batch_tokens = o.max_outputs = o.context = a.context;
    o.dtype_override = a.dtype;
    o.every_position_logits = true;  // the contiguous layout's, for plugins before ABI 1.5
    o.allowed_config_keys = a.allowed_config_keys;
    const uint64_t bytes = model.weight_bytes();
    Policy policy = run_policy(a.prefer, "any", false);
    policy.numerics = numerics;
    loaded_ = LoadedModel::load(model, o, reg_, policy, {},
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
  std::vector<int64_t> top1;  // per scored token, the id the model ranked first
  double seconds = 0;
  double mean() const { return nll_sum / double(scored); }
};

int64_t argmax_of(const float* row, int64_t vocab) {
  return int64_t(std::max_element(row, row + vocab) - row);
}

Score score(Scorer& scorer, const std::vector<int64_t>& ids, const std::vector<Window>& windows) {
  Score s;
  const bool progress = isatty(2);
  for (size_t n = 0; n < windows.size(); ++n) {
    const Window& w = windows[n];
    const std::vector<float> logits = scorer.logits(ids, w);
    for (int64_t t = w.first_target; t < w.end; ++t) {  // row t-1-begin predicts ids[t]
      const float* row = logits.data() + (t - 1 - w.begin) * scorer.vocab();
      s.nll_sum += nll_of(row, scorer.vocab(), ids[t]);
      s.top1.push_back(argmax_of(row, scorer.vocab()));
    }
    s.scored += w.end - w.first_target;
    if (progress)
      std::fprintf(stderr, "\rperplexity: window %zu of %zu, %lld tokens scored, running %.4f",
                   n + 1, windows.size(), (long long)s.scored,
                   std::exp(s.nll_sum / double(s.scored)));
  }
  if (progress) std::fprintf(stderr, "\n");
  return s;
}

// Each run's figures, and with two runs (--compare-numerics) their difference.
void report(const PerplexityArgs& a, size_t tokens, size_t windows, int64_t evaluated,
            const std::vector<Numerics>& runs, const std::vector<Score>& scores, double load_s) {
  const Score& s = scores.back();
  size_t agree = 0;
  for (size_t i = 0; i < s.top1.size(); ++i) agree += s.top1[i] == scores.front().top1[i];
  const double agreement = double(agree) / double(s.top1.size());
  if (a.json) {
    json per = json::array();
    for (size_t r = 0; r < runs.size(); ++r)
      per.push_back({{"numerics", numerics_name(runs[r])},
                     {"mean_nll", scores[r].mean()},
                     {"perplexity", std::exp(scores[r].mean())},
                     {"seconds", scores[r].seconds},
                     {"tokens_per_s", double(evaluated) / scores[r].seconds},
                     {"top1", scores[r].top1}});
    json j = {{"status", "ok"},
              {"model", a.model},
              {"file", a.file},
              {"tokens", tokens},
              {"scored_tokens", s.scored},
              {"windows", windows},
              {"context", a.context},
              {"stride", a.stride},
              {"numerics", per[0]["numerics"]},
              {"mean_nll", s.mean()},
              {"perplexity", std::exp(s.mean())},
              {"seconds", s.seconds},
              {"load_seconds", load_s},
              {"tokens_per_s", double(evaluated) / s.seconds},
              {"runs", per}};
    if (runs.size() == 2) {
      j["numerics"] = numerics_name(runs.back());
      j["delta_mean_nll"] = s.mean() - scores.front().mean();
      j["top1_agreement"] = agreement;
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  for (size_t r = 0; r < runs.size(); ++r)
    std::printf(
        "perplexity %.4f (mean NLL %.6f nats over %lld tokens; %zu window%s of up to %lld "
        "tokens, stride %lld; --numerics %s); %.2f s, %.0f tokens/s\n",
        std::exp(scores[r].mean()), scores[r].mean(), (long long)scores[r].scored, windows,
        windows == 1 ? "" : "s", (long long)a.context, (long long)a.stride, numerics_name(runs[r]),
        scores[r].seconds, double(evaluated) / scores[r].seconds);
  if (runs.size() == 2)
    std::printf("%s - exact: mean NLL %+.6f nats; top-1 agreement %.4f (%zu of %zu tokens)\n",
                numerics_name(runs.back()), s.mean() - scores.front().mean(), agreement, agree,
                s.top1.size());
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
    int64_t evaluated = 0;
    for (const Window& w : windows) evaluated += w.end - w.begin;
    const Numerics chosen = *parse_numerics(a.numerics);
    std::vector<Numerics> runs = {chosen};
    if (a.compare) runs = {Numerics::exact, chosen == Numerics::exact ? kDefaultNumerics : chosen};
    std::vector<Score> scores;
    double load_s = 0;
    for (Numerics n : runs) {
      const auto t0 = std::chrono::steady_clock::now();
      Scorer scorer(*model, a, global, n);
      const auto t1 = std::chrono::steady_clock::now();
      scores.push_back(score(scorer, ids, windows));
      scores.back().seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      load_s += std::chrono::duration<double>(t1 - t0).count();
    }
    report(a, ids.size(), windows.size(), evaluated, runs, scores, load_s);
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
      "numerics", po::value(&a.numerics)->default_value(numerics_name(kDefaultNumerics)),
      "exact|auto|fast (docs/numerics.md)")(
      "compare-numerics", po::bool_switch(&a.compare),
      "score under --numerics exact and the --numerics given (auto when that is exact), and "
      "report the difference and top-1 agreement")("json", po::bool_switch(&a.json),
                                                   "the figures as JSON");
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
  if (!parse_numerics(a.numerics)) {
    std::cerr << "switchyard perplexity: --numerics must be " << kNumericsChoices << ", not '"
              << a.numerics << "'\n";
    return kExitUsage;
  }
  if (a.context < 2 || a.stride < 1 || a.stride > a.context) {
    std::cerr << "switchyard perplexity: --context must be at least 2 and --stride in [1, "
                 "--context]\n";
    return kExitUsage;
  }
  return run(global, a);
}

}  // namespace sy::cli
