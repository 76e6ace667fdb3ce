// Unit tests of lib/text's chat templates (our Jinja subset): each
// construct's output, whitespace control (trim_blocks, lstrip_blocks, `-`
// and `+`), loop variables, namespaces and macros, the errors typed and
// naming the template's line and column, hostile templates refused within
// their bounds, and tokenizer_config.json's template and special tokens.
// The expected strings of the construct tests are what Python's jinja2
// renders with transformers' settings (trim_blocks, lstrip_blocks, its
// tojson); the published templates are checked byte for byte against
// another implementation by test/text/chat-published.sh.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <string>

#include "text/chat_template.h"

namespace poot {
namespace {

using text::ChatConfig;
using text::ChatTemplate;
using text::RenderLimits;
using text::TextError;
using text::TextErrorKind;

// The variables most construct tests render with.
const char* kVars = R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi  "},
  {"role": "assistant", "content": "Yo"}], "name": "Ann", "n": 3,
  "d": {"b": 1, "a": [1, 2.5, null, true, "x\"y"]}})";

std::string render(const std::string& source, const std::string& vars) {
  auto t = ChatTemplate::parse(source);
  REQUIRE_MESSAGE(t, t.error().message);
  auto r = t->render(vars);
  REQUIRE_MESSAGE(r, r.error().message);
  return *r;
}

// The error of parsing or rendering source (which must fail).
TextError failure(const std::string& source, const std::string& vars = "{}", const RenderLimits& limits = {}) {
  auto t = ChatTemplate::parse(source);
  if (!t) return t.error();
  auto r = t->render(vars, limits);
  REQUIRE_MESSAGE(!r, (r ? "rendered: " + *r : std::string()));
  return r.error();
}

TEST_CASE("chat template: output, literals and comments") {
  CHECK(render("a{{ 'b' }}c{# gone #}d", "{}") ==
        "abcd");
  CHECK(render("{{ \"x\" 'y' }}{{ 1 }}{{ 2.5 }}{{ 1e3 }}{{ true }}{{ none }}{{ [1, 'a', none] }}{{ {'k': 'v'} }}", "{}") ==
        "xy12.51000.0TrueNone[1, 'a', None]{'k': 'v'}");
  CHECK(render("{{ '\\n\\t\\\\\\'\\u00e9' }}", "{}") ==
        "\n\t\\'é");
  CHECK(render("{{ name }}{{ missing }}!", kVars) ==
        "Ann!");
}

TEST_CASE("chat template: whitespace control: trim_blocks, lstrip_blocks and -") {
  CHECK(render("  {% if true %}\n  yes\n  {% endif %}\nend", "{}") ==
        "  yes\nend");
  CHECK(render("a  {%- if true -%}  \n b \n {%- endif %}  c", "{}") ==
        "ab  c");
  CHECK(render("x {{- ' y ' -}} z", "{}") ==
        "x y z");
  CHECK(render("  {%+ if true %}kept\n{% endif %}", "{}") ==
        "  kept\n");
  CHECK(render("{% if true +%}\nnewline kept{% endif %}", "{}") ==
        "\nnewline kept");
  CHECK(render("line\n   {# comment #}\nnext", "{}") ==
        "line\nnext");
  CHECK(render("{{ 'a' }}\n{{ 'b' }}\n", "{}") ==
        "a\nb");
  CHECK(render("a\r\nb\r\n", "{}") ==
        "a\nb");
  CHECK(render("x {% if true %} y {% endif %} z", "{}") ==
        "x  y  z");
}

TEST_CASE("chat template: if, elif and else") {
  CHECK(render("{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %}", kVars) ==
        "mid");
  CHECK(render("{% if missing %}a{% elif not missing %}b{% endif %}", kVars) ==
        "b");
  CHECK(render("{% if [] %}a{% else %}b{% endif %}{% if {} %}c{% else %}d{% endif %}{% if '' %}e{% else %}f{% endif %}{% if 0.0 %}g{% else %}h{% endif %}", "{}") ==
        "bdfh");
}

TEST_CASE("chat template: for loops and the loop variable") {
  CHECK(render("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}", kVars) ==
        "1032TrueFalse3 2121FalseFalse3 3210FalseTrue3 ");
  CHECK(render("{% for m in messages %}{{ loop.previtem.role if loop.previtem is defined }}>{{ loop.nextitem.role if loop.nextitem is defined }};{% endfor %}", kVars) ==
        ">user;system>assistant;user>;");
  CHECK(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", kVars) ==
        "b=1;a=[1, 2.5, None, True, 'x\"y'];");
  CHECK(render("{% for k in d %}{{ k }}{% endfor %}{% for c in 'héllo' %}[{{ c }}]{% endfor %}", kVars) ==
        "ba[h][é][l][l][o]");
  CHECK(render("{% for x in [] %}x{% else %}empty{% endfor %}{% for x in missing %}x{% else %}undefined is empty{% endfor %}", kVars) ==
        "emptyundefined is empty");
  CHECK(render("{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}", "{}") ==
        "1,3,5,7,9");
  CHECK(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", "{}") ==
        "0134");
  CHECK(render("{% for i in range(3) %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}", "{}") ==
        "[][][]");
  CHECK(render("{% set x = 5 %}{% for i in range(2) %}{{ x }}{% set x = i %}{% endfor %}{{ x }}", "{}") ==
        "555");
  CHECK(render("{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}", "{}") ==
        "1x1 1y2 1|2x1 2y2 2|");
  CHECK(render("{{ range(2, 10, 3) | list }}{{ range(5, 0, -2) | list }}{{ range(0) | list }}{{ (1, 'a') }}{{ (1,) }}", "{}") ==
        "[2, 5, 8][5, 3, 1][](1, 'a')(1,)");
}

TEST_CASE("chat template: set, namespace and macros") {
  CHECK(render("{% set a = 'x' %}{% set b, c = [1, 2] %}{{ a }}{{ b }}{{ c }}", "{}") ==
        "x12");
  CHECK(render("{% set ns = namespace(found=false, count=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% endif %}{% set ns.count = ns.count + 1 %}{% endfor %}{{ ns.found }} {{ ns.count }}", kVars) ==
        "True 3");
  CHECK(render("{% set block %}inner {{ name }}{% endset %}[{{ block }}]", kVars) ==
        "[inner Ann]");
  CHECK(render("{% if true %}{% set y = 1 %}{% endif %}{{ y }}", "{}") ==
        "1");
  CHECK(render("{% macro greet(who, punct='!') %}Hi {{ who }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', punct='?') }} {{ greet(who='Cy') }}", "{}") ==
        "Hi Ann! Hi Bo? Hi Cy!");
  CHECK(render("{% macro outer() %}[{{ inner() }}]{% endmacro %}{% macro inner() %}in{% endmacro %}{{ outer() }}", "{}") ==
        "[in]");
}

TEST_CASE("chat template: filters") {
  CHECK(render("[{{ '  a b \\n' | trim }}]{{ messages | length }}{{ 'héllo' | length }}{{ d | length }}{{ missing | length }}", kVars) ==
        "[a b]3520");
  CHECK(render("{{ missing | default('dflt') }}{{ '' | default('e', true) }}{{ name | d('no') }}{{ none | default('kept') }}", kVars) ==
        "dflteAnnNone");
  CHECK(render("{{ 'aBc' | upper }}{{ 'AbC' | lower }}{{ 'hello world' | capitalize }}{{ 'hello wORLD' | title }}{{ 1 | string }}{{ none | string }}", "{}") ==
        "ABCabcHello worldHello World1None");
  CHECK(render("{{ messages | first }}{{ (messages | last).role }}{{ 'abc' | first }}{{ [1, 2, 3] | join('-') }}{{ 'abc' | list }}{{ d | items | list }}", kVars) ==
        "{'role': 'system', 'content': 'Be brief.'}assistanta1-2-3['a', 'b', 'c'][('b', 1), ('a', [1, 2.5, None, True, 'x\"y'])]");
  CHECK(render("{{ 'aaa' | replace('a', 'b') }}{{ 'aaa' | replace('a', 'b', 2) }}{{ '<x>' | safe }}{{ [3, 1] | reverse | list }}", "{}") ==
        "bbbbba<x>[1, 3]");
  CHECK(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}{{ messages | rejectattr('role', 'eq', 'user') | list | length }}", kVars) ==
        "['Hi  ']2");
  CHECK(render("{{ d | tojson }}|{{ 'é\"\\n' | tojson }}|{{ d | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ [1.0, 0.1, 1e20, 1e-5] | tojson }}", kVars) ==
        "{\"b\": 1, \"a\": [1, 2.5, null, true, \"x\\\"y\"]}|\"é\\\"\\n\"|{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true,\n    \"x\\\"y\"\n  ]\n}|{\"a\": 2, \"b\": 1}|[1.0, 0.1, 1e+20, 1e-05]");
  CHECK(render("{{ '3' | int + 1 }}{{ 'x' | int }}{{ 2 | float }}{{ -3 | abs }}{{ messages | map(attribute='role') | join(',') }}", kVars) ==
        "402.03system,user,assistant");
}

TEST_CASE("chat template: tests") {
  CHECK(render("{{ name is defined }}{{ missing is defined }}{{ missing is undefined }}{{ none is none }}{{ name is string }}{{ 1 is string }}", kVars) ==
        "TrueFalseTrueTrueTrueFalse");
  CHECK(render("{{ d is mapping }}{{ messages is mapping }}{{ messages is iterable }}{{ 'x' is iterable }}{{ 1 is iterable }}{{ messages is sequence }}", kVars) ==
        "TrueFalseTrueTrueFalseTrue");
  CHECK(render("{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ 'x' is number }}{{ 1 is integer }}{{ 1.0 is float }}", "{}") ==
        "TrueTrueTrueFalseTrueTrue");
  CHECK(render("{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ false is false }}{{ 1 is true }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}", "{}") ==
        "TrueFalseTrueTrueFalseTrueTrueTrueFalse");
  CHECK(render("{{ 'a' in 'cat' }}{{ 'z' not in 'cat' }}{{ 2 in [1, 2] }}{{ 'a' in {'a': 1} }}{{ 'b' in d }}{{ name is not none }}{{ 'x' in missing }}", kVars) ==
        "TrueTrueTrueTrueTrueTrueFalse");
}

TEST_CASE("chat template: string and dict methods") {
  CHECK(render("{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}[{{ '  x  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}]", "{}") ==
        "TrueTrue[x][a][x  ][  x]");
  CHECK(render("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'aXbXc'.split('X')[-1] }}", "{}") ==
        "['a', 'b', '', 'c']['a', 'b']['a', 'b c']c");
  CHECK(render("{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}{{ 'one two'.title() }}{{ 'a-b'.replace('-', '+') }}{{ 'abc'.capitalize() }}", "{}") ==
        "ABabOne Twoa+bAbc");
  CHECK(render("{{ d.get('b') }}{{ d.get('zz') }}{{ d.get('zz', 7) }}{{ d.keys() | list }}{{ d.values() | list | length }}{{ d['b'] }}{{ d.b }}{{ d.zz is defined }}", kVars) ==
        "1None7['b', 'a']211False");
  CHECK(render("{{ messages[0].content.split(' ')[0] }}{{ messages[-1]['role'] }}{{ messages[5] is defined }}", kVars) ==
        "BeassistantFalse");
}

TEST_CASE("chat template: slicing, operators and expressions") {
  CHECK(render("{{ [1, 2, 3, 4][::-1] }}{{ [1, 2, 3, 4][1:] }}{{ [1, 2, 3, 4][:-1] }}{{ [1, 2, 3, 4][::2] }}{{ 'héllo'[::-1] }}{{ 'héllo'[1:3] }}{{ messages[1:] | length }}", kVars) ==
        "[4, 3, 2, 1][2, 3, 4][1, 2, 3][1, 3]olléhél2");
  CHECK(render("{{ 1 + 2 * 3 }}{{ (1 + 2) * 3 }}{{ 7 // 2 }}{{ -7 // 2 }}{{ -7 % 3 }}{{ 7 / 2 }}{{ 4 / 2 }}{{ 2 ** 10 }}{{ 0.1 + 0.2 }}{{ 10 - 2.5 }}{{ -n }}", kVars) ==
        "793-423.52.010240.300000000000000047.5-3");
  CHECK(render("{{ 'a' ~ 1 ~ none ~ missing }}{{ 'a' + 'b' }}{{ [1] + [2] }}{{ 'ab' * 3 }}", kVars) ==
        "a1Noneab[1, 2]ababab");
  CHECK(render("{{ 1 < 2 }}{{ 2 <= 1 }}{{ 'a' < 'b' }}{{ 1 == 1.0 }}{{ 1 != 2 }}{{ [1, 2] == [1, 2] }}{{ missing == missing }}{{ none == missing }}", kVars) ==
        "TrueFalseTrueTrueTrueTrueTrueFalse");
  CHECK(render("{{ 1 and 2 }}{{ 0 or 'x' }}{{ not 0 }}{{ none or [] }}{{ 'yes' if n > 1 else 'no' }}[{{ 'yes' if n > 5 }}]", kVars) ==
        "2xTrue[]yes[]");
  CHECK(render("{{ name | upper + '!' }}{{ -2 | abs }}{{ not name is none }}", kVars) ==
        "ANN!2True");
}
TEST_CASE("chat template: list order, safe, Jinja's title filter beside str.title, float divisibility") {
  // Found by rendering random templates with jinja2 and poot and comparing.
  CHECK(render("{{ [1, 2] < [1, 3] }}{{ [2] > [1, 9] }}{{ [] <= [] }}{{ 1 | safe ~ '' }}{{ (1 | safe)[::-1] }}", "{}") ==
        "TrueTrueTrue11");
  CHECK(render("{{ \"they're in-line (x) [y] <z> bill's\" | title }}|{{ \"they're in-line (x) bill's\".title() }}", "{}") ==
        "They're In-Line (X) [Y] <Z> Bill's|They'Re In-Line (X) Bill'S");
  CHECK(render("{{ 1e3 is divisibleby 2 }}{{ 7.5 is divisibleby 2.5 }}", "{}") == "TrueTrue");
  CHECK(render("{{ 2.5 is even }}{{ 3.0 is odd }}{{ -3 is odd }}{{ '1000.0' | int }}{{ [1] * 2 }}{{ (1,) * 2 }}{{ [] * 3 }}",
               "{}") == "FalseTrueTrue1000[1, 1](1, 1)[]");
  CHECK(render("{{ 'ab' | map(attribute='role') | list }}{{ 0 | selectattr('x') | list }}{{ none | map('upper') | list }}",
               "{}") == "[Undefined, Undefined][][]");
  CHECK(failure("{{ (1, 2) + [3] }}").kind == TextErrorKind::Template);
  CHECK(failure("{{ (1, 2) < [3] }}").kind == TextErrorKind::Template);
  CHECK(failure("{{ [] in {} }}").kind == TextErrorKind::Template);
  CHECK(failure("{{ missing | int }}").message.find("'missing' is undefined") != std::string::npos);
}

TEST_CASE("chat template: errors are typed and name the line and column") {
  TextError e = failure("ok\n{% if x %}\n{% endfor %}");
  CHECK(e.kind == TextErrorKind::Template);
  CHECK(e.line == 3);
  CHECK(e.column == 4);
  CHECK(e.message.find("template line 3, column 4: unknown tag 'endfor'") != std::string::npos);
  e = failure("ab\n  {{ x");
  CHECK((e.kind == TextErrorKind::Template && e.line == 2 && e.column == 3));
  CHECK(e.message.find("no '}}'") != std::string::npos);
  e = failure("{% if x %}never closed");
  CHECK((e.kind == TextErrorKind::Template && e.message.find("no '{% endif %}'") != std::string::npos));
  e = failure("{{ 'unterminated }}");
  CHECK((e.kind == TextErrorKind::Template && e.column == 4 && e.message.find("no closing quote") != std::string::npos));
  e = failure("{# open comment");
  CHECK((e.kind == TextErrorKind::Template && e.line == 1 && e.column == 1));
  e = failure("{{ 1 + }}");
  CHECK((e.kind == TextErrorKind::Template && e.message.find("expected an expression, found '}}'") != std::string::npos));
  e = failure("{{ x ! y }}");
  CHECK((e.kind == TextErrorKind::Template && e.column == 6));
  e = failure("\n{{ 'x' | frobnicate }}");
  CHECK((e.kind == TextErrorKind::Unsupported && e.line == 2 && e.column == 8));
  CHECK(e.message.find("the filter 'frobnicate' is not implemented") != std::string::npos);
  CHECK(failure("{% raw %}x{% endraw %}").kind == TextErrorKind::Unsupported);
  CHECK(failure("{% if true %}{% break %}{% endif %}").message.find("'break' outside a loop") != std::string::npos);
  CHECK(failure("{% for x in [1] %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}").kind == TextErrorKind::Template);
  CHECK(failure("{{ 'x'.zfill(3) }}").kind == TextErrorKind::Unsupported);
  CHECK(failure("{{ x is frob }}").kind == TextErrorKind::Unsupported);
  CHECK(failure("{{ 'ab' | map('map', 'map', 'upper') | list }}").kind == TextErrorKind::Unsupported);
  e = failure("{% for m in messages %}\n  {{ raise_exception('roles must alternate') }}\n{% endfor %}", kVars);
  CHECK((e.kind == TextErrorKind::Raised && e.line == 2 && e.column == 6));
  CHECK(e.message.find("roles must alternate") != std::string::npos);
  e = failure("{{ a.b.c }}", R"({"a": {}})");
  CHECK((e.kind == TextErrorKind::Template && e.message.find("'b' is undefined") != std::string::npos));
  CHECK(failure("{{ missing.x }}").kind == TextErrorKind::Template);
  CHECK(failure("{{ 1 + 'a' }}").kind == TextErrorKind::Template);
  CHECK(failure("{{ 'a' + missing }}").kind == TextErrorKind::Template);
  CHECK(failure("{{ 1 // 0 }}").kind == TextErrorKind::Template);
  CHECK(failure("{{ [1][::0] }}").kind == TextErrorKind::Template);
  CHECK(failure("{% for a, b in [1, 2] %}{% endfor %}").kind == TextErrorKind::Template);
  CHECK(failure("{% set x = 1 %}{% set x.y = 2 %}").message.find("not a namespace") != std::string::npos);
  CHECK(failure("{{ undefined_function() }}").kind == TextErrorKind::Template);
  CHECK(failure("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").kind == TextErrorKind::Template);
  CHECK(failure("{{ 9223372036854775807 + 1 }}").kind == TextErrorKind::Unsupported);
  CHECK(failure("{{ 'a%s' % 'b' }}").kind == TextErrorKind::Unsupported);
  CHECK(failure("{{ x is defined is true }}").message.find("tests cannot be chained") != std::string::npos);
  CHECK(failure("{{ n[1:] }}", kVars).message.find("an integer cannot be sliced") != std::string::npos);
  CHECK(failure("{{ x }}", "[1]").kind == TextErrorKind::BadInput);
}

TEST_CASE("chat template: hostile templates are refused within their bounds") {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  CHECK(failure(deep).message.find("nests deeper than 64") != std::string::npos);
  std::string lists = "{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}";
  CHECK(failure(lists).kind == TextErrorKind::Template);
  std::string blocks;
  for (int k = 0; k < 5000; ++k) blocks += "{% if true %}";
  CHECK(failure(blocks).message.find("nests deeper") != std::string::npos);
  std::string nots = "{{ ";
  for (int k = 0; k < 5000; ++k) nots += "not ";
  CHECK(failure(nots + "x }}").message.find("nests deeper") != std::string::npos);
  CHECK(failure("{{ " + std::string(5000, '-') + "1 }}").message.find("nests deeper") != std::string::npos);
  std::string sum = "{{ 1", attrs = "{{ x", filters = "{{ x";
  for (int k = 0; k < 5000; ++k) sum += " + 1", attrs += ".a", filters += " | trim";
  for (const std::string& chain : {sum, attrs, filters})
    CHECK(failure(chain + " }}").message.find("nests deeper than 128 operators") != std::string::npos);
  // Work and size: a huge range, a loop past the step limit, output and
  // strings past the output limit, recursion, self-reference, deep values.
  CHECK(failure("{% for i in range(1000000000000) %}{% endfor %}").message.find("limit") != std::string::npos);
  RenderLimits small;
  small.maxSteps = 100000;
  small.maxOutput = 10000;
  CHECK(failure("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "{}", small)
            .message.find("ran past 100000 steps") != std::string::npos);
  CHECK(failure("{% set l = range(10000) | list %}{% for i in range(1000) %}{{ i in l }}{% endfor %}", "{}", small)
            .message.find("ran past 100000 steps") != std::string::npos);
  CHECK(failure("{% for i in range(1000) %}{{ 'x' * 100 }}{% endfor %}", "{}", small)
            .message.find("the output passed 10000 bytes") != std::string::npos);
  CHECK(failure("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "{}",
                small).kind == TextErrorKind::Template);
  CHECK(failure("{{ 'x' * 9223372036854775807 }}").kind == TextErrorKind::Template);
  CHECK(render("{{ '' * 9223372036854775807 }}{{ 1 ** 9223372036854775807 }}{{ (-1) ** 9223372036854775807 }}{{ 3 ** 39 }}",
               "{}") == "1-14052555153018976267");
  CHECK(failure("{{ 3 ** 40 }}").kind == TextErrorKind::Unsupported);
  CHECK(failure("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").message.find("deeper than 16") !=
        std::string::npos);
  CHECK(failure("{% set ns = namespace() %}{% set ns.me = [ns] %}").message.find("cannot hold itself") !=
        std::string::npos);
  CHECK(failure("{% set ns = namespace(x=[]) %}{% for i in range(100) %}{% set ns.x = [ns.x] %}{% endfor %}")
            .message.find("nested deeper") != std::string::npos);
  CHECK(failure("{% for i in range(100) %}{% set ns = namespace() %}{% endfor %}").message.find("namespaces") !=
        std::string::npos);
  std::string deepJson = std::string(200, '[') + std::string(200, ']');
  CHECK(failure("{{ x }}", "{\"x\": " + deepJson + "}").kind == TextErrorKind::BadInput);
  // Every prefix of a template with each construct parses or fails cleanly,
  // and renders or fails cleanly.
  std::string full =
      "{%- set ns = namespace(n=0) -%}\n{# c #}{% for k, v in {'a': [1, 2]}.items() if k %}{{ loop.index ~ k | upper }}"
      "{% set ns.n = ns.n + v | length %}{% else %}none{% endfor %}{% macro m(x='y') %}{{ x[::-1] }}{% endmacro %}"
      "{{ m() if ns.n > 1 else 'z' }}{{ \"q\\\"\" | tojson }}{% if 1 is number and not false %}{{ [1, 2][1:] }}{% endif %}";
  CHECK(render(full, "{}") == "1Ay\"q\\\"\"[2]");  // as jinja2 renders it
  for (size_t n = 0; n <= full.size(); ++n) {
    auto t = ChatTemplate::parse(full.substr(0, n));
    if (t) (void)t->render("{}");
  }
}

TEST_CASE("chat template: strftime_now formats the given time") {
  auto t = ChatTemplate::parse("{{ strftime_now('%Y') }}");
  REQUIRE(t);
  RenderLimits at;
  at.now = 1700000000;  // 2023-11-14 22:13 UTC: 2023 in every time zone
  auto r = t->render("{}", at);
  REQUIRE(r);
  CHECK(*r == "2023");
}

// Where the test's model directories go (removed at its end).
std::filesystem::path scratch() { return std::filesystem::temp_directory_path() / ("poot-chat-test-" + std::to_string(::getpid())); }

// A model directory holding only tokenizer_config.json (and chat_template.jinja where given).
std::filesystem::path modelDir(const std::string& config, const std::string& jinjaFile = {}) {
  static int n = 0;
  auto dir = scratch() / std::to_string(n++);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << config;
  if (!jinjaFile.empty()) std::ofstream(dir / "chat_template.jinja") << jinjaFile;
  return dir;
}

TEST_CASE("chat template: tokenizer_config.json's template and special tokens") {
  // The list form takes "default"; tokens as strings or {content}; null ones are left out (undefined).
  auto dir = modelDir(R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null,
    "chat_template": [{"name": "tool_use", "template": "tools"},
                      {"name": "default", "template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}[assistant:{% endif %}{{ pad_token is defined }}{{ tools is none }}"}]})");
  auto c = ChatConfig::load((dir / "tokenizer.json").string());
  REQUIRE_MESSAGE(c, c.error().message);
  auto r = c->apply(R"([{"role": "user", "content": "hé"}])", true);
  REQUIRE(r);
  CHECK(*r == "<s>[user:hé][assistant:FalseTrue");
  r = c->apply(R"([{"role": "user", "content": "x"}])", false);
  REQUIRE(r);
  CHECK(*r == "<s>[user:x]FalseTrue");
  CHECK(c->apply("not json", true).error().kind == TextErrorKind::BadInput);
  CHECK(c->apply(R"({"role": "user"})", true).error().kind == TextErrorKind::BadInput);
  CHECK(c->apply(R"([])", true).error().kind == TextErrorKind::BadInput);
  CHECK(c->apply(R"(["x"])", true).error().kind == TextErrorKind::BadInput);
  // chat_template.jinja where the config has none; neither: a Format error;
  // a template that does not parse: the error names the file and the line.
  c = ChatConfig::load(modelDir(R"({"eos_token": "E"})", "{{ eos_token }}\n").string());
  REQUIRE(c);
  CHECK(*c->apply(R"([{"role": "user", "content": "x"}])", true) == "E");
  auto missing = ChatConfig::load(modelDir(R"({"chat_template": null})").string());
  CHECK((!missing && missing.error().kind == TextErrorKind::Format));
  auto noDefault = ChatConfig::load(modelDir(R"({"chat_template": [{"name": "rag", "template": "x"}]})").string());
  CHECK((!noDefault && noDefault.error().message.find("\"default\"") != std::string::npos));
  auto bad = ChatConfig::load(modelDir(R"({"chat_template": "\n{% if %}"})").string());
  REQUIRE(!bad);
  CHECK((bad.error().kind == TextErrorKind::Template && bad.error().line == 2));
  CHECK(bad.error().message.find("tokenizer_config.json: chat_template: template line 2") != std::string::npos);
  auto badToken = ChatConfig::load(modelDir(R"({"chat_template": "x", "eos_token": 5})").string());
  CHECK((!badToken && badToken.error().kind == TextErrorKind::Format));
  CHECK(ChatConfig::load("/nonexistent/dir/tokenizer.json").error().kind == TextErrorKind::Io);
  std::filesystem::remove_all(scratch());
}

}  // namespace
}  // namespace poot
