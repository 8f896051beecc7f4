#include "serve/serve_process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace sy::test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

ServeProcess::ServeProcess(const std::string& model, const std::vector<std::string>& args) {
  char tmpl[] = "/tmp/sy_serve_XXXXXX";
  dir_ = mkdtemp(tmpl);
  out_path_ = dir_ + "/stdout";
  err_path_ = dir_ + "/stderr";
  std::vector<std::string> argv{SY_TEST_SWITCHYARD, "serve", model, "--port", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = fork();
  if (pid_ == 0) {
    const int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < until) {
    std::smatch m;
    const std::string text = out();
    if (std::regex_search(text, m, listening)) {
      port_ = std::stoi(m[1]);
      // One request from this thread before any test thread sends: cpp-httplib's client builds
      // function-local statics (its response-line regex) on first use inside the Debian
      // library, which is not built with TSan, so a first use on a test thread reads to TSan as
      // a race with every later one. Made here, they happen before those threads exist.
      EXPECT_EQ(get(port_, "/health").status, 200) << log();
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "switchyard serve exited before listening:\n" << text << log();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "switchyard serve did not listen within 120 s:\n" << out() << log();
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

int ServeProcess::stop(int signal, std::chrono::seconds timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string ServeProcess::log() const {
  return slurp(err_path_);
}
std::string ServeProcess::log_with(const std::string& pattern, std::chrono::seconds timeout) const {
  const std::regex re(pattern);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string text = log();
  while (!std::regex_search(text, re) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    text = log();
  }
  return text;
}
std::string ServeProcess::out() const {
  return slurp(out_path_);
}

std::string Reply::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
  return "";
}

namespace {

httplib::Headers headers_of(const std::vector<std::pair<std::string, std::string>>& h) {
  httplib::Headers out;
  for (const auto& [k, v] : h) out.emplace(k, v);
  return out;
}

Reply reply_of(const httplib::Result& r) {
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  for (const auto& [k, v] : r->headers) out.headers.emplace_back(k, v);
  out.body = json::parse(r->body, nullptr, false);
  return out;
}

}  // namespace

Reply post(int port, const std::string& path, const std::string& raw,
           const std::vector<std::pair<std::string, std::string>>& headers) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  return reply_of(c.Post(path.c_str(), headers_of(headers), raw, "application/json"));
}

Reply get(int port, const std::string& path,
          const std::vector<std::pair<std::string, std::string>>& headers) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  return reply_of(c.Get(path.c_str(), headers_of(headers)));
}

StreamReply post_stream(int port, const std::string& path, const std::string& raw,
                        int close_after_events) {
  StreamReply out;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300, 0);
  std::string buffer;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = raw;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]")
        out.done = true;
      else
        out.events.push_back(json::parse(payload, nullptr, false));
      if (close_after_events > 0 && int(out.events.size()) >= close_after_events) return false;
    }
    return true;
  };
  auto r = c.send(req);
  if (r)
    out.status = r->status;
  else
    out.error = httplib::to_string(r.error());
  return out;
}

std::string StreamReply::text() const {
  std::string s;
  for (const auto& e : events) {
    if (!e.contains("choices") || e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    if (c.contains("delta") && c["delta"].contains("content"))
      s += c["delta"]["content"].get<std::string>();
    else if (c.contains("text"))
      s += c["text"].get<std::string>();
  }
  return s;
}

std::vector<int64_t> StreamReply::token_ids() const {
  std::vector<int64_t> ids;
  for (const auto& e : events)
    if (e.contains("choices") && !e["choices"].empty() && e["choices"][0].contains("token_ids"))
      for (const auto& id : e["choices"][0]["token_ids"]) ids.push_back(id.get<int64_t>());
  return ids;
}

std::string StreamReply::finish_reason() const {
  std::string f;
  for (const auto& e : events)
    if (e.contains("choices") && !e["choices"].empty() &&
        e["choices"][0]["finish_reason"].is_string())
      f = e["choices"][0]["finish_reason"].get<std::string>();
  return f;
}

const json* StreamReply::usage() const {
  for (const auto& e : events)
    if (e.contains("usage")) return &e["usage"];
  return nullptr;
}

double metric(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

}  // namespace sy::test
