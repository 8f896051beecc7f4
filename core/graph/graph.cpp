#include "core/graph/graph.hpp"

#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "core/capability/vocabulary.hpp"
#include "switchyard/op_contract.h"

namespace sy {
namespace {

using nlohmann::json;

constexpr std::pair<ValueRole, const char*> kRoles[] = {
    {ValueRole::none, "none"},
    {ValueRole::token_ids, "token_ids"},
    {ValueRole::positions, "positions"},
    {ValueRole::cache_position, "cache_position"},
    {ValueRole::kv_len, "kv_len"},
    {ValueRole::slot_mapping, "slot_mapping"},
    {ValueRole::query_start, "query_start"},
    {ValueRole::seq_lens, "seq_lens"},
    {ValueRole::block_table, "block_table"},
    {ValueRole::output_rows, "output_rows"},
    {ValueRole::logits, "logits"},
    {ValueRole::greedy_ids, "greedy_ids"},
    {ValueRole::token_embedding, "token_embedding"},
};
constexpr std::pair<StepExtent, const char*> kExtents[] = {
    {StepExtent::none, "none"},           {StepExtent::tokens, "tokens"},
    {StepExtent::sequences, "sequences"}, {StepExtent::sequences_plus_one, "sequences_plus_one"},
    {StepExtent::outputs, "outputs"},     {StepExtent::pool_blocks, "pool_blocks"},
};

template <typename E, size_t N>
const char* name_in(const std::pair<E, const char*> (&table)[N], E e) {
  for (const auto& [value, name] : table)
    if (value == e) return name;
  return "?";
}

template <typename E, size_t N>
std::optional<E> parse_in(const std::pair<E, const char*> (&table)[N], const std::string& s) {
  for (const auto& [value, name] : table)
    if (s == name) return value;
  return std::nullopt;
}

template <typename E, size_t N>
std::string names_in(const std::pair<E, const char*> (&table)[N]) {
  std::string out;
  for (const auto& [value, name] : table) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

constexpr int64_t kMaxDim = int64_t(1) << 40;
constexpr int64_t kMaxElements = int64_t(1) << 50;

// Walks JSON with a path for error messages.
class Reader {
 public:
  Reader(const json& j, std::string file, std::string path)
      : j_(j), file_(std::move(file)), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what, Errc code = Errc::bad_graph) const {
    throw Error(code, what, file_ + ":" + (path_.empty() ? "$" : path_));
  }
  Reader at(const char* key) const {
    if (!j_.is_object()) fail("expected an object");
    if (!j_.contains(key)) fail(std::string("missing field '") + key + "'");
    return Reader(j_.at(key), file_, path_.empty() ? key : path_ + "." + key);
  }
  bool has(const char* key) const { return j_.is_object() && j_.contains(key); }
  Reader at(size_t i) const {
    return Reader(j_.at(i), file_, path_ + "[" + std::to_string(i) + "]");
  }
  size_t array_size() const {
    if (!j_.is_array()) fail("expected an array");
    return j_.size();
  }
  std::string str() const {
    if (!j_.is_string()) fail("expected a string");
    return j_.get<std::string>();
  }
  int64_t integer() const {
    if (!j_.is_number_integer()) fail("expected an integer");
    return j_.get<int64_t>();
  }
  double number() const {
    if (!j_.is_number() || !std::isfinite(j_.get<double>())) fail("expected a finite number");
    return j_.get<double>();
  }
  const json& raw() const { return j_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string file_, path_;
};

std::vector<std::string> names(const Reader& r) {
  std::vector<std::string> out;
  for (size_t i = 0; i < r.array_size(); ++i) out.push_back(r.at(i).str());
  return out;
}

Value parse_value(const Reader& r) {
  Value v;
  v.name = r.at("name").str();
  auto dt = parse_dtype(r.at("dtype").str());
  if (!dt) r.at("dtype").fail("unknown dtype '" + r.at("dtype").str() + "'");
  v.dtype = *dt;
  Reader shape = r.at("shape");
  int64_t elements = 1;
  for (size_t i = 0; i < shape.array_size(); ++i) {
    int64_t d = shape.at(i).integer();
    if (d <= 0 || d > kMaxDim)
      shape.at(i).fail("dimension must be in [1, 2^40], got " + std::to_string(d));
    if (elements > kMaxElements / d) shape.fail("more than 2^50 elements");
    elements *= d;
    v.shape.push_back(d);
  }
  if (sy_dtype_is_blocked(v.dtype) &&
      (v.shape.empty() || v.shape.back() % int64_t(sy_dtype_block_elements(v.dtype)) != 0))
    shape.fail(std::string("a ") + sy_dtype_name(v.dtype) +
               " value's last dimension must be a multiple of its " +
               std::to_string(sy_dtype_block_elements(v.dtype)) + "-element blocks");
  std::string kind = r.has("kind") ? r.at("kind").str() : "activation";
  if (kind == "activation")
    v.kind = ValueKind::activation;
  else if (kind == "weight")
    v.kind = ValueKind::weight;
  else if (kind == "kv_cache")
    v.kind = ValueKind::kv_cache;
  else if (kind == "input")
    v.kind = ValueKind::input;
  else if (kind == "constant")
    v.kind = ValueKind::constant;
  else
    r.at("kind").fail("unknown kind '" + kind +
                      "' (activation, weight, kv_cache, input, constant)");
  if (v.kind == ValueKind::constant) {
    Reader data = r.at("data");
    if (int64_t(data.array_size()) != elements)
      data.fail("a constant holds " + std::to_string(elements) + " elements, got " +
                std::to_string(data.array_size()));
    for (size_t i = 0; i < data.array_size(); ++i) v.data.push_back(data.at(i).number());
  } else if (r.has("data")) {
    r.at("data").fail("only a constant value holds data");
  }
  if (r.has("role")) {
    auto role = parse_in(kRoles, r.at("role").str());
    if (!role)
      r.at("role").fail("unknown role '" + r.at("role").str() + "' (" + names_in(kRoles) + ")");
    v.role = *role;
  }
  if (r.has("dynamic")) {
    Reader d = r.at("dynamic");
    int64_t axis = d.at("axis").integer();
    if (axis < 0 || axis >= int64_t(v.shape.size()))
      d.at("axis").fail("axis " + std::to_string(axis) + " is not a dimension of the value");
    auto extent = parse_in(kExtents, d.at("extent").str());
    if (!extent || *extent == StepExtent::none)
      d.at("extent").fail("unknown extent '" + d.at("extent").str() + "' (" + names_in(kExtents) +
                          ")");
    v.dynamic = {int(axis), *extent};
  }
  return v;
}

StepBounds parse_bounds(const Reader& r) {
  StepBounds b;
  std::string layout = r.at("kv_layout").str();
  if (layout != "paged" && layout != "contiguous")
    r.at("kv_layout").fail("unknown kv_layout '" + layout + "' (paged, contiguous)");
  b.kv_layout = layout == "paged" ? KvLayout::paged : KvLayout::contiguous;
  auto count = [&](const char* key, int64_t& out) {
    if (!r.has(key)) return;
    out = r.at(key).integer();
    if (out < 0) r.at(key).fail("must be >= 0");
  };
  count("max_batch_tokens", b.max_batch_tokens);
  count("max_sequences", b.max_sequences);
  count("max_outputs", b.max_outputs);
  count("context", b.context);
  count("kv_block_size", b.kv_block_size);
  count("kv_blocks", b.kv_blocks);
  return b;
}

Node parse_node(const Reader& r) {
  Node n;
  n.id = r.at("id").str();
  std::string op = r.at("op").str();
  auto kind = parse_op_kind(op);
  if (!kind) {
    std::string known;
    for (int i = 0; i < SY_OP_COUNT; ++i)
      known += std::string(i ? ", " : "") + sy_op_kind_name(static_cast<sy_op_kind>(i));
    r.at("op").fail("unknown op '" + op + "' (known: " + known + ")", Errc::unknown_op);
  }
  n.op = *kind;
  n.inputs = names(r.at("inputs"));
  n.outputs = names(r.at("outputs"));
  if (r.has("layer")) n.layer = int(r.at("layer").integer());
  if (r.has("attrs")) {
    Reader attrs = r.at("attrs");
    if (!attrs.raw().is_object()) attrs.fail("expected an object");
    for (const auto& [key, v] : attrs.raw().items()) {
      if (v.is_boolean())
        n.attrs.push_back({key, int64_t(v.get<bool>())});
      else if (v.is_number_integer())
        n.attrs.push_back({key, v.get<int64_t>()});
      else if (v.is_number())
        n.attrs.push_back({key, v.get<double>()});
      else if (v.is_string())
        n.attrs.push_back({key, v.get<std::string>()});
      else
        attrs.at(key.c_str()).fail("expected a number, boolean or string");
    }
  }
  return n;
}

Phase parse_phase(const Reader& r) {
  Phase p;
  p.name = r.at("name").str();
  Reader values = r.at("values");
  for (size_t i = 0; i < values.array_size(); ++i) p.values.push_back(parse_value(values.at(i)));
  Reader ops = r.at("ops");
  for (size_t i = 0; i < ops.array_size(); ++i) p.nodes.push_back(parse_node(ops.at(i)));
  if (r.has("fusions")) {
    Reader fusions = r.at("fusions");
    for (size_t i = 0; i < fusions.array_size(); ++i) {
      Reader f = fusions.at(i);
      p.fusions.push_back(
          {f.at("group").str(), names(f.at("replaces")), parse_node(f.at("fused"))});
    }
  }
  return p;
}

}  // namespace

const char* value_role_name(ValueRole r) {
  return name_in(kRoles, r);
}
const char* step_extent_name(StepExtent e) {
  return name_in(kExtents, e);
}
const char* kv_layout_name(KvLayout l) {
  return l == KvLayout::paged ? "paged" : "contiguous";
}

const Value* Graph::find(const Phase& phase, ValueRole role) const {
  for (const auto& v : phase.values)
    if (v.role == role) return &v;
  return nullptr;
}

const Value* Graph::find(ValueRole role) const {
  return phases.empty() ? nullptr : find(phases.front(), role);
}

const char* value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::activation: return "activation";
    case ValueKind::weight: return "weight";
    case ValueKind::kv_cache: return "kv_cache";
    case ValueKind::input: return "input";
    case ValueKind::constant: return "constant";
  }
  return "?";
}

// Block-quantized values are whole blocks per row (parse_value, the importer): never -1 here.
int64_t Value::bytes() const {
  return sy_tensor_bytes(dtype, int32_t(shape.size()), shape.data());
}

void Phase::reindex() const {
  bool values_moved = indexed_values_ != values.data() || indexed_value_count_ != values.size();
  bool nodes_moved = indexed_nodes_ != nodes.data() || indexed_node_count_ != nodes.size();
  if (values_moved) {
    value_index_.clear();
    for (size_t i = 0; i < values.size(); ++i) value_index_.emplace(values[i].name, i);
    indexed_values_ = values.data();
    indexed_value_count_ = values.size();
  }
  if (nodes_moved) {
    node_index_.clear();
    for (size_t i = 0; i < nodes.size(); ++i) node_index_.emplace(nodes[i].id, i);
    indexed_nodes_ = nodes.data();
    indexed_node_count_ = nodes.size();
  }
}

const Value* Phase::value(const std::string& n) const {
  for (int attempt = 0; attempt < 2; ++attempt) {
    reindex();
    auto it = value_index_.find(n);
    if (it == value_index_.end()) return nullptr;
    if (it->second < values.size() && values[it->second].name == n) return &values[it->second];
    indexed_values_ = nullptr;  // edited in place since indexed: rebuild once
  }
  return nullptr;
}

const Node* Phase::node(const std::string& id) const {
  for (int attempt = 0; attempt < 2; ++attempt) {
    reindex();
    auto it = node_index_.find(id);
    if (it == node_index_.end()) return nullptr;
    if (it->second < nodes.size() && nodes[it->second].id == id) return &nodes[it->second];
    indexed_nodes_ = nullptr;
  }
  return nullptr;
}

Graph parse_graph(const std::string& text, const std::string& file) {
  json j = parse_json_text(text, file);
  Reader root(j, file, "");
  std::string schema = root.at("schema").str();
  if (schema != kGraphSchema)
    root.at("schema").fail(
        "unsupported schema '" + schema + "', this switchyard reads '" + kGraphSchema + "'",
        Errc::schema_version);
  Graph g;
  g.name = root.has("name") ? root.at("name").str() : file;
  g.source = file;
  Reader phases = root.at("phases");
  if (phases.array_size() == 0) phases.fail("a graph needs at least one phase");
  for (size_t i = 0; i < phases.array_size(); ++i) {
    g.phases.push_back(parse_phase(phases.at(i)));
    validate(g.phases.back(), file + ":phases[" + std::to_string(i) + "]");
  }
  if (root.has("bounds")) g.bounds = parse_bounds(root.at("bounds"));
  return g;
}

Graph load_graph_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Errc::bad_graph, "cannot read the file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_graph(ss.str(), path);
}

OpDesc op_desc(const Phase& phase, const Node& node, sy_memory_kind memory) {
  OpDesc op;
  op.op = node.op;
  for (const auto& n : node.inputs) {
    const Value* v = phase.value(n);
    op.inputs.push_back({v->dtype, v->shape, memory, v->dynamic_dims()});
  }
  for (const auto& n : node.outputs) {
    const Value* v = phase.value(n);
    op.outputs.push_back({v->dtype, v->shape, memory, v->dynamic_dims()});
  }
  op.attrs = node.attrs;
  return op;
}

// The operator contract (switchyard/op_contract.h, the same code every built-in plugin's check
// runs) of one node over the values it connects: SY205 when only dtypes disagree, else SY204,
// with every violation named.
void check_node_contract(const Phase& p, const Node& n, const std::string& where) {
  OpDesc op = op_desc(p, n);
  AbiOpView view(op);
  struct Found {
    std::string text;
    bool only_dtypes = true;
  } found;
  auto collect = [](void* ctx, const sy_refusal* r) {
    auto* f = static_cast<Found*>(ctx);
    f->text += (f->text.empty() ? "" : "; ") + std::string(r->text ? r->text : r->constraint);
    f->only_dtypes = f->only_dtypes && sy_contract_is_dtype_constraint(r->constraint);
  };
  if (sy_op_contract_check(view.get(), collect, &found) == 0) return;
  const bool dtype = found.only_dtypes;
  throw Error(dtype ? Errc::dtype_mismatch : Errc::shape_mismatch,
              std::string(dtype ? "dtype mismatch: " : "shape mismatch: ") + sy_op_kind_name(n.op) +
                  ": " + found.text,
              where + ".ops['" + n.id + "']");
}

void validate(Phase& p, const std::string& where) {
  std::map<std::string, size_t> producer;
  std::set<std::string> value_names, ids;
  for (size_t i = 0; i < p.values.size(); ++i)
    if (!value_names.insert(p.values[i].name).second)
      throw Error(Errc::bad_graph, "duplicate value '" + p.values[i].name + "'",
                  where + ".values[" + std::to_string(i) + "]");
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& n = p.nodes[i];
    std::string at = where + ".ops[" + std::to_string(i) + "]";
    if (!ids.insert(n.id).second)
      throw Error(Errc::bad_graph, "duplicate op id '" + n.id + "'", at);
    for (const auto& v : n.inputs)
      if (!p.value(v)) throw Error(Errc::bad_graph, "unknown value '" + v + "'", at + ".inputs");
    for (const auto& v : n.outputs) {
      if (!p.value(v)) throw Error(Errc::bad_graph, "unknown value '" + v + "'", at + ".outputs");
      // KV caches are written in place by several ops; every other value has one producer.
      if (p.value(v)->kind != ValueKind::kv_cache && !producer.emplace(v, i).second)
        throw Error(Errc::bad_graph, "value '" + v + "' has two producers", at + ".outputs");
    }
  }
  for (const auto& n : p.nodes) check_node_contract(p, n, where);
  for (const auto& n : p.nodes)
    for (const auto& v : n.inputs)
      if (p.value(v)->kind == ValueKind::activation && !producer.count(v))
        throw Error(Errc::bad_graph, "activation '" + v + "' is consumed but never produced",
                    where + ".ops['" + n.id + "']");
  // Kahn's algorithm: a stable topological order, or the cycle named.
  std::vector<int> pending(p.nodes.size(), 0);
  std::vector<std::vector<size_t>> users(p.nodes.size());
  auto edge = [&](size_t from, size_t to) {
    ++pending[to];
    users[from].push_back(to);
  };
  for (size_t i = 0; i < p.nodes.size(); ++i)
    for (const auto& v : p.nodes[i].inputs)
      if (auto it = producer.find(v); it != producer.end() && it->second != i) edge(it->second, i);
  // A KV cache is written in place, so its accesses keep the order they have in the phase: a
  // read comes after the last append before it (decode's attention reads the row its step
  // appended), an append after the last append and the reads since.
  std::map<std::string, size_t> last_write;
  std::map<std::string, std::vector<size_t>> reads_since;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    for (const auto& v : p.nodes[i].inputs)
      if (p.value(v)->kind == ValueKind::kv_cache) {
        if (auto w = last_write.find(v); w != last_write.end() && w->second != i)
          edge(w->second, i);
        reads_since[v].push_back(i);
      }
    for (const auto& v : p.nodes[i].outputs)
      if (p.value(v)->kind == ValueKind::kv_cache) {
        if (auto w = last_write.find(v); w != last_write.end() && w->second != i)
          edge(w->second, i);
        for (size_t r : reads_since[v])
          if (r != i) edge(r, i);
        reads_since[v].clear();
        last_write[v] = i;
      }
  }
  // A KV cache has several writers (appends) and readers (attention): each reader comes after
  // every writer listed before it, so an attention sees the rows appended for its step.
  std::map<std::string, std::vector<size_t>> cache_writers;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    for (const auto& v : p.nodes[i].inputs)
      if (p.value(v)->kind == ValueKind::kv_cache)
        for (size_t w : cache_writers[v])
          if (w != i) ++pending[i], users[w].push_back(i);
    for (const auto& v : p.nodes[i].outputs)
      if (p.value(v)->kind == ValueKind::kv_cache) cache_writers[v].push_back(i);
  }
  std::vector<size_t> order, ready;
  for (size_t i = p.nodes.size(); i-- > 0;)
    if (!pending[i]) ready.push_back(i);
  while (!ready.empty()) {
    size_t i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (auto it = users[i].rbegin(); it != users[i].rend(); ++it)
      if (--pending[*it] == 0) ready.push_back(*it);
  }
  if (order.size() != p.nodes.size()) {
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (pending[i])
        throw Error(Errc::graph_cycle, "the ops form a cycle through '" + p.nodes[i].id + "'",
                    where);
  }
  std::vector<Node> sorted;
  for (size_t i : order) sorted.push_back(std::move(p.nodes[i]));
  p.nodes = std::move(sorted);
}

nlohmann::json to_json(const Graph& g) {
  json phases = json::array();
  auto node_json = [](const Node& n) {
    json attrs = json::object();
    for (const auto& a : n.attrs) std::visit([&](const auto& v) { attrs[a.name] = v; }, a.value);
    json j{{"id", n.id},
           {"op", sy_op_kind_name(n.op)},
           {"inputs", n.inputs},
           {"outputs", n.outputs},
           {"attrs", attrs}};
    if (n.layer >= 0) j["layer"] = n.layer;
    return j;
  };
  for (const auto& p : g.phases) {
    json values = json::array(), ops = json::array(), fusions = json::array();
    for (const auto& v : p.values) {
      json value{{"name", v.name},
                 {"dtype", sy_dtype_name(v.dtype)},
                 {"shape", v.shape},
                 {"kind", value_kind_name(v.kind)}};
      if (v.kind == ValueKind::constant) value["data"] = v.data;
      if (v.role != ValueRole::none) value["role"] = value_role_name(v.role);
      if (v.dynamic.axis >= 0)
        value["dynamic"] = {{"axis", v.dynamic.axis},
                            {"extent", step_extent_name(v.dynamic.extent)}};
      values.push_back(value);
    }
    for (const auto& n : p.nodes) ops.push_back(node_json(n));
    for (const auto& f : p.fusions)
      fusions.push_back(
          {{"group", f.group}, {"replaces", f.replaces}, {"fused", node_json(f.fused)}});
    phases.push_back({{"name", p.name}, {"values", values}, {"ops", ops}, {"fusions", fusions}});
  }
  json out{{"schema", kGraphSchema}, {"name", g.name}, {"phases", phases}};
  if (g.bounds.max_batch_tokens > 0)
    out["bounds"] = {{"kv_layout", kv_layout_name(g.bounds.kv_layout)},
                     {"max_batch_tokens", g.bounds.max_batch_tokens},
                     {"max_sequences", g.bounds.max_sequences},
                     {"max_outputs", g.bounds.max_outputs},
                     {"context", g.bounds.context},
                     {"kv_block_size", g.bounds.kv_block_size},
                     {"kv_blocks", g.bounds.kv_blocks}};
  return out;
}

}  // namespace sy
