// What a plan needs in every memory, and what each memory can give it.
//
// Per location ("host" or a device id such as "cuda:0"): the weights at their stored dtype
// (quantized blocks included), the KV memory (contiguous: the caches the graph declares; paged: the
// pool of blocks the budget sets, --kv-blocks), an activation arena per phase, the second homes the
// plan's copies give weights and caches, and the workspace each kernel declared in its check
// (ABI 1.4). Phases run one after the other, so they share one arena per location: its size is the
// largest phase's. Inside a phase, values whose lifetimes (first to last kernel call that touches
// them) do not overlap share bytes: greedy by size, as TFLite's arena planner does. The executor
// allocates exactly these buffers and puts every activation at the offset written here, so
// "predicted" and "measured" differ only by what a plugin allocates beyond its declaration.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/graph/graph.hpp"
#include "core/planner/inventory.hpp"

namespace sy {

struct Plan;
struct Policy;

inline constexpr int64_t kGiB = int64_t(1) << 30;

// The location plans give host memory, whichever CPU device holds it.
inline constexpr const char* kHostLocation = "host";

// --memory-reserve's default for a device with `free` bytes: 1 GiB (llama.cpp's --fit margin),
// or an eighth of it on a smaller device. Left for what no plan counts: a CUDA context, the
// allocator's fragmentation, the rest of the process on the host.
inline int64_t default_memory_reserve(int64_t free) {
  return std::min(kGiB, free / 8);
}

struct LocationMemory {
  std::string location;  // "host" or a device id
  int64_t weights = 0, kv_cache = 0, activations = 0, copies = 0, workspace = 0;
  int64_t total() const { return weights + kv_cache + activations + copies + workspace; }
  // Of `weights`: what the executor maps from the model's file instead of copying (host weights
  // the file stores exactly as the kernels read them; set by the runtime, which knows the file).
  int64_t weights_mapped = 0;
  // Of `weights`: the copies kernels read in a packed layout of their plugin (ABI 1.10).
  int64_t weights_packed = 0;
  // Paged: the bytes one KV block takes here, over every pool (layer) kept here.
  int64_t kv_bytes_per_block = 0;
  // What the plan may use there: free memory (live) or the profile's memory_bytes, minus the
  // reserve, capped by --max-device-memory. Unset when neither the device nor the user says.
  std::optional<int64_t> capacity;
  std::string capacity_rule;  // how `capacity` was found, for a person
  int64_t kv_bytes_per_position = 0;
  bool fits() const { return !capacity || total() <= *capacity; }
};

struct ArenaSlot {
  int64_t offset = 0, bytes = 0;
};

struct MemoryPlan {
  std::vector<LocationMemory> locations;  // "host" first, then devices by id
  // Every phase-scoped buffer, "phase|value@location", at its offset in its location's arena.
  std::map<std::string, ArenaSlot> slots;
  // The decode phase's copies: how many per token and their bytes.
  int64_t copies_per_token = 0, copy_bytes_per_token = 0;
  // Set when memory decided placement: which layers went where, and why.
  std::string split;
  // When it does not fit: the largest --context that would (0: not even an empty cache).
  std::optional<int64_t> max_context;
  // Paged: the KV blocks budgeted per pool (every pool has as many: a block id stands for the
  // same token rows in every layer), tokens per block, and how the count was found.
  int64_t kv_blocks = 0, kv_block_tokens = 0;
  std::string kv_blocks_rule;
  const LocationMemory* find(const std::string& location) const;
};

// The bytes a paged KV pool of `blocks` blocks takes where it lives (`pool`'s first axis is
// the blocks' upper bound): what a context allocates, rounded as buffer_bytes and, on the host,
// host_allocation_bytes do.
int64_t pool_allocation_bytes(const Value& pool, int64_t blocks, bool host);
// Whether `v` is a paged KV pool (a cache whose block count a context sets).
bool is_kv_pool(const Value& v);

// Bytes the executor allocates for a value of `value_bytes`: a 64-byte multiple plus 64 bytes
// of slack for vector loads past the end.
int64_t buffer_bytes(int64_t value_bytes);

// What a host allocation of `bytes` (buffer_bytes() applied) takes: from 2 MiB on, whole 2 MiB
// pages, 2 MiB aligned, so transparent huge pages can back weights and caches (executor.cpp).
inline constexpr int64_t kHostHugePage = int64_t(2) << 20;
int64_t host_allocation_bytes(int64_t bytes);

// The key of a buffer: scope ("" for weights and caches, else the phase), value, location, and
// for a weight packed for a kernel its layout tag ("plugin:id", layout_tag in planner.hpp).
std::string buffer_key(const std::string& scope, const std::string& value,
                       const std::string& location, const std::string& layout = "");
// The scope of `v`'s buffers: "" for weights, constants and KV caches (one per session), else
// `phase` (an activation of one step, in the arena).
std::string buffer_scope(const Value& v, const std::string& phase);
// The node a planned op runs: the phase's own, or the fused node of one of its fusions.
const Node* planned_node(const Phase& phase, const std::string& id);
// A location as a user names it ("cpu", "cpu:1", "host", "cuda:0") as plans name it: every
// CPU's memory is "host".
std::string memory_location(const std::string& name);

// The weights and constants some kernel call of `plan` reads at `location` as stored.
std::set<std::string> parameters_at(const Graph& graph, const Plan& plan,
                                    const std::string& location);

// The memory `plan` needs, with each location's capacity from `inventory` under `policy`.
MemoryPlan plan_memory(const Graph& graph, const Plan& plan, const Inventory& inventory,
                       const Policy& policy);

// The unit a binding split moves whole: "layer N", or "input" / "output" for the ops outside
// the layers before the first layer op and after it (embedding; final norm and head). A
// layer's mixture of experts (its moe_experts op and the stacked expert weights only it reads)
// is a unit of its own, "layer N experts", inside "layer N": a split moves it first.
std::string memory_unit(const Phase& phase, const Node& node);
// "layer N" for "layer N experts"; the unit itself for the others.
std::string enclosing_unit(const std::string& unit);

// "7.50 GiB", "512 MiB", "12 KiB", "100 B".
std::string format_bytes(int64_t bytes);

}  // namespace sy
