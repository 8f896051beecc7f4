// run_conformance_isolated: the run in a forked child whose stdout and stderr go to a file the
// hooks watch; the report comes back as JSON through a pipe. A child killed by a signal or
// past its time limit becomes a report with the verdict "crashed" (or "hung") naming the case
// it was in, read from a second pipe of progress lines.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "core/conformance/run.hpp"

namespace sy {
namespace {

constexpr int kTimeLimitSeconds = 600;

void write_all(int fd, const std::string& s) {
  for (size_t done = 0; done < s.size();) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += size_t(n);
  }
}

[[noreturn]] void child(const std::filesystem::path& plugin, const ConformanceOptions& o,
                        int report_fd, int progress_fd, int capture_fd) {
  spdlog::set_level(spdlog::level::off);  // the host's own logging is not the plugin's output
  ::dup2(capture_fd, 1);
  ::dup2(capture_fd, 2);
  off_t seen = 0;
  conformance::Hooks hooks;
  hooks.new_output = [&]() -> std::string {
    std::fflush(stdout);
    std::fflush(stderr);
    struct stat st {};
    if (::fstat(capture_fd, &st) != 0 || st.st_size <= seen) return {};
    std::string bytes(size_t(st.st_size - seen), '\0');
    const ssize_t n = ::pread(capture_fd, bytes.data(), bytes.size(), seen);
    seen = st.st_size;
    return n > 0 ? bytes.substr(0, size_t(n)) : std::string();
  };
  hooks.progress = [&](const std::string& label) { write_all(progress_fd, label + "\n"); };
  const ConformanceReport r = conformance::run_with(plugin, o, hooks);
  write_all(report_fd, r.to_json().dump());
  ::_exit(0);
}

// Reads everything from `fd` until EOF or the deadline; false on the deadline.
bool drain(int fd, std::string& out, std::chrono::steady_clock::time_point deadline) {
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, int(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return true;
    out.append(buf, size_t(n));
  }
}

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

}  // namespace

ConformanceReport run_conformance_isolated(const std::filesystem::path& plugin,
                                           const ConformanceOptions& o) {
  int report[2], progress[2];
  char capture_path[] = "/tmp/switchyard-conformance-XXXXXX";
  const int capture = ::mkstemp(capture_path);
  ConformanceReport failed;
  failed.path = plugin.string();
  failed.sha256 = file_sha256(plugin);
  if (capture < 0 || ::pipe(report) != 0 || ::pipe(progress) != 0) {
    failed.load_error = std::string("cannot set up the child process: ") + std::strerror(errno);
    return failed;
  }
  ::unlink(capture_path);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(report[0]);
    ::close(progress[0]);
    child(plugin, o, report[1], progress[1], capture);
  }
  ::close(report[1]);
  ::close(progress[1]);
  ::close(capture);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kTimeLimitSeconds);
  std::string json_text, lines;
  const bool in_time = drain(report[0], json_text, deadline);
  ::fcntl(progress[0], F_SETFL, O_NONBLOCK);
  drain(progress[0], lines, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
  if (!in_time) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(report[0]);
  ::close(progress[0]);
  const std::string where = last_line(lines);
  const std::string kernel = where.substr(0, where.find(": "));
  const std::string label =
      where.find(": ") == std::string::npos ? "" : where.substr(where.find(": ") + 2);
  if (!in_time) {
    failed.failures.push_back(
        {"hung", kernel, label,
         "no result after " + std::to_string(kTimeLimitSeconds) + " s; the child was killed"});
    return failed;
  }
  if (WIFSIGNALED(status)) {
    failed.failures.push_back({"crashed", kernel, label,
                               std::string("the plugin killed the process with signal ") +
                                   std::to_string(WTERMSIG(status)) + " (" +
                                   strsignal(WTERMSIG(status)) + ")"});
    return failed;
  }
  auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded()) {
    failed.failures.push_back(
        {"crashed", kernel, label,
         "the child exited with status " + std::to_string(WEXITSTATUS(status)) + " and no report"});
    return failed;
  }
  return ConformanceReport::from_json(j);
}

}  // namespace sy
