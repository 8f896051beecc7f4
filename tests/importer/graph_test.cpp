// The graph parser on bad input: every malformed graph is an Error with its catalog code
// and a location (line:column for JSON syntax, the JSON path or op otherwise). And the order
// validate() gives in-place KV cache accesses.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/graph/graph.hpp"

namespace sy {
namespace {

using nlohmann::json;

// x [2,4] f32 -> matmul(w [4,3]) -> y [2,3] -> silu -> z [2,3].
json small_graph() {
  json values =
      json::array({{{"name", "x"}, {"dtype", "f32"}, {"shape", {2, 4}}, {"kind", "input"}},
                   {{"name", "w"}, {"dtype", "f32"}, {"shape", {4, 3}}, {"kind", "weight"}},
                   {{"name", "y"}, {"dtype", "f32"}, {"shape", {2, 3}}},
                   {{"name", "z"}, {"dtype", "f32"}, {"shape", {2, 3}}}});
  json ops =
      json::array({{{"id", "mm"}, {"op", "matmul"}, {"inputs", {"x", "w"}}, {"outputs", {"y"}}},
                   {{"id", "act"}, {"op", "silu"}, {"inputs", {"y"}}, {"outputs", {"z"}}}});
  return {{"schema", "switchyard.graph/1"},
          {"name", "small"},
          {"phases", {{{"name", "decode"}, {"values", values}, {"ops", ops}}}}};
}

json& values_of(json& g) {
  return g["phases"][0]["values"];
}
json& ops_of(json& g) {
  return g["phases"][0]["ops"];
}

// Parses `text` and returns the error (fails the test when it parses).
Error parse_error(const std::string& text) {
  try {
    parse_graph(text, "g.json");
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "parsed: " << text;
  return Error(Errc::bad_graph, "");
}

void expect_graph_refused(const json& g, Errc code, const std::string& words) {
  Error e = parse_error(g.dump());
  EXPECT_EQ(e.code, code) << e.what();
  EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  EXPECT_EQ(e.where.rfind("g.json", 0), 0u) << e.where;
}

TEST(GraphParse, TheSmallGraphParses) {
  Graph g = parse_graph(small_graph().dump(), "g.json");
  ASSERT_EQ(g.phases.size(), 1u);
  EXPECT_EQ(g.phases[0].nodes.size(), 2u);
  EXPECT_EQ(g.name, "small");
}

TEST(GraphParse, MalformedJsonNamesLineAndColumn) {
  Error e = parse_error("{\n  \"schema\": \"switchyard.graph/1\",\n  \"phases\": [,]\n}");
  EXPECT_EQ(e.code, Errc::json_syntax);
  EXPECT_EQ(e.where, "g.json:3:14") << e.what();
  EXPECT_EQ(parse_error("").code, Errc::json_syntax);
  EXPECT_EQ(parse_error("{\"schema\": ").code, Errc::json_syntax);
}

TEST(GraphParse, WrongSchemaVersion) {
  json g = small_graph();
  g["schema"] = "switchyard.graph/2";
  expect_graph_refused(g, Errc::schema_version, "switchyard.graph/2");
  g.erase("schema");
  expect_graph_refused(g, Errc::bad_graph, "schema");
}

TEST(GraphParse, UnknownOpListsTheKnownOnes) {
  json g = small_graph();
  ops_of(g)[1]["op"] = "swiglu";
  expect_graph_refused(g, Errc::unknown_op, "swiglu");
  expect_graph_refused(g, Errc::unknown_op, "silu_mul");
}

TEST(GraphParse, ShapeMismatchBetweenConnectedOps) {
  json g = small_graph();
  values_of(g)[3]["shape"] = {3, 2};  // silu keeps its input's shape
  expect_graph_refused(g, Errc::shape_mismatch, "act");
  g = small_graph();
  values_of(g)[1]["shape"] = {5, 3};  // matmul K does not divide x
  expect_graph_refused(g, Errc::shape_mismatch, "matmul");
}

TEST(GraphParse, DtypeMismatch) {
  json g = small_graph();
  values_of(g)[1]["dtype"] = "bf16";
  expect_graph_refused(g, Errc::dtype_mismatch, "bf16");
}

TEST(GraphParse, Cycle) {
  json g = small_graph();
  // mm reads z, which act produces from mm's output.
  ops_of(g)[0]["inputs"] = {"z", "w"};
  values_of(g)[3]["shape"] = {2, 3};
  values_of(g)[1]["shape"] = {3, 3};
  values_of(g)[0]["shape"] = {2, 3};
  expect_graph_refused(g, Errc::graph_cycle, "cycle");
}

TEST(GraphParse, DuplicateAndUnknownValues) {
  json g = small_graph();
  values_of(g).push_back(values_of(g)[2]);
  expect_graph_refused(g, Errc::bad_graph, "duplicate value 'y'");
  g = small_graph();
  ops_of(g)[1]["inputs"] = {"nowhere"};
  expect_graph_refused(g, Errc::bad_graph, "unknown value 'nowhere'");
  g = small_graph();
  ops_of(g)[1]["id"] = "mm";
  expect_graph_refused(g, Errc::bad_graph, "duplicate op id 'mm'");
  g = small_graph();
  ops_of(g)[1]["outputs"] = {"y"};
  expect_graph_refused(g, Errc::bad_graph, "two producers");
}

TEST(GraphParse, BadFieldsNameTheirPath) {
  json g = small_graph();
  values_of(g)[0]["shape"] = {2, -4};
  expect_graph_refused(g, Errc::bad_graph, "dimension");
  g = small_graph();
  values_of(g)[0]["dtype"] = "f8";
  expect_graph_refused(g, Errc::bad_graph, "f8");
  g = small_graph();
  values_of(g)[0]["kind"] = "buffer";
  expect_graph_refused(g, Errc::bad_graph, "buffer");
  g = small_graph();
  values_of(g)[0]["kind"] = "constant";  // a constant holds its elements
  expect_graph_refused(g, Errc::bad_graph, "data");
  values_of(g)[0]["data"] = {1, 2, 3};
  expect_graph_refused(g, Errc::bad_graph, "holds 8 elements, got 3");
  g = small_graph();
  values_of(g)[0]["data"] = {1, 2, 3, 4, 5, 6, 7, 8};
  expect_graph_refused(g, Errc::bad_graph, "only a constant value holds data");
  g = small_graph();
  ops_of(g)[0].erase("inputs");
  expect_graph_refused(g, Errc::bad_graph, "inputs");
  g = small_graph();
  g["phases"] = json::array();
  expect_graph_refused(g, Errc::bad_graph, "at least one phase");
  expect_graph_refused(json::array(), Errc::bad_graph, "object");
}

// Decode's attention reads the caches its step appended to. With no value linking them, the
// in-place writes still order the ops: the append before the read, whatever else the read
// waits on (here a copy that would otherwise let it run first).
TEST(GraphValidate, KvCacheReadsFollowTheAppendsBeforeThem) {
  Phase p;
  p.name = "decode";
  auto v = [&](const char* name, std::vector<int64_t> shape, ValueKind kind,
               sy_dtype dt = SY_DTYPE_F32) {
    p.values.push_back({name, dt, shape, kind});
  };
  v("q", {1, 1, 2, 8}, ValueKind::input);
  v("q2", {1, 1, 2, 8}, ValueKind::activation);
  v("k", {1, 1, 1, 8}, ValueKind::input);
  v("pos", {1}, ValueKind::input, SY_DTYPE_I64);
  v("kv_len", {1}, ValueKind::input, SY_DTYPE_I64);
  v("k_cache", {1, 16, 1, 8}, ValueKind::kv_cache);
  v("v_cache", {1, 16, 1, 8}, ValueKind::kv_cache);
  v("o", {1, 1, 2, 8}, ValueKind::activation);
  p.nodes.push_back({"q_copy", SY_OP_COPY, {"q"}, {"q2"}, {}, 0});
  p.nodes.push_back({"k_append", SY_OP_KV_CACHE_APPEND, {"k", "pos"}, {"k_cache"}, {}, 0});
  p.nodes.push_back({"v_append", SY_OP_KV_CACHE_APPEND, {"k", "pos"}, {"v_cache"}, {}, 0});
  p.nodes.push_back({"attn",
                     SY_OP_ATTENTION,
                     {"q2", "k_cache", "v_cache", "kv_len"},
                     {"o"},
                     {{"causal", int64_t(1)}, {"kv_len_input", int64_t(1)}},
                     0});
  // A second append after the read stays after it.
  p.nodes.push_back({"k_append2", SY_OP_KV_CACHE_APPEND, {"k", "pos"}, {"k_cache"}, {}, 0});
  validate(p, "t");
  std::vector<std::string> order;
  for (const auto& n : p.nodes) order.push_back(n.id);
  auto at = [&](const std::string& id) { return std::find(order.begin(), order.end(), id); };
  EXPECT_LT(at("k_append"), at("attn"));
  EXPECT_LT(at("v_append"), at("attn"));
  EXPECT_LT(at("q_copy"), at("attn"));
  EXPECT_LT(at("attn"), at("k_append2"));
}

}  // namespace
}  // namespace sy
