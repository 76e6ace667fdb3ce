"""Chat templates against jinja2, on random templates: COUNT templates
(seeded, the same every run) built from the constructs published chat
templates use (output, if/else, for with loop variables, set, comments,
whitespace control, filters, tests, string and dict methods, operators,
slices, inline if) are rendered by Python's jinja2 with transformers'
settings (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, its tojson) and by `poot tokenize MODEL --chat`, with the
same messages. Where jinja2 renders, poot's text must be the same byte for
byte; where jinja2 raises, poot must refuse. The generator leaves out what
poot knowingly does differently (docs/text.md): jinja2's constant folding,
which turns some errors on literals into undefined values, '%' string
formatting, and a test's bare argument before `if`. Exit 77 (skipped, for
ctest) without jinja2 (python3-jinja2, scripts/setup.sh).
Usage: python3 test/text/chat-jinja2.py BUILD [COUNT [SEED]]"""
import json
import os
import random
import subprocess
import sys
import tempfile
import warnings

try:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("skipped: no jinja2 for python3")
    sys.exit(77)

warnings.filterwarnings("ignore", category=SyntaxWarning)  # jinja2's code for a literal's subscript
build = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 400
random.seed(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
poot = os.path.join(build, "tools", "poot", "poot")


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise ValueError(message)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
messages = [{"role": "system", "content": " Sys, é\n"}, {"role": "user", "content": "Hi <think>a</think> b  "},
            {"role": "assistant", "content": "Yo\t! {x}"}]
variables = ["messages", "messages[0]", "messages[-1].content", "messages[1]['role']", "m", "m.content",
             "undefined_var", "add_generation_prompt", "bos_token", "ns.n"]
literals = ["1", "0", "-3", "2.5", "0.1", "1e3", "'a'", "'Hé'", "\"x'y\"", "''", "' pad '", "none", "true", "false",
            "[1, 'b', none]", "[]", "{'k': 1, 'j': [2]}", "{}", "(1, 2)"]
filters = ["trim", "length", "upper", "lower", "capitalize", "title", "string", "first", "last", "list", "tojson",
           "tojson(indent=2)", "default('D')", "default('E', true)", "join(',')", "replace('a', 'Z')", "reverse | list",
           "items | list", "int", "float", "abs", "safe", "count", "map(attribute='role') | list",
           "selectattr('role', 'equalto', 'user') | list", "rejectattr('role', 'eq', 'user') | list"]
tests = ["defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number", "integer", "float",
         "boolean", "true", "false", "odd", "even", "divisibleby(2)"]
methods = [".strip()", ".lstrip()", ".rstrip()", ".upper()", ".lower()", ".split()", ".split(',')", ".startswith('H')",
           ".endswith(('!', 'x'))", ".replace('o', '0')", ".title()", ".strip('Y ')", ".split('</think>')[-1]",
           ".get('k')", ".get('role', 'none')", ".items() | list", ".keys() | list", ".values() | list"]
subscripts = ["[0]", "[-1]", "[1:]", "[::-1]", "[:2]", "['k']", "['role']"]
ops = ["+", "-", "*", "/", "//", "~", "==", "!=", "<", ">", "<=", ">=", "and", "or", "in", "not in"]


def expr(depth=0):
    r = random.random()
    if depth > 2 or r < 0.3:
        return random.choice(variables if random.random() < 0.5 else literals)
    if r < 0.45:
        return expr(depth + 1) + " | " + random.choice(filters)
    if r < 0.55:
        return "(" + expr(depth + 1) + " is " + random.choice(["", "not "]) + random.choice(tests) + ")"
    if r < 0.65:
        return "(" + expr(depth + 1) + ")" + random.choice(methods)
    if r < 0.85:
        return "(" + expr(depth + 1) + " " + random.choice(ops) + " " + expr(depth + 1) + ")"
    if r < 0.9:
        return "(" + expr(depth + 1) + " if " + expr(depth + 1) + " else " + expr(depth + 1) + ")"
    if r < 0.95:
        return random.choice(variables) + random.choice(subscripts)
    return "(not " + expr(depth + 1) + ")"


def stmt(depth=0):
    r = random.random()
    a, b = random.choice(["", "-"]), random.choice(["", "-"])
    nl = random.choice(["", "\n", "\n  ", "  ", "\t"])
    if depth > 1 or r < 0.35:
        return nl + "{{" + a + " " + expr() + " " + b + "}}" + random.choice(["", "\n", " x "])
    if r < 0.55:
        return (nl + "{%" + a + " if " + expr() + " " + b + "%}" + stmt(depth + 1) + nl + "{%" + random.choice(["", "-"]) +
                " else %}" + stmt(depth + 1) + "{% endif %}" + random.choice(["", "\n"]))
    if r < 0.75:
        return (nl + "{%" + a + " for m in messages %}" + nl + stmt(depth + 1) +
                "{{ loop.index }}{{ loop.revindex0 }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}\n{%" + b +
                " endfor %}")
    if r < 0.85:
        return nl + "{% set ns.n = " + expr() + " %}{% set v = " + expr() + " %}{{ v }}" + nl
    return nl + "{# c #}" + nl + "{{ 'q' }}"


work = tempfile.mkdtemp()
model = os.path.join(work, "model")
os.makedirs(model)
conversation = os.path.join(work, "messages.json")
with open(conversation, "w", encoding="utf-8") as f:
    json.dump(messages, f, ensure_ascii=False)
rendered = refused = 0
failures = []
for k in range(count):
    template = "{% set ns = namespace(n=0) %}" + "".join(stmt() for _ in range(random.randint(1, 3)))
    try:
        want = env.from_string(template).render(messages=messages, add_generation_prompt=True, tools=None,
                                                documents=None, bos_token="<s>")
    except Exception:
        want = None
    with open(os.path.join(model, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"chat_template": template, "bos_token": "<s>"}, f, ensure_ascii=False)
    p = subprocess.run([poot, "tokenize", model, "--chat", conversation], capture_output=True)
    got = p.stdout.decode("utf-8") if p.returncode == 0 else None
    if want is None:
        refused += 1
    else:
        rendered += 1
    if got != want:
        failures.append((template, want, got, p.stderr.decode("utf-8", "replace").strip()))
for template, want, got, err in failures[:10]:
    print(f"FAIL template {template!r}\n  jinja2: {want!r}\n  poot:   {got!r} {err}")
print(f"{'FAIL' if failures else 'ok  '} {count - len(failures)} of {count} random templates as jinja2 renders them "
      f"({rendered} rendered by jinja2, {refused} refused)")
sys.exit(1 if failures else 0)
