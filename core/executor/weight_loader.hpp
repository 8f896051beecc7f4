// Where a model's weights come from: read into memory the executor owns, or, for host weights
// the file stores exactly as the graph declares them (dtype, layout, rows in order), the file's
// own bytes, mapped (as llama.cpp does): start-up copies nothing, and processes on one machine
// share the page cache.
#pragma once

#include <functional>
#include <optional>

#include "core/errors/error.hpp"
#include "core/graph/graph.hpp"

namespace sy {

struct WeightLoader {
  // Fills `dst` (host memory, value.bytes() bytes, value.dtype) with weight `value`, or returns
  // the Error (SY302) that prevented it.
  using LoadFn = std::function<std::optional<Error>(const Value& value, void* dst)>;
  // The file's bytes of `value`, exactly as the graph declares them, or nullptr when the file
  // stores it otherwise (another dtype, rows to reorder, a tensor missing). Valid while the
  // source that made the loader lives. May be empty (nothing is mapped).
  using MapFn = std::function<const void*(const Value& value)>;

  WeightLoader() = default;
  template <typename F>
    requires std::is_invocable_r_v<std::optional<Error>, F, const Value&, void*>
  WeightLoader(F f) : load(std::move(f)) {}  // NOLINT: a plain loader converts
  WeightLoader(LoadFn l, MapFn m) : load(std::move(l)), map(std::move(m)) {}

  std::optional<Error> operator()(const Value& value, void* dst) const { return load(value, dst); }

  LoadFn load;
  MapFn map;
};

}  // namespace sy
