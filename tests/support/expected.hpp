// Assertion helpers for calls that return an Expected<T> or an optional Error: the message to
// print (and match) when there is an error, "STATUS: text" for a plugin's answer; empty when
// there is none.
#pragma once

#include <optional>
#include <string>

#include "core/errors/error.hpp"

namespace sy::test {

template <typename T>
std::string why(const Expected<T>& r) {
  return r ? std::string() : r.error().message;
}

inline std::string why(const std::optional<Error>& e) {
  return e ? e->message : std::string();
}

}  // namespace sy::test
