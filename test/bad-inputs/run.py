# The bad-input corpus: runs every case of cases.ini against the built tools
# and checks three things of each: the exit code, the diagnostic (one line of
# stderr equal to `error`, or containing `contains`), and that nothing was
# written. Each case then runs again with --diagnostics=json: the same exit
# code, nothing written, and stderr all JSON objects (docs/diagnostics.md),
# one an error whose message is that of the text form's diagnostic.
# Usage: run.py BUILD_DIR [--text-only] [CASE...] (default: every case, in
# both forms; --text-only leaves the JSON runs out, as the sanitizer build
# does: there the JSON printer is the one extra code they would run, at the
# price of a second start of every tool).
#
# cases.ini has one section per case, and a [setup] section whose `run`
# commands (one a line) make the fixtures every case may use (plans,
# checkpoints, .npy files) in {fix}, once. A case's optional `setup` commands
# make its own bad input in {tmp}. Its `run` command then runs from an empty
# directory {out} (so a default output directory '.' lands in it too) and
# {out} must still be empty afterwards: no output file, no output directory,
# no state. Commands name {pootc}, {poot}, {here} (this folder and its
# helper scripts), {in} (Inputs/ beside this file),
# {examples}, {targets}, {lit} (test/lit, for its helper scripts), {fix},
# {tmp} and {out}; they run in bash.
import configparser
import json
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
source = os.path.dirname(os.path.dirname(here))
build = os.path.abspath(sys.argv[1])
text_only = "--text-only" in sys.argv[2:]
only = set(sys.argv[2:]) - {"--text-only"}

cases = configparser.ConfigParser(interpolation=None, delimiters=("=",))
cases.optionxform = str
with open(os.path.join(here, "cases.ini")) as f:
    cases.read_file(f)

root = tempfile.mkdtemp(prefix="poot-bad-inputs-")
names = {
    "pootc": os.path.join(build, "tools", "pootc", "pootc"),
    "poot": os.path.join(build, "tools", "poot", "poot"),
    "here": here,
    "in": os.path.join(here, "Inputs"),
    "examples": os.path.join(source, "examples"),
    "targets": os.path.join(source, "targets"),
    "lit": os.path.join(source, "test", "lit"),
    "fix": os.path.join(root, "fix"),
}
env = dict(os.environ, MESA_SHADER_CACHE_DIR=os.environ.get("MESA_SHADER_CACHE_DIR",
                                                          os.path.join(build, "test", "mesa-shader-cache")))


def expand(text, extra):
    for k, v in {**names, **extra}.items():
        text = text.replace("{" + k + "}", v)
    return text


def shell(cmd, cwd):
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, errors="replace")


def lines(value):
    return [line for line in value.splitlines() if line.strip()]


def written(out):
    found = sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs)
    found += sorted(os.path.relpath(os.path.join(d, s), out) for d, ss, _ in os.walk(out) for s in ss)
    return found


FIELDS = ["file", "line", "column", "item", "severity", "kind", "message", "figures"]


def json_problems(r, want, diagnostic, out):
    """What is wrong with a --diagnostics=json run of a case whose text form printed `diagnostic`."""
    problems = [] if r.returncode == want else [f"json: exit code {r.returncode}, expected {want}"]
    objects = []
    for line in r.stderr.splitlines():
        try:
            objects.append(json.loads(line))
        except ValueError:
            problems.append("json: stderr line is not JSON: " + line)
    problems += ["json: fields " + str(list(o)) for o in objects if list(o) != FIELDS]
    objects = [o for o in objects if list(o) == FIELDS]
    if not any(o["severity"] == "error" and o["message"] in diagnostic for o in objects):
        problems.append("json: no error whose message is in: " + diagnostic)
    if written(out):
        problems.append("json: wrote " + ", ".join(written(out)))
    return problems


os.makedirs(names["fix"])
for cmd in lines(cases["setup"]["run"]):
    r = shell(expand(cmd, {}), names["fix"])
    if r.returncode != 0:
        sys.exit(f"setup failed ({r.returncode}): {cmd}\n{r.stdout}{r.stderr}")

failures, ran = [], 0
for name in cases.sections():
    if name == "setup" or (only and name not in only):
        continue
    case = cases[name]
    tmp, out = os.path.join(root, name, "tmp"), os.path.join(root, name, "out")
    os.makedirs(tmp)
    os.makedirs(out)
    extra = {"tmp": tmp, "out": out}
    problems = []
    for cmd in lines(case.get("setup", "")):
        r = shell(expand(cmd, extra), tmp)
        if r.returncode != 0:
            problems.append(f"setup exited {r.returncode}: {cmd}\n{r.stdout}{r.stderr}")
    if not problems:
        r = shell(expand(case["run"], extra), out)
        want = int(case["exit"])
        if r.returncode != want:
            problems.append(f"exit code {r.returncode}, expected {want}")
        err = r.stderr.splitlines()
        if "error" in case and expand(case["error"], extra) not in err:
            problems.append("no stderr line is: " + expand(case["error"], extra))
        if "contains" in case and expand(case["contains"], extra) not in r.stderr:
            problems.append("stderr does not contain: " + expand(case["contains"], extra))
        if "error" not in case and "contains" not in case:
            problems.append("the case states no diagnostic")
        if written(out):
            problems.append("wrote " + ", ".join(written(out)))
        if problems:
            problems.append("command: " + expand(case["run"], extra) + "\nstderr:\n" + r.stderr)
        elif not text_only:
            said = expand(case["error"] if "error" in case else case["contains"], extra)
            diagnostic = next(line for line in err if said in line)
            cmd = case["run"].replace("{pootc} ", "{pootc} --diagnostics=json ")
            cmd = cmd.replace("{poot} ", "{poot} --diagnostics=json ")
            j = shell(expand(cmd, extra), out)
            problems += json_problems(j, want, diagnostic, out)
            if problems:
                problems.append("command: " + expand(cmd, extra) + "\nstderr:\n" + j.stderr)
    ran += 1
    if problems:
        failures.append(name)
        print(f"FAIL {name}: " + "\n  ".join(problems))
    else:
        print(f"ok   {name}")

print(f"{ran - len(failures)} of {ran} bad-input cases pass")
if not failures:
    shutil.rmtree(root)
sys.exit(1 if failures else 0)
