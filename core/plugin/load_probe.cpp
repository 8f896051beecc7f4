// The child: fork, dlopen, entry, _exit. fork rather than a helper executable: the host API
// runs wherever a program links libswitchyard, with no known path to a helper; discovery runs
// before the host starts threads of its own (the CLI, a runtime's creation), and the child
// calls nothing but the dynamic linker and the plugin.
#include "core/plugin/load_probe.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "switchyard/plugin_api.h"

namespace sy {
namespace fs = std::filesystem;
namespace {

void quiet_log(void*, sy_log_level, const char*) {}

[[noreturn]] void child(const fs::path& library) {
  // A fault must end the child with its signal: a handler the host installed (a sanitizer's,
  // which reports and exits 1) would turn it into an exit status the parent leaves alone.
  for (int sig : {SIGSEGV, SIGILL, SIGBUS, SIGFPE, SIGABRT}) ::signal(sig, SIG_DFL);
  // The plugin's output is not the probe's concern; the host's stages judge the rest.
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) ::dup2(null, 1), ::dup2(null, 2);
  void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) ::_exit(3);
  auto entry = reinterpret_cast<sy_plugin_entry_fn>(::dlsym(h, SY_PLUGIN_ENTRY_SYMBOL));
  if (!entry) ::_exit(4);
  sy_host_info info{};
  info.struct_size = sizeof info;
  info.abi_major = SY_ABI_VERSION_MAJOR;
  info.abi_minor = SY_ABI_VERSION_MINOR;
  info.host_version = "switchyard load probe";
  info.log = quiet_log;
  const sy_plugin_api* api = entry(&info);
  ::_exit(api ? 0 : 5);
}

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  return std::string("SIG") + (name ? name : std::to_string(sig).c_str()) + " (" +
         strsignal(sig) + ")";
}

std::string hint_for(int sig) {
  if (sig == SIGILL)
    return "it executes an instruction this CPU lacks while loading, before it could choose "
           "code for this CPU (a static initializer compiled for AVX-512 or AVX2, say): rebuild "
           "it for this CPU or report it to its authors; `grep flags /proc/cpuinfo` lists what "
           "this CPU has";
  return "it crashes while loading (its static initializers or sy_plugin_entry): report it to "
         "its authors, or remove it from the plugin folder";
}

fs::path cache_file(const std::string& sha256) {
  const fs::path dir = probe_cache_dir();
  if (dir.empty() || sha256.empty()) return {};
  return dir / (sha256 + "-" + cpu_identity_digest());
}

void remember(const fs::path& file) {
  if (file.empty()) return;
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  // Written whole or not at all: a temporary file renamed into place.
  const fs::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    if (!out) return;
    out << "loaded in a child process without a signal\n";
  }
  fs::rename(tmp, file, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace

fs::path probe_cache_dir() {
  if (const char* d = std::getenv("SWITCHYARD_CACHE_DIR"); d && *d) return fs::path(d) / "probes";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return fs::path(d) / "switchyard" / "probes";
  if (const char* d = std::getenv("HOME"); d && *d)
    return fs::path(d) / ".cache" / "switchyard" / "probes";
  return {};
}

std::string cpu_identity_digest() {
  static const std::string digest = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(in, line) && (model.empty() || flags.empty())) {
      if (line.rfind("model name", 0) == 0 && model.empty()) model = line;
      if (line.rfind("flags", 0) == 0 && flags.empty()) flags = line;
    }
    std::ostringstream out;
    out << std::hex << std::hash<std::string>{}(model + "\n" + flags);
    return out.str();
  }();
  return digest;
}

ProbeOutcome probe_library_load(const fs::path& library, const std::string& sha256,
                                int timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  ProbeOutcome out;
  auto done = [&] {
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                 .count();
    return out;
  };
  const fs::path remembered = cache_file(sha256);
  std::error_code ec;
  if (!remembered.empty() && fs::exists(remembered, ec)) {
    out.cached = true;
    return done();
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return done();  // no child to be had: the host's own load decides
  if (pid == 0) child(library);
  int status = 0;
  const auto deadline = t0 + std::chrono::seconds(timeout_s);
  pid_t got = 0;
  while ((got = ::waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (got == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    out.failure = ProbeFailure{
        "loading it in a child process did not finish within " + std::to_string(timeout_s) +
            " s (the child was killed)",
        "its static initializers or sy_plugin_entry hang; report it to its authors"};
    return done();
  }
  if (WIFSIGNALED(status)) {
    out.failure = ProbeFailure{"loading it killed a child process with " +
                                   signal_text(WTERMSIG(status)),
                               hint_for(WTERMSIG(status))};
    return done();
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) remember(remembered);
  return done();
}

}  // namespace sy
