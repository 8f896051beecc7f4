// Lookups in an imported graph's phase, for tests: a node or value by name (throwing, so a test
// fails naming what the graph lacks rather than reading a null) and an attribute's value.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <variant>

#include "core/graph/graph.hpp"

namespace sy::test {

inline const Node& node(const Phase& p, const std::string& id) {
  const Node* n = p.node(id);
  if (!n) throw std::runtime_error("no op " + id);
  return *n;
}

inline const Value& value(const Phase& p, const std::string& name) {
  const Value* v = p.value(name);
  if (!v) throw std::runtime_error("no value " + name);
  return *v;
}

// The attribute `name` of `n` when it is there and holds a T.
template <typename T>
std::optional<T> attr(const Node& n, const std::string& name) {
  for (const auto& a : n.attrs)
    if (a.name == name && std::holds_alternative<T>(a.value)) return std::get<T>(a.value);
  return std::nullopt;
}

template <typename T>
T attr(const Node& n, const std::string& name, T fallback) {
  return attr<T>(n, name).value_or(fallback);
}

}  // namespace sy::test
