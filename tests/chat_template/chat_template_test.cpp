// The chat template engine against Hugging Face transformers: every real template of
// tests/fixtures/chat_templates rendered for every recorded conversation must give exactly
// the text transformers rendered (make_renderings.py, not run by the build), or the same
// refusal. Then the subset's edges: Jinja semantics the templates rely on, and every
// construct outside the subset refused by name with its line, before anything renders.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>

#include "core/chat_template/chat_template.hpp"
#include "core/errors/error.hpp"
#include "support/rendering_time.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

const fs::path kDir = fs::path(SY_TEST_FIXTURES_DIR) / "chat_templates";

TEST(ChatTemplate, RealTemplatesRenderAsTransformersDoes) {
  const ordered_json all = ordered_json::parse(test::file_contents(kDir / "renderings.json"));
  size_t cases = 0, refusals = 0;
  for (const ordered_json& t : all["templates"]) {
    const std::string file = t["file"];
    ChatTemplate tpl = ChatTemplate::parse(test::file_contents(kDir / file), file);
    for (const ordered_json& c : t["cases"]) {
      SCOPED_TRACE(file + " / " + c["name"].get<std::string>());
      ordered_json extra = c["kwargs"];
      extra["tools"] = c["tools"];
      ordered_json context =
          chat_context(c["messages"], c["add_generation_prompt"], t["special_tokens"], extra);
      ++cases;
      if (c.contains("output")) {
        EXPECT_EQ(tpl.render(context, test::rendering_time()), c["output"].get<std::string>());
        continue;
      }
      ++refusals;
      try {
        std::string got = tpl.render(context, test::rendering_time());
        ADD_FAILURE() << "rendered what transformers refused: " << got;
      } catch (const Error& e) {
        EXPECT_EQ(e.code, Errc::chat_template);
        EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos)
            << e.what();
      }
    }
  }
  EXPECT_EQ(all["templates"].size(), 11u);
  EXPECT_GE(cases, 80u);
  EXPECT_GE(refusals, 4u);
}

std::string render(const std::string& source,
                   const ordered_json& context = ordered_json::object()) {
  return ChatTemplate::parse(source, "t.jinja").render(context, test::rendering_time());
}

// The Jinja semantics the templates rely on, each against the value jinja2 gives.
TEST(ChatTemplate, JinjaSemantics) {
  // A set inside a for loop does not leak out; a namespace does.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(
      render("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = i %}{% endfor %}"
             "{{ ns.x }}"),
      "2");
  // An if block is no scope.
  EXPECT_EQ(render("{% if true %}{% set y = 'a' %}{% endif %}{{ y }}"), "a");
  // loop.*, a loop filter and else.
  EXPECT_EQ(
      render("{% for x in 'abc' if x != 'b' %}{{ loop.index }}{{ x }}{{ '|' if not loop.last }}"
             "{% endfor %}"),
      "1a|2c");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(
      render("{% for x in range(5) %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
      "012");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': [2]}|items %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=[2];");
  // Python's str() of values, and the None an unset variable is not.
  EXPECT_EQ(render("{{ none }}|{{ true }}|{{ 1.0 }}|{{ 1e-05 }}|{{ [1, 'a'] }}|{{ {'k': none} "
                   "}}|{{ nothing }}"),
            "None|True|1.0|1e-05|[1, 'a']|{'k': None}|");
  // Filters bind tighter than +; not looser than ==.
  EXPECT_EQ(render("{{ 'a' + ' b '|trim + 'c' }}"), "abc");
  EXPECT_EQ(render("{{ not [1]|length == 1 }}"), "False");
  // Slices, negative indices, string methods.
  EXPECT_EQ(
      render("{{ [1,2,3,4][::-1] }}{{ 'hello'[1:3] }}{{ 'a</think>b'.split('</think>')[-1] }}"),
      "[4, 3, 2, 1]elb");
  EXPECT_EQ(render("{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ '  y '.strip() }}|{{ "
                   "'abc'.startswith(('x', 'a')) }}"),
            "x\n|y|True");
  // tojson as transformers calls json.dumps: ensure_ascii off, Python's separators.
  EXPECT_EQ(render("{{ {'a': [1, 'é'], 'b': none}|tojson }}"), "{\"a\": [1, \"é\"], \"b\": null}");
  EXPECT_EQ(render("{{ {'a': 1}|tojson(indent=2) }}"), "{\n  \"a\": 1\n}");
  // Python integer semantics.
  EXPECT_EQ(render("{{ -7 // 2 }} {{ -7 % 2 }} {{ 7 / 2 }} {{ 2 ** 10 }}"), "-4 1 3.5 1024");
  // Whitespace control: trim_blocks, lstrip_blocks, - and +.
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif +%}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("x{# a comment #}\ny"), "xy");
  EXPECT_EQ(render("keeps no trailing newline\n"), "keeps no trailing newline");
  // Macros with defaults, recursion, and the template's top level.
  EXPECT_EQ(
      render("{% macro f(n, sep='-') %}{% if n > 0 %}{{ n }}{{ sep }}{{ f(n - 1, sep) }}{% endif %}"
             "{% endmacro %}{{ f(3) }}|{{ f(2, sep='+') }}"),
      "3-2-1-|2+1+");
  // strftime_now formats the pinned time.
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "14 Mar 2026");
}

// A refusal with Errc::chat_template whose message holds `what` and whose where names the line.
void expect_template_refused(const std::string& source, const std::string& what, int line,
                             const ordered_json& context = ordered_json::object()) {
  SCOPED_TRACE(source);
  try {
    render(source, context);
    ADD_FAILURE() << "rendered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::chat_template);
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    EXPECT_EQ(e.where, "t.jinja:" + std::to_string(line)) << e.what();
  }
}

TEST(ChatTemplate, UnsupportedConstructsAreRefusedByName) {
  expect_template_refused("ok\n{% include 'other.jinja' %}", "statement 'include' is not supported",
                          2);
  expect_template_refused("{% extends 'base' %}", "statement 'extends'", 1);
  expect_template_refused("{% with x = 1 %}{% endwith %}", "statement 'with'", 1);
  expect_template_refused("{% raw %}{{ x }}{% endraw %}", "statement 'raw'", 1);
  expect_template_refused("{{ x | wordwrap(10) }}", "filter 'wordwrap' is not supported", 1);
  expect_template_refused("\n\n{% if x is escaped %}{% endif %}", "test 'escaped' is not supported",
                          3);
  expect_template_refused("{{ 'a {}'.format(1) }}", "method 'format' is not supported", 1);
  expect_template_refused("{{ cycler('a', 'b') }}", "calls 'cycler'", 1);
  expect_template_refused("{% for x in y recursive %}{% endfor %}", "recursive for loops", 1);
  expect_template_refused("{% if a < b < c %}{% endif %}", "chained comparisons", 1);
  expect_template_refused("{% if x %}never closed", "ends before {% elif or else or endif %}", 1);
  expect_template_refused("{{ x ", "not closed", 1);
  expect_template_refused("{% endfor %}", "without its opening statement", 1);
}

TEST(ChatTemplate, RenderErrorsNameTheProblem) {
  expect_template_refused("{{ 'a' + 1 }}", "unsupported operand types for +: 'str' and 'int'", 1);
  expect_template_refused("line one\n{{ missing.attr }}", "'missing' is undefined", 2);
  expect_template_refused("{{ raise_exception('No system role') }}",
                          "the template refused the conversation: No system role", 1);
  expect_template_refused("{% set x = 1 %}{% set x.y = 2 %}", "not a namespace()", 1);
  expect_template_refused("{% for a, b in [[1, 2, 3]] %}{% endfor %}", "cannot unpack 3 values", 1);
  expect_template_refused("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
                          "nested deeper than 64", 1);
  expect_template_refused(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      "did not finish within", 1);
  expect_template_refused("{{ {'a': 1}|tojson(indent=2, colour=1) }}",
                          "tojson has no argument 'colour'", 1);
}

}  // namespace
}  // namespace sy
