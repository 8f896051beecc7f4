// The one error type of the core: a catalog code, the status a plugin answered (when one did),
// the message, where it happened and, when the catalog's fix is not specific enough, a hint.
// Every layer reports failures as an Error, thrown or returned in an Expected<T>.
#pragma once

#include <exception>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace sy {

// The catalog's codes by number: Errc::sinks_flex_cpu is SY004. Stable: never renumbered or
// reused (a test pins every value). Series: 0xx no legal plan, 1xx plugin load, 2xx bad
// input, 3xx run time.
enum class Errc : int {
  no_kernel_for_op = 1,
  flash_attn_no_cpu = 2,
  flash_attn_dtype = 3,
  sinks_flex_cpu = 4,
  expected_cpu_storage = 5,
  expected_cpu = 6,
  kv_repeat = 7,
  device_unavailable = 8,
  transfer_forbidden = 9,
  kernel_unverified = 10,
  does_not_fit = 11,

  plugin_open = 101,
  plugin_entry = 102,
  plugin_abi = 103,
  plugin_init = 104,
  plugin_manifest = 105,
  plugin_capability = 106,
  plugin_probe = 107,

  json_syntax = 201,
  schema_version = 202,
  unknown_op = 203,
  shape_mismatch = 204,
  dtype_mismatch = 205,
  graph_cycle = 206,
  bad_config = 207,
  unknown_model_type = 208,
  bad_graph = 209,
  bad_target = 210,
  chat_template = 211,
  weight_type_unsupported = 212,

  kernel_failed = 301,
  bad_weights = 302,
  bad_tokenizer = 303,
  prompt_too_long = 304,
  device_out_of_memory = 305,
  device_lost = 306,
  plugin_internal = 307,
  kv_pool_full = 308,

  invalid_handle = 401,
  invalid_argument = 402,
  bad_batch = 403,

  bad_request = 501,
  model_not_found = 502,
  unauthorized = 503,
  queue_full = 504,
  unavailable = 505,
};

// "SY004" for Errc::sinks_flex_cpu.
std::string code_text(Errc code);
// The prefix every code text starts with.
inline constexpr const char* kCodePrefix = "SY";
// Writes code_text(code) (for logs and test messages).
std::ostream& operator<<(std::ostream& os, Errc code);

struct Error : std::exception {
  Error(Errc code, std::string message, std::string where = "", std::string hint = "");

  Errc code;
  std::optional<int> status;  // the sy_status a plugin returned, when a plugin answered
  std::string message;        // what went wrong, with Switchyard's detail
  std::string where;          // "file:json.path", a plugin path, "op l0.attn"; may be empty
  std::string hint;           // what to do, when more specific than the catalog's fix

  // Sets the plugin's status and returns *this, for `return Error(...).with_status(s)`.
  Error& with_status(int plugin_status);
  // "where: message" (just the message without a place).
  const char* what() const noexcept override { return what_.c_str(); }
  // The `switchyard` exit code of this error's catalog entry.
  int exit_code() const;

 private:
  std::string what_;
};

// The catalog code of a run-time failure that a plugin answered with `status`: its own code
// for OUT_OF_MEMORY, UNAVAILABLE and INTERNAL (or a value outside the ABI's set); SY301 for
// INVALID_ARGUMENT and UNSUPPORTED, which mean the plan sent the kernel something its check
// had accepted and it cannot run (a planner or plugin bug).
Errc errc_for_plugin_status(int status);

// A value or the Error that prevented it.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Error error) : v_(std::move(error)) {}

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() {
    if (!has_value()) throw std::get<1>(v_);
    return std::get<0>(v_);
  }
  const T& value() const {
    if (!has_value()) throw std::get<1>(v_);
    return std::get<0>(v_);
  }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace sy
