// JSON Schema → GBNF (grammar.hpp): the grammar of the JSON texts a schema admits, so that
// constrained decoding always writes a document that parses and validates. It covers what
// pydantic and zod emit; any keyword or form outside it is refused by name (SchemaError), never
// dropped, so a schema is never silently loosened.
//
// Served (as in llama.cpp's json-schema-to-grammar, written here for bytes and our GBNF):
//   type (one or a list)   null, boolean, integer, number, string, array, object
//   enum, const            any JSON values, written as their compact serialisation
//   object                 properties (written in their declared order), required,
//                          additionalProperties: false / true / absent → the declared properties
//                          only (a stricter language: what is written still validates); a schema
//                          with no properties → a map of string keys to values of that schema
//   array                  items, minItems, maxItems
//   string                 minLength, maxLength, pattern (a subset of ECMA 262: literals,
//                          classes, . \d \w \s, groups, |, * + ? {m,n}; ^ and $ only at the ends;
//                          a side without an anchor admits any text there), format: date, time,
//                          date-time (RFC 3339), uuid
//   anyOf, allOf (one schema), $ref to "#…" JSON pointers ($defs, definitions; recursion)
//   annotations            title, description, default, examples, $schema, $id, $comment,
//                          deprecated, readOnly, writeOnly (no effect on what is valid)
// Refused, among others: oneOf (exclusivity is not a context-free property of the branches),
// not, if/then/else, minimum/maximum/multipleOf, uniqueItems, prefixItems, patternProperties,
// min/maxProperties, other formats, remote $ref, and the false schema.
//
// Conventions where a schema leaves the text open: whitespace between tokens is at most one
// space, or a newline and up to 20 spaces or tabs (llama.cpp's); integer parts and fractions
// have at most 20 digits (a double needs 17), exponents at most 2, so every number a grammar
// writes is a finite double (at most about 1e119): readers that refuse overflow read it.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/sampling/grammar.hpp"

namespace sy {

// A schema we do not serve: `pointer` is the JSON pointer (RFC 6901) of the offending place in
// the schema ("" for its root), the message names the keyword and why.
class SchemaError : public std::runtime_error {
 public:
  SchemaError(std::string pointer, const std::string& message)
      : std::runtime_error((pointer.empty() ? std::string("(the schema)") : pointer) + ": " +
                           message),
        pointer_(std::move(pointer)),
        message_(message) {}
  const std::string& pointer() const { return pointer_; }
  const std::string& message() const { return message_; }

 private:
  std::string pointer_, message_;
};

// Grammars that combine schemas with text of their own (tool calls: a function's name, then its
// arguments' schema): each schema's rules are added under fresh names, the primitives (string,
// number, ws, ...) shared.
class JsonGrammarBuilder {
 public:
  JsonGrammarBuilder();
  ~JsonGrammarBuilder();
  // Adds the rules of `schema` (its $refs resolve within it); returns the name of the rule that
  // writes one of its values, made from `hint`. Throws SchemaError.
  std::string add(const nlohmann::ordered_json& schema, const std::string& hint);
  // Adds `name ::= body` (GBNF; `root` once, the start). Names must be new.
  void rule(const std::string& name, const std::string& body);
  // Every rule added, and the primitives they call.
  std::string gbnf() const;
  // `bytes` as a GBNF literal.
  static std::string literal(std::string_view bytes);

 private:
  class SchemaCompiler;
  std::unique_ptr<SchemaCompiler> compiler_;
};

// The GBNF of `schema` (root rule `root`). Throws SchemaError.
std::string json_schema_gbnf(const nlohmann::ordered_json& schema);
// The compiled grammar of `schema`. Throws SchemaError.
std::shared_ptr<const Grammar> json_schema_grammar(const nlohmann::ordered_json& schema);
// Any one JSON object (OpenAI's response_format json_object): the schema {"type": "object"}.
std::shared_ptr<const Grammar> json_object_grammar();

}  // namespace sy
