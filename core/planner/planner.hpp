// planner/ — a model graph in, a legal plan or a documented error out.
//
// Offers: the device inventory (live discovery, or a --target profile of a machine you do not
// have; inventory.hpp), the policy (device preference, attention family pin, strict/auto
// fallback, KV-cache device, transfers), plan_graph() which decides for every op the plugin,
// kernel and device, the copies between memories and where each KV cache lives, recording
// every rejected candidate with all its reasons, the adaptations it made (adaptation.hpp), and
// the plan's JSON form and hash. Depends on graph/, registry/, capability/, errors/.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/errors/error.hpp"
#include "core/graph/graph.hpp"
#include "core/planner/adaptation.hpp"
#include "core/planner/inventory.hpp"
#include "core/planner/memory.hpp"
#include "core/registry/registry.hpp"

namespace sy {

// Which arithmetic a kernel may use (docs/numerics.md). exact: products on the weights as
// stored or dequantized (the parity tests' numbers). automatic ("auto"): also kernels that
// quantize their activations to 16-bit blocks (SY_FEATURE_ACTIVATION_Q16), whose cost on real
// files is below 5e-5 nats. fast: also 8-bit ones (SY_FEATURE_ACTIVATION_Q8, llama.cpp's
// numerics). A kernel a policy allows is preferred by its cost where it serves the op.
enum class Numerics { exact, automatic, fast };
const char* numerics_name(Numerics n);
std::optional<Numerics> parse_numerics(const std::string& text);
inline constexpr const char* kNumericsChoices = "exact, auto or fast";
// Whether `policy` lets a kernel compute with `declared` (envelope.hpp's numerics features).
bool numerics_allowed(Numerics policy, const DeclaredNumerics& declared);
// What a plan uses when nobody says: 16-bit activation blocks where a kernel offers them
// (cpu_onednn's serves block-quantized weights; faster in decode on every tier, |Δ mean NLL| <
// 5e-5 nats and top-1 agreement >= 99.94 % on SmolLM2's files); docs/numerics.md has figures.
inline constexpr Numerics kDefaultNumerics = Numerics::automatic;

struct Policy {
  std::vector<DLDeviceType> prefer;  // device types, most preferred first
  bool prefer_given = false;         // the user said --prefer (strict then holds it)
  std::string attention = "any";     // family pin: flash, sdpa, flex, fused_decode, any
  bool strict = false;               // a refusal of the pinned/preferred choice is the error
  std::optional<DLDeviceType> kv_cache_device;
  bool transfers = true;
  // Only kernels a conformance report beside their plugin verifies (plugin/verification.hpp);
  // a kernel that failed conformance is refused whatever this says.
  bool require_verified = false;
  Numerics numerics = kDefaultNumerics;  // --numerics
  // Memory (memory.hpp): bytes left free on every device (--memory-reserve), caps per location
  // ("host", "cuda:0"; --max-device-memory), and whether a plan that does not fit is an error.
  std::optional<int64_t> memory_reserve;  // unset: default_memory_reserve() of each device
  std::map<std::string, int64_t> max_device_memory;
  bool check_memory = true;
  // Paged: the KV blocks per pool (--kv-blocks); unset: as many as the bounds need or fit.
  std::optional<int64_t> kv_blocks;
  // Set by the planner's binding split, never by a user: per device id, the units
  // (memory_unit()) kept off it because they do not fit there.
  std::map<std::string, std::set<std::string>> memory_excluded;
};

struct CandidateReport {
  std::string plugin, kernel, family, device;
  DLDeviceType device_type = kDLCPU;
  bool accepted = false;
  std::vector<Refusal> reasons;
};

// A weight input the kernel reads in a packed layout of its plugin (ABI 1.10, the weight-layouts
// extension): packed once per model as it loads.
struct WeightLayoutChoice {
  uint32_t id = 0;  // 0: as stored
  std::string name;
  int64_t bytes = 0;
};

struct PlannedOp {
  std::string id;
  sy_op_kind op = SY_OP_COPY;
  int layer = -1;
  std::string plugin, kernel, family, device;  // device: inventory id, e.g. "cuda:0"
  std::string rule;         // why this candidate: the human explanation, never parsed
  std::string fused_group;  // set when this op is a fusion of a group
  // What the planner changed so the kernel can serve the op; the executor performs each.
  std::vector<Adaptation> adaptations;
  std::vector<CandidateReport> rejected;
  // Memory location of each operand ("host" or a device id), inputs then outputs: where the
  // executor finds and puts them (after the plan's copies).
  std::vector<std::string> input_locations, output_locations;
  // Index-aligned with the inputs (empty: every input as stored): the layout each is read in.
  std::vector<WeightLayoutChoice> input_layouts;
  // Memory the kernel holds from prepare to release (its check's ABI 1.4 workspace_bytes).
  int64_t workspace_bytes = 0;
  // The kernel's arithmetic: "exact", or the numerics feature it declares ("activation_q16",
  // "activation_q8": its activations quantized to blocks; q16 under --numerics auto and fast,
  // q8 under fast only).
  std::string numerics = "exact";
};

// "plugin:id" for input `i` of `op` read in a packed layout, "" as stored; every input's.
std::string layout_tag(const PlannedOp& op, size_t i);
std::vector<std::string> layout_tags(const PlannedOp& op);

struct Copy {
  std::string value, from, to, before_op;
  int64_t bytes = 0;
};

struct Fallback {
  std::string op, wanted, chosen, reason;
};

// A run of consecutive ops of one phase that one plugin serves on one device (DESIGN.md §12),
// with the uploads from host memory before them: handed to the plugin as one segment when it
// takes segments (plugin_api.h), else driven op by op. The executor runs exactly these.
struct PlannedSegment {
  std::string plugin, device;
  size_t first = 0, count = 0;  // the phase's ops [first, first + count)
  bool segment = false;         // true: one segment; false: op by op
  std::string reason;           // why this form
};

struct PhasePlan {
  std::string name;
  std::vector<PlannedOp> ops;
  std::vector<PlannedSegment> segments;  // covering ops, in order
  std::vector<Copy> copies;
  std::vector<std::pair<std::string, std::string>> kv_caches;  // value, device
  std::vector<Fallback> fallbacks;
  std::vector<std::string> fusions_used, fusions_refused;
};

// The op no candidate could legally serve, with every candidate and all its reasons.
struct PlanFailure {
  std::string phase, op;
  std::vector<CandidateReport> candidates;
};

struct Plan {
  std::string model, target;
  Policy policy;
  // The graph's KV layout and bounds, and why this layout (plan_layouts: the paged one, or the
  // contiguous one because a kernel lacks the paged or varlen form).
  StepBounds bounds;
  std::string layout_rule;
  std::vector<PhasePlan> phases;
  std::optional<Error> error;  // the documented SY0xx error when no legal plan exists
  PlanFailure failure;         // the op it is about (when error is set)
  std::string hash;
  // Each loaded plugin's declaration source: "live" (opened) or "manifest" (manifest-only
  // planning, the library never opened).
  std::map<std::string, std::string> plugin_sources;
  // Each plugin library that failed to load: its path, stage and reason (`switchyard plugins`
  // has the hint), so a plan that misses a plugin says why.
  struct PluginFailure {
    std::string path, stage, reason;
  };
  std::vector<PluginFailure> plugin_failures;
  std::vector<std::string> conventions;  // the graph's (graph.hpp)
  MemoryPlan memory;                     // per location: need, capacity, the activation layout
  bool ok() const { return !error; }
};

// Plans every phase of `graph` for `inventory` under `policy`. Never throws for a model that
// cannot be served: the Plan then carries the documented error and the failing op.
Plan plan_graph(const Graph& graph, const Registry& registry, const Inventory& inventory,
                const Policy& policy);

// The model's graph in a KV layout (the importer, for a model the caller opened). Throws Error.
using GraphForLayout = std::function<Graph(KvLayout)>;
struct LayoutPlan {
  Graph graph;
  Plan plan;
};
// Plans the paged layout (any mix of sequences per step). For one sequence, it plans the
// contiguous layout instead when the paged plan fails, since a kernel of a plugin before ABI 1.5
// lacks the paged or varlen form, or when --attention fused_decode asks for the fused decode
// block, which serves one sequence of a contiguous cache; the contiguous plan's error is the
// answer when both fail. plan.layout_rule says which layout and why.
LayoutPlan plan_layouts(const GraphForLayout& import, int64_t max_sequences,
                        const Registry& registry, const Inventory& inventory, const Policy& policy);

// Cuts a placed phase into its segments (segments.cpp); registry answers which plugins take
// segments.
void plan_segments(PhasePlan& phase, const Registry& registry);

nlohmann::json to_json(const Plan& plan);
// Human-readable plan: per phase a table (layers folded), then a summary.
std::string render_plan(const Plan& plan);
// Every candidate for op `id` (in any phase) with all its reasons.
std::string render_explain(const Plan& plan, const std::string& id);

}  // namespace sy
