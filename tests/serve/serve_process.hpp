// `switchyard serve` as a child process on a free loopback port, and an HTTP client for it
// (cpp-httplib's): what the serve integration tests drive.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sy::test {

class ServeProcess {
 public:
  // Starts `switchyard serve MODEL --port 0 ARGS...` and waits (up to 120 s) for its
  // "listening on" line. A start that fails is an assertion failure.
  ServeProcess(const std::string& model, const std::vector<std::string>& args = {});
  ~ServeProcess();  // SIGKILL if still running
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  bool started() const { return port_ > 0; }
  // Sends `signal` and waits up to `timeout` for the exit; the exit code, or -1 (no exit, or
  // killed by a signal).
  int stop(int signal, std::chrono::seconds timeout = std::chrono::seconds(120));
  std::string log() const;  // standard error so far (the access log among it)
  // The log once a line matching `pattern` (ECMAScript) is in it, or as it is after `timeout`:
  // the access-log line of a request is written after its reply is sent, so a client that has
  // its reply can be ahead of the line.
  std::string log_with(const std::string& pattern,
                       std::chrono::seconds timeout = std::chrono::seconds(30)) const;
  std::string out() const;  // standard output so far

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  std::string dir_, out_path_, err_path_;
};

struct Reply {
  int status = 0;  // 0: no HTTP reply at all
  nlohmann::json body;
  std::string raw;
  std::string header(const std::string& name) const;
  std::vector<std::pair<std::string, std::string>> headers;
};

// POST a JSON body (`raw`, sent as is) to 127.0.0.1:port.
Reply post(int port, const std::string& path, const std::string& raw,
           const std::vector<std::pair<std::string, std::string>>& headers = {});
Reply get(int port, const std::string& path,
          const std::vector<std::pair<std::string, std::string>>& headers = {});

// A Server-Sent Events reply: every `data:` event parsed, and whether `data: [DONE]` ended it.
struct StreamReply {
  int status = 0;
  std::string error;  // httplib's, when no reply came
  std::vector<nlohmann::json> events;
  bool done = false;
  std::string text() const;                // chat deltas' content or completion texts, joined
  std::vector<int64_t> token_ids() const;  // under return_token_ids, every chunk's joined
  std::string finish_reason() const;       // the last non-null finish_reason
  const nlohmann::json* usage() const;     // the usage chunk's, if any
};

// POST with stream: true. `close_after_events` > 0: the client hangs up after that many events.
StreamReply post_stream(int port, const std::string& path, const std::string& raw,
                        int close_after_events = 0);

// A sample of /metrics: `name` or `name{labels}` exactly as written, or -1 when absent.
double metric(const std::string& metrics_text, const std::string& series);

}  // namespace sy::test
