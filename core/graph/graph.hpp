// graph/ — the model as the planner sees it: phases (prefill, decode) of operators over named
// values, read from and written to the versioned Switchyard graph JSON (docs/graph-format.md).
//
// Offers: Graph/Phase/Node/Value, parse_graph() with errors that name the file, the JSON path
// and what was expected, to_json(), and validate() (unknown ops, dangling values, every op's
// operator contract — switchyard/op_contract.h, the same code the plugins' checks run —, cycles).
// Depends on capability/, json/, errors/ and the ABI's op_contract.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/capability/op.hpp"
#include "core/errors/error.hpp"
#include "core/json/json_text.hpp"

namespace sy {

inline constexpr const char* kGraphSchema = "switchyard.graph/1";

// constant: a weight whose elements the graph itself holds (`data`), e.g. Gemma's embedding
// scale or the frequency table of a scaled rope; loaded like a weight, never from a checkpoint.
enum class ValueKind { activation, weight, kv_cache, input, constant };
const char* value_kind_name(ValueKind k);

// What a value is to the code around the graph (executor, runtime, host API, CLI), which finds
// values by role, never by a name the importer chose. Stable lower-case names in the JSON.
enum class ValueRole {
  none,
  token_ids,       // input i64: the step's token ids
  positions,       // input i64: each token's position in its sequence
  cache_position,  // input i64 [1] (contiguous): the first cache row the step writes
  kv_len,          // input i64 [B] (contiguous decode): valid cache rows after the step
  slot_mapping,    // input i64 [T] (paged): each token's row in the KV pool, block·BS + offset
  query_start,     // input i32 [S+1] (paged): where each sequence's tokens start, then T
  seq_lens,        // input i32 [S] (paged): each sequence's length after the step
  block_table,     // input i32 [S, MB] (paged): each sequence's pool blocks, in order
  output_rows,     // input i64 [R] (paged): the tokens whose logits the step computes
  logits,          // output: the logits the step computes
  greedy_ids,      // output i64 [R] (paged): each logits row's first maximum, where the logits are
  token_embedding  // weight [V, H]: the token embedding table (its rows: the vocabulary)
};
const char* value_role_name(ValueRole r);

// A dimension whose extent each step sets, up to the value's shape there (ABI 1.5 dynamic dims).
enum class StepExtent {
  none,
  tokens,              // the step's tokens, T
  sequences,           // the step's sequences, S
  sequences_plus_one,  // S + 1 (query_start)
  outputs,             // the tokens whose logits the step computes, R
  pool_blocks          // blocks of the context's KV pool (set when a context is made)
};
const char* step_extent_name(StepExtent e);

struct DynamicDim {
  int axis = -1;  // -1: every dimension is fixed
  StepExtent extent = StepExtent::none;
};

struct Value {
  std::string name;
  sy_dtype dtype = SY_DTYPE_F32;
  std::vector<int64_t> shape;  // an upper bound at `dynamic.axis`
  ValueKind kind = ValueKind::activation;
  // `{}` on the members without a default: a brace initialiser may leave them out
  // (-Wmissing-field-initializers).
  std::vector<double> data{};  // constant: every element, row-major (stored in `dtype`)
  ValueRole role = ValueRole::none;
  DynamicDim dynamic{};
  int64_t bytes() const;
  // Weights and constants: loaded once, placed where their consumers need them.
  bool is_parameter() const { return kind == ValueKind::weight || kind == ValueKind::constant; }
  // The ABI's dynamic_dims mask of this value (sy_tensor_desc).
  uint32_t dynamic_dims() const { return dynamic.axis >= 0 ? 1u << dynamic.axis : 0u; }
};

struct Node {
  std::string id;
  sy_op_kind op = SY_OP_COPY;
  std::vector<std::string> inputs, outputs;  // value names, in the ABI's operand order
  std::vector<Attr> attrs;
  int layer = -1;  // decoder layer, -1 for none
};

// An alternative for a group of nodes: one fused node that replaces them all (e.g. the decode
// attention block). The planner uses it only when a fused kernel accepts it legally.
struct Fusion {
  std::string group;
  std::vector<std::string> replaces;  // node ids
  Node fused;
};

struct Phase {
  std::string name;  // "prefill", "decode", ...
  std::vector<Value> values;
  std::vector<Node> nodes;  // topological order after validate()
  std::vector<Fusion> fusions;

  // Look-ups by name, through an index rebuilt whenever the vectors changed size (planning
  // looks values up per operand, so a linear search would make large graphs quadratic).
  const Value* value(const std::string& name) const;
  const Node* node(const std::string& id) const;

 private:
  void reindex() const;
  mutable std::unordered_map<std::string, size_t> value_index_, node_index_;
  mutable const Value* indexed_values_ = nullptr;
  mutable const Node* indexed_nodes_ = nullptr;
  mutable size_t indexed_value_count_ = 0, indexed_node_count_ = 0;
};

// How KV caches are laid out, and so how many sequences a plan can serve.
//  paged:      one pool of fixed-size blocks per cache, read through block tables; any number
//              of sequences of any length up to the bounds, one "step" phase (ABI 1.5).
//  contiguous: one cache of `context` rows; one sequence, "prefill" and "decode" phases of
//              fixed shapes (what plugins before ABI 1.5 serve).
enum class KvLayout { contiguous, paged };
const char* kv_layout_name(KvLayout l);

// The bounds a graph was built for: a step of at most max_batch_tokens tokens of at most
// max_sequences sequences, each at most `context` tokens long, with logits for at most
// max_outputs tokens. Zero where a hand-written graph does not say.
struct StepBounds {
  KvLayout kv_layout = KvLayout::contiguous;
  int64_t max_batch_tokens = 0, max_sequences = 0, max_outputs = 0, context = 0;
  int64_t kv_block_size = 0, kv_blocks = 0;  // paged: rows per block, blocks per pool (a bound)
  // What was asked for where the layout capped max_batch_tokens (a contiguous step fills at
  // most the cache's `context` rows); 0 when nothing was capped. The plan's layout rule says it.
  int64_t max_batch_tokens_asked = 0;
};

struct Graph {
  std::string name;
  std::string source;  // file it came from, or "config.json (llama)" for imported graphs
  // What the model file leaves unsaid and the import decided by a stated convention (a GGUF
  // gpt-oss's clamp limits, a SmolLM3 GGUF's NoPE layers), one sentence each; the plan
  // repeats them.
  std::vector<std::string> conventions;
  std::vector<Phase> phases;
  StepBounds bounds;
  // The value of `role` in phase `phase` (nullptr when it has none).
  const Value* find(const Phase& phase, ValueRole role) const;
  // The first phase's value of `role` (weights are the same in every phase).
  const Value* find(ValueRole role) const;
};

// Reads a graph JSON file; throws Error.
Graph load_graph_file(const std::string& path);
// Parses graph JSON text (`file` names it in errors); throws Error.
Graph parse_graph(const std::string& text, const std::string& file);
nlohmann::json to_json(const Graph& g);

// Checks a phase: known values, one producer per value, matching shapes and dtypes where
// an op's contract fixes them, no cycles; sorts nodes topologically. Throws Error.
void validate(Phase& phase, const std::string& file);

// The OpDesc of a node, with every tensor in `memory` (the planner then adjusts residency).
OpDesc op_desc(const Phase& phase, const Node& node, sy_memory_kind memory = SY_MEMORY_HOST);

}  // namespace sy
