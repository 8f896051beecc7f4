// executor/ — runs a plan. Offers Model (model.hpp: the weights, loaded once), Context
// (context.hpp: kernels, an activation arena and a KV memory of sequences, stepped with
// Batches) and KvBlocks (kv_blocks.hpp: the paged KV memory's bookkeeping).
//
// A Model holds what every context of one planned model shares: the plan, and each weight and
// constant at every memory location the plan puts it, loaded once. Host weights the model's file
// stores exactly as the graph declares them are mapped from the file, not copied (the memory
// table says which: LocationMemory::weights_mapped). A Model is immutable once made: any number
// of contexts on any number of threads read it at once.
//
// Failures are Errors: SY302 for weights, SY305 out of memory, SY306/SY307 from a plugin.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/executor/buffers.hpp"
#include "core/executor/weight_loader.hpp"
#include "core/graph/graph.hpp"
#include "core/planner/planner.hpp"

namespace sy {

class Model {
 public:
  // Loads every weight and constant of a legal plan (one with an error throws it) where the plan
  // puts it. `graph`, `plan`, `registry`, `inventory` and whatever `load` maps must outlive
  // the Model. Throws Error.
  Model(const Graph& graph, const Plan& plan, const Registry& registry, const Inventory& inventory,
        const WeightLoader& load);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Graph& graph() const { return graph_; }
  const Plan& plan() const { return plan_; }
  const Memory& memory() const { return memory_; }
  // The buffer of weight or constant `name` at `location`, as stored or (`layout`, a
  // layout_tag) packed for a kernel; throws (a plan bug) when the plan put none there.
  const Buffer& parameter(const std::string& name, const std::string& location,
                          const std::string& layout = "") const;
  // Rows of the token embedding: ids at or above it are not tokens of this model.
  int64_t vocab() const { return vocab_; }

  // Bytes the weights take per location: allocated (copied) and mapped from the file.
  std::map<std::string, int64_t> allocated_bytes() const;
  std::map<std::string, int64_t> mapped_bytes() const;
  // How much each device's free memory (ABI memory_info) dropped, and the process's resident
  // anonymous memory (RssAnon) grew, while the weights loaded: measured, not computed.
  const std::map<std::string, int64_t>& device_free_drop() const { return free_drop_; }
  int64_t host_resident_growth() const { return resident_growth_; }

  // The memory contexts may still take per location: the plan's capacity less the weights and
  // what live contexts hold (no entry: unknown capacity). Context creation takes from it with
  // reserve(), which refuses (SY011, with the numbers) what does not fit; release() gives back.
  std::map<std::string, int64_t> memory_left() const;
  void reserve(const std::map<std::string, int64_t>& bytes, const std::string& what) const;
  void release(const std::map<std::string, int64_t>& bytes) const;

 private:
  void load_parameters(const WeightLoader& load);
  // Weight `v`, packed by `plugin` in `layout` for a kernel on `device` (memory at `location`).
  Buffer pack(const WeightLoader& load, const Value& v, const std::string& location,
              const std::string& plugin, const std::string& device,
              const WeightLayoutChoice& layout);

  const Registry& registry_;

  const Graph& graph_;
  const Plan& plan_;
  Memory memory_;
  std::map<std::string, Buffer> parameters_;  // name@location, or name@location#layout
  int64_t vocab_ = 0;
  std::map<std::string, int64_t> free_drop_;
  int64_t resident_growth_ = 0;
  mutable std::mutex mutex_;
  mutable std::map<std::string, int64_t> left_;  // capacity left for contexts, per location
};

// The process's resident anonymous memory (RssAnon of /proc/self/status), in bytes: what it
// holds in RAM that no file backs, allocated and touched, by anyone in the process.
int64_t resident_anonymous_bytes();
// Free memory of every non-host device whose plugin reports it (ABI 1.1 memory_info).
std::map<std::string, int64_t> device_free_memory(const Memory& memory);

}  // namespace sy
