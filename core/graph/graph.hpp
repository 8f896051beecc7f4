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

struct Value {
  std::string name;
  sy_dtype dtype = SY_DTYPE_F32;
  std::vector<int64_t> shape;
  ValueKind kind = ValueKind::activation;
  std::vector<double> data;  // constant: every element, row-major (stored in `dtype`)
  int64_t bytes() const;
  // Weights and constants: loaded once, placed where their consumers need them.
  bool is_parameter() const { return kind == ValueKind::weight || kind == ValueKind::constant; }
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

struct Graph {
  std::string name;
  std::string source;  // file it came from, or "config.json (llama)" for imported graphs
  std::vector<Phase> phases;
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
