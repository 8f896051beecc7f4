// `serve MODEL`: an OpenAI-compatible HTTP server (docs/serve.md). It plans the model once for
// --parallel sequences (a plan proved before any weight loads), listens (GET /health answers
// 503 "loading" meanwhile), loads, prints the plan's summary and the address, and serves with
// continuous batching until SIGINT or SIGTERM: then it drains (requests in flight finish, new
// ones get 503) and exits 0.
#include <arpa/inet.h>
#include <csignal>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/model_run.hpp"
#include "apps/switchyard/plan_flags.hpp"
#include "apps/switchyard/serve_http.hpp"
#include "core/errors/errors.hpp"
#include "core/serving/scheduler.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using nlohmann::json;

struct ServeArgs {
  std::string model, host = "127.0.0.1", api_key, alias;
  int port = 8080;
  int64_t parallel = 8, max_queue = 64, timeout = 600, http_timeout = 30;
  PlanFlags flags;
};

bool loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  return inet_pton(AF_INET6, host.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

// The model id: --alias, else the file's or folder's stem.
std::string alias_of(const ServeArgs& a) {
  if (!a.alias.empty()) return a.alias;
  fs::path p(a.model);
  if (p.filename().empty()) p = p.parent_path();
  return fs::is_directory(p) ? p.filename().string() : p.stem().string();
}

// SIGINT and SIGTERM go to one thread that waits for them (sigwait), so no handler runs in an
// arbitrary thread: they are blocked here, before any thread starts, and every thread inherits
// the mask.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

}  // namespace

int run_serve(const GlobalOptions& global, const Args& args) {
  ServeArgs a;
  po::options_description desc("switchyard serve options");
  desc.add_options()("help,h", "show this help")("model", po::value(&a.model),
                                                 "model folder or GGUF file")(
      "host", po::value(&a.host)->default_value("127.0.0.1"), "address to listen on")(
      "port", po::value(&a.port)->default_value(8080), "port (0: any free port, printed)")(
      "parallel", po::value(&a.parallel)->default_value(8),
      "sequences generated at once (the plan's --max-sequences)")(
      "max-queue", po::value(&a.max_queue)->default_value(64),
      "requests that may wait for a slot; more get 429")(
      "api-key", po::value(&a.api_key),
      "require Authorization: Bearer KEY (required when --host is not a loopback address)")(
      "timeout", po::value(&a.timeout)->default_value(600),
      "seconds a request may take, queued and running, before it is cancelled")(
      "http-timeout", po::value(&a.http_timeout)->default_value(30),
      "seconds a connection has to send each whole request (headers and body; an idle "
      "keep-alive connection is closed after it), and for each write of a reply")(
      "alias", po::value(&a.alias), "the model id clients name (default: the model's name)");
  a.flags.add(desc, 8, 4096);
  po::positional_options_description pos;
  pos.add("model", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help") || a.model.empty()) {
    std::cout << "Usage: switchyard serve MODEL [options]\n" << desc << "\n" << kExitCodeHelp;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  auto usage = [](const std::string& why) {
    std::cerr << "switchyard serve: " << why << "\n";
    return kExitUsage;
  };
  if (vm.count("max-sequences") && !vm["max-sequences"].defaulted() &&
      a.flags.max_sequences != a.parallel)
    return usage("--max-sequences is --parallel for serve: give one of them");
  if (a.parallel < 1 || a.parallel > 4096 || a.max_queue < 0 || a.timeout < 1 || a.port < 0 ||
      a.port > 65535 || a.http_timeout < 1 || a.http_timeout > 3600)
    return usage(
        "--parallel in [1, 4096], --max-queue >= 0, --timeout >= 1, --http-timeout in [1, 3600], "
        "--port in [0, 65535]");
  if (!loopback(a.host) && a.api_key.empty())
    return usage("--host " + a.host + " is not a loopback address: give --api-key");
  a.flags.max_sequences = a.parallel;
  ImportOptions opts;
  Policy policy;
  if (auto why = a.flags.apply(opts, policy)) return usage(*why);
  opts.max_outputs = a.parallel;  // one logits row per sequence and step

  const sigset_t stop_signals = block_stop_signals();
  ServeConfig config{alias_of(a), a.api_key, a.timeout, a.parallel, a.max_queue};
  config.http_timeout_s = a.http_timeout;
  ServeHttp http(config);
  std::string why;
  const int port = http.listen(a.host, a.port, why);
  if (port < 0) return usage(why);
  try {
    OpenedModel model = OpenedModel::open(a.model, a.flags.allowed_config_keys);
    Registry reg = discover_plugins(global, default_load_options());
    LoadedModel loaded = LoadedModel::load(*model.source, opts, reg, policy);
    const Plan& plan = loaded.planned->plan;
    if (!plan.ok()) return fail("serve", *plan.error, false);
    Context& context = *loaded.context;
    if (context.layout() != KvLayout::paged)
      return fail("serve",
                  Error(Errc::no_kernel_for_op,
                        "serve runs many sequences, which needs every planned kernel to serve "
                        "the paged forms (ABI 1.5); the plan took the contiguous layout: " +
                            plan.layout_rule),
                  false);
    Scheduler scheduler(context, model.tokenizer, model.generation, {a.parallel, a.max_queue});
    json plugins = json::array();
    for (const auto& r : reg.records()) plugins.push_back(plugin_json(r));
    const Value* table = loaded.planned->graph.find(ValueRole::token_embedding);
    http.set_model({&model, &scheduler, context.context_length(), table ? table->shape[0] : 0,
                    to_json(plan), plugins});
    http.set_state(ServeState::ready);
    std::printf(
        "switchyard serve: %s as \"%s\", %s layout, %lld sequences at once, %lld KV "
        "blocks of %lld tokens, context %lld; plan %s\n",
        a.model.c_str(), config.alias.c_str(), kv_layout_name(context.layout()),
        (long long)a.parallel, (long long)context.kv().total_blocks(),
        (long long)context.kv().block_tokens(), (long long)context.context_length(),
        plan.hash.c_str());
    std::printf("switchyard serve: listening on http://%s:%d (GET /v1/plan shows the plan)\n",
                a.host.c_str(), port);
    std::fflush(stdout);
    // The signals wait on their own thread; the scheduler runs here, on the thread that
    // prepared the kernels (scheduler.hpp says why).
    std::thread signals([&] {
      int signal = 0;
      sigwait(&stop_signals, &signal);
      spdlog::info("serve: signal {}: draining (in-flight requests finish, new ones get 503)",
                   signal);
      http.set_state(ServeState::draining);
      scheduler.drain();
      scheduler.stop();
    });
    scheduler.run();
    signals.join();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last chunks go out
    http.stop();
    std::printf("switchyard serve: drained, exiting\n");
    return kExitOk;
  } catch (const Error& e) {
    http.stop();
    return fail("serve", e, false);
  }
}

}  // namespace sy::cli
