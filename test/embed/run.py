# The embedding test: install this build into a fresh prefix, check what
# the package holds (the C header, the package config, a libpoot that
# exports nothing but the C API and links no compiler library), build
# examples/embed against that prefix alone, and run its decode loop on
# lavapipe for two tokens. `poot run` then takes the same two steps (the
# first from zero states, saving the new ones, the second starting from
# them), each checked against the oracle with --check; the example's logits
# and KV caches must equal poot run's byte for byte. Then its serving
# example (the engine over the tiny Llama's paged plans) generates, for
# three prompts of different lengths, the tokens `poot generate` writes for
# them (test/lit/generate checks those against the oracle). Usage: run.py
# BUILD
import json
import os
import shutil
import struct
import subprocess
import sys

build = os.path.abspath(sys.argv[1])
src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(build, "test", "embed")
prefix = os.path.join(out, "prefix")
env = dict(os.environ, MESA_SHADER_CACHE_DIR=os.environ.get("MESA_SHADER_CACHE_DIR",
                                                          os.path.join(build, "test", "mesa-shader-cache")))


def run(*cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, env=env, **kw)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def write_npy(path, descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join("%d," % d for d in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)


def npy_data(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<H", raw[8:10])
    return raw[10 + n:]


shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
run("cmake", "--install", build, "--prefix", prefix, stdout=subprocess.DEVNULL)
libdir = next(os.path.join(prefix, d) for d in ("lib", "lib64") if os.path.isdir(os.path.join(prefix, d)))
for path in ("include/poot/poot.h", os.path.relpath(libdir, prefix) + "/cmake/poot/pootConfig.cmake", "bin/pootc",
             "bin/poot", "share/poot/targets/lavapipe.yaml", "share/doc/poot/runtime.md"):
    if not os.path.isfile(os.path.join(prefix, path)):
        fail("the install has no " + path)
# The installed pootc finds a target by name among the installed profiles
# (a copy under a name only the install has), as the build tree's does
# among the source tree's.
targets = os.path.join(prefix, "share", "poot", "targets")
shutil.copy(os.path.join(targets, "lavapipe.yaml"), os.path.join(targets, "installed-only.yaml"))
graph = os.path.join(src, "examples", "graphs", "tiny-llama-decode.pg")
by_name, by_path = os.path.join(out, "by-name.plan"), os.path.join(out, "by-path.plan")
run(os.path.join(prefix, "bin", "pootc"), "compile", graph, "--device", "installed-only", "-o", by_name)
run(os.path.join(build, "tools", "pootc", "pootc"), "compile", graph, "--device", "lavapipe", "-o", by_path)
if open(by_name, "rb").read() != open(by_path, "rb").read():
    fail("pootc --device NAME gives another plan from the install than from the build tree")
for tool in ("pootc", "poot"):
    version = run(os.path.join(prefix, "bin", tool), "--version", stdout=subprocess.PIPE, text=True).stdout
    if not version.startswith(tool + " "):
        fail("%s --version printed %r" % (tool, version))
lib = os.path.join(libdir, "libpoot.so")
symbols = run("nm", "-D", "--defined-only", lib, stdout=subprocess.PIPE, text=True).stdout.split()[2::3]
if not symbols or any(not s.startswith("poot_") for s in symbols):
    fail("libpoot exports more than the C API: %s" % [s for s in symbols if not s.startswith("poot_")][:10])
needed = run("readelf", "-d", lib, stdout=subprocess.PIPE, text=True).stdout
if any(word in needed for word in ("LLVM", "SPIRV", "yaml")):
    fail("libpoot needs a compiler library:\n" + needed)

app = os.path.join(out, "app")
run("cmake", "-S", os.path.join(src, "examples", "embed"), "-B", app, "-G", "Ninja", "-DCMAKE_PREFIX_PATH=" + prefix,
    stdout=subprocess.DEVNULL)
run("ninja", "-C", app, "-j1", stdout=subprocess.DEVNULL)
linked = run("ldd", os.path.join(app, "embed"), stdout=subprocess.PIPE, text=True).stdout
if lib not in linked and os.path.realpath(lib) not in linked and libdir not in linked:
    fail("the example does not run on the installed libpoot:\n" + linked)

plan = os.path.join(out, "tiny-llama-decode.plan")
weights = os.path.join(out, "weights.safetensors")
run(os.path.join(build, "tools", "pootc", "pootc"), "compile", graph, "--device",
    os.path.join(src, "targets", "lavapipe.yaml"), "-o", plan)
run("python3", os.path.join(src, "test", "lit", "make-weights.py"), graph, weights, "--seed", "5")
tokens = (17, 42)
embed_out = os.path.join(out, "embed")
os.makedirs(embed_out)
run(os.path.join(app, "embed"), plan, weights, embed_out, *map(str, tokens))

poot = os.path.join(build, "tools", "poot", "poot")
states = ["layers.%d.%s_cache" % (l, kv) for l in (0, 1) for kv in "kv"]
# The first step starts from zeros, as a session's states do (poot run
# would draw the states it is not given).
zeros = os.path.join(out, "zeros.npy")
write_npy(zeros, "<f4", (1, 2, 64, 16), bytes(4 * 2 * 64 * 16))
previous = [a for s in states for a in ("--input", "%s=%s" % (s, zeros))]
for step, token in enumerate(tokens):
    t = os.path.join(out, "tokens%d.npy" % step)
    write_npy(t, "<i4", (1, 1), struct.pack("<i", token))
    d = os.path.join(out, "run%d" % step)
    check = run(poot, "run", plan, "--weights", weights, "--input", "tokens=" + t, "--slot", "pos=%d" % step,
                "--check", "--output-dir", d, "--save-states", d, *previous, stdout=subprocess.PIPE, text=True).stdout
    print(check, end="")
    if "FAIL" in check or check.count("PASS") != 1 + len(states):
        fail("poot run --check did not pass every output and state")
    previous = [a for s in states for a in ("--input", "%s=%s/%s.npy" % (s, d, s))]

last = os.path.join(out, "run%d" % (len(tokens) - 1))
for name in ["logits"] + states:
    with open(os.path.join(embed_out, name + ".bin"), "rb") as f:
        got = f.read()
    want = npy_data(os.path.join(last, name + ".npy"))
    if got != want:
        fail("%s: the example's %d bytes differ from poot run's %d" % (name, len(got), len(want)))
    print("%s: %d bytes, the same as poot run's" % (name, len(got)))

pootc = os.path.join(build, "tools", "pootc", "pootc")
paged = {}
for phase, extra in (("prefill", ["--batch", "2", "--tokens", "8"]), ("decode", ["--live", "--batch", "3"])):
    g, p = os.path.join(out, phase + ".pg"), os.path.join(out, phase + ".plan")
    run(pootc, "trace", os.path.join(src, "examples", "models", "tiny-llama.json"), "--phase", phase, "--kv", "paged",
        "--capacity", "48", "--pool-slots", "256", "-o", g, *extra)
    run(pootc, "compile", g, "--device", os.path.join(src, "targets", "lavapipe.yaml"), "-o", p)
    paged[phase] = p
paged_weights = os.path.join(out, "paged.safetensors")
run("python3", os.path.join(src, "test", "lit", "make-weights.py"), os.path.join(out, "prefill.pg"), paged_weights,
    "--seed", "5")
prompts = os.path.join(out, "prompts.txt")
with open(prompts, "w") as f:
    f.write("0 1 2 3 4\n30 31 32 33 34 35 36 37 38 39 40\n" + " ".join(map(str, range(60, 80))) + "\n")
with open(prompts) as f:
    served = run(os.path.join(app, "serve"), paged["prefill"], paged["decode"], paged_weights, "6", stdin=f,
                 stdout=subprocess.PIPE, text=True).stdout.splitlines()
jsonl = os.path.join(out, "generate.jsonl")
run(poot, "generate", paged["prefill"], paged["decode"], "--prompts", prompts, "--weights", paged_weights,
    "--max-new", "6", "--output", jsonl, stdout=subprocess.DEVNULL)
with open(jsonl) as f:
    generated = [" ".join(map(str, json.loads(line)["tokens"])) for line in f]
if served != generated:
    fail("the serving example's tokens %s differ from poot generate's %s" % (served, generated))
print("serve: the same tokens as poot generate for 3 prompts:", served)
print("PASS")
