// JSON Schema → grammar (core/sampling/json_schema.hpp): documents valid under a schema are
// taken (written with the properties in their declared order, as the grammar writes them) and
// invalid ones refused; patterns take what ECMAScript's std::regex takes; what is not served is
// refused naming its place. (That every generated document validates is checked on the real
// model, against Python's jsonschema, by tests/serve/test_structured_output.py.)
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "core/sampling/json_schema.hpp"

namespace sy {
namespace {

using Json = nlohmann::ordered_json;

bool takes(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarState s(g);
  return s.feed(text) && s.finished();
}

TEST(JsonSchema, TakesValidDocumentsAndRefusesInvalidOnes) {
  const auto g = json_schema_grammar(Json::parse(R"({
    "$defs": {
      "Node": {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 4},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 2}},
        "required": ["name"], "additionalProperties": false}},
    "type": "object",
    "properties": {
      "id": {"type": "string", "format": "uuid"},
      "kind": {"enum": ["a", "b", 3]},
      "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
      "when": {"type": "string", "format": "date-time"},
      "score": {"anyOf": [{"type": "number"}, {"type": "null"}]},
      "tree": {"$ref": "#/$defs/Node"},
      "fixed": {"const": {"k": [1, true]}},
      "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{2}$"},
      "ok": {"type": "boolean"}},
    "required": ["kind", "tree"]})"));
  for (const char* ok :
       {R"({"kind": "a", "tree": {"name": "r"}})",
        R"({"kind":3,"tree":{"name":"r","children":[{"name":"x"},{"name":"yz","children":[]}]}})",
        R"({"id": "123e4567-e89b-12d3-a456-426614174000", "kind": "b", "tags": ["x"],
               "when": "2024-02-28T23:59:59.5+01:00", "score": -1.5e3, "tree": {"name": "é"},
               "fixed": {"k":[1,true]}, "code": "AB-12", "ok": false})",
        R"({"kind": "a", "score": null, "tree": {"name": "abcd"}})"})
    EXPECT_TRUE(takes(g, ok)) << ok;
  for (const char* bad :
       {R"({"tree": {"name": "r"}})",                                      // kind is required
        R"({"kind": "c", "tree": {"name": "r"}})",                         // not in the enum
        R"({"kind": "a", "tree": {"name": ""}})",                          // minLength 1
        R"({"kind": "a", "tree": {"name": "abcde"}})",                     // maxLength 4
        R"({"kind": "a", "tags": [], "tree": {"name": "r"}})",             // minItems 1
        R"({"kind": "a", "tags": ["1","2","3"], "tree": {"name": "r"}})",  // maxItems 2
        R"({"kind": "a", "tree": {"name": "r", "x": 1}})",                 // additionalProperties
        R"({"kind": "a", "tree": {"name": 1}})",                           // a number for a string
        R"({"id": "123e4567", "kind": "a", "tree": {"name": "r"}})",       // not a uuid
        R"({"kind": "a", "when": "2024-02-30T00:00:00Z", "tree": {"name": "r"}})",
        R"({"kind": "a", "code": "AB-1", "tree": {"name": "r"}})",
        R"({"kind": "a", "fixed": {"k": [1]}, "tree": {"name": "r"}})",
        R"({"kind": "a", "score": "1", "tree": {"name": "r"}})",
        R"({"kind": "a", "tree": {"name": "r"}, "ok": 1})"})
    EXPECT_FALSE(takes(g, bad)) << bad;
}

TEST(JsonSchema, PatternsTakeWhatECMAScriptTakes) {
  const std::string alphabet = "abcxyzAB019-_. ";
  // Each pattern with a match and pieces matches are made of, so both verdicts come up often.
  struct Case {
    const char* pattern;
    std::string match;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"^[A-Z]{2}-\\d{2,3}$", "AB-123", {"AB", "Z", "-", "12", "3", "x"}},
      {"^(ab|c)+x?$", "abcx", {"ab", "c", "x", "a", "b"}},
      {"colou?r", "a color", {"colo", "u", "r", "a", "x"}},
      {"^a.c", "abc", {"a", "b", "c", " ", "x"}},
      {"\\d$", "x1", {"1", "a", "9", " "}},
      {"^[^0-9 ]*\\.(?:txt|md)$", "ab.txt", {"ab", "1", ".", "txt", "md", " "}},
      {"^\\w+(-\\w+)*$", "a_1-b", {"ab", "-", "_", "9", " ", "."}},
      {"^(a|b){2,}[xyz]?$", "abax", {"a", "b", "x", "yz", "c"}}};
  std::mt19937 rng(8);
  for (const auto& [pattern, match, parts] : cases) {
    const auto g = json_schema_grammar(Json{{"type", "string"}, {"pattern", pattern}});
    const std::regex re(pattern, std::regex::ECMAScript);
    int taken = 0;
    for (int n = 0; n < 1500; ++n) {
      std::string s;
      if (n % 3 == 1) {  // the match, perhaps with one piece put in
        s = match;
        if (rng() % 2) s.insert(rng() % (s.size() + 1), parts[rng() % parts.size()]);
      } else if (n % 3 == 2) {
        for (size_t k = rng() % 6; k > 0; --k) s += parts[rng() % parts.size()];
      } else {
        for (size_t k = rng() % 8; k > 0; --k) s += alphabet[rng() % alphabet.size()];
      }
      const bool want = std::regex_search(s, re);
      EXPECT_EQ(takes(g, "\"" + s + "\""), want) << pattern << " on " << s;
      taken += want;
    }
    EXPECT_GT(taken, 50) << pattern;
    EXPECT_LT(taken, 1450) << pattern;
  }
}

TEST(JsonSchema, WhatIsNotServedIsRefusedNamingItsPlace) {
  auto refusal = [](const char* schema) -> std::string {
    try {
      json_schema_grammar(Json::parse(schema));
    } catch (const SchemaError& e) {
      return e.what();
    }
    return "compiled";
  };
  EXPECT_EQ(refusal(R"({"properties": {"a": {"oneOf": [{"type": "string"}]}}})"),
            "/properties/a/oneOf: keyword `oneOf` is not served: exactly-one-of cannot be "
            "enforced while writing (use anyOf)");
  EXPECT_EQ(refusal(R"({"type": "integer", "minimum": 0})"),
            "/minimum: keyword `minimum` is not served: numeric bounds are not served");
  EXPECT_EQ(refusal(R"({"type": "string", "format": "email"})"),
            "/format: format `email` is not served (date, time, date-time and uuid are)");
  EXPECT_EQ(refusal(R"({"$ref": "https://example.com/s.json"})"),
            "/$ref: $ref `https://example.com/s.json`: only references within the schema (#…) "
            "are served");
  EXPECT_EQ(refusal(R"({"$ref": "#/$defs/Missing"})"),
            "/$ref: $ref `#/$defs/Missing` points at nothing in the schema");
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {}, "required": ["x"]})"),
            "/required: `x` is required but not among the properties");
  EXPECT_EQ(refusal(R"({"items": {"uniqueItems": true}})"),
            "/items/uniqueItems: keyword `uniqueItems` is not served: unique items cannot be "
            "enforced by a grammar");
  EXPECT_EQ(refusal(R"j({"type": "string", "pattern": "(a)\\1"})j"),
            "/pattern: pattern `(a)\\1`: back-references are not served");
  EXPECT_EQ(refusal(R"j({"type": "string", "pattern": "a(?=b)"})j"),
            "/pattern: pattern `a(?=b)`: lookaround and other (?…) groups are not served");
  EXPECT_EQ(refusal(R"({"type": "tuple"})"), "/type: `tuple` is not a JSON Schema type");
  EXPECT_EQ(refusal("false"), "(the schema): the false schema admits no value");
  EXPECT_EQ(refusal(R"({"frobnicate": 1})"),
            "/frobnicate: keyword `frobnicate` is not served: it is not a keyword of the served "
            "subset (docs/serve.md)");
}

}  // namespace
}  // namespace sy
