# The Python module on lavapipe: a tiny Llama decode plan run for two steps
# from Python, each step's logits against `pootc eval` of the same graph on
# the same weights, tokens and position (the second step's eval starts from
# the KV caches the session read back after the first, so a state that did
# not carry over on the device, or read back wrong, fails); then every
# refusal the C API gives, each with its kind and a message naming what is
# wrong, and a refused step that changes no state; then the same step from
# the package installed into a fresh prefix. Usage: test_poot.py BUILD, with
# the build tree's package on PYTHONPATH.
import ctypes
import os
import shutil
import subprocess
import sys

import numpy as np

import poot

build = os.path.abspath(sys.argv[1])
src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(build, "test", "python")
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
os.environ.setdefault("MESA_SHADER_CACHE_DIR", os.path.join(build, "test", "mesa-shader-cache"))
pootc = os.path.join(build, "tools", "pootc", "pootc")
graph = os.path.join(src, "examples", "graphs", "tiny-llama-decode.pg")
plan_path = os.path.join(out, "tiny-llama-decode.plan")
weights = os.path.join(out, "weights.safetensors")
subprocess.run([pootc, "compile", graph, "--device", os.path.join(src, "targets", "lavapipe.yaml"), "-o", plan_path],
               check=True)
subprocess.run([sys.executable, os.path.join(src, "test", "lit", "make-weights.py"), graph, weights, "--seed", "5"],
               check=True)
assert os.path.dirname(poot.__file__).startswith(os.path.join(build, "python")), poot.__file__


def expect(kind, words, fn, *args, **kw):
    """fn(*args) raises poot.Error of `kind` whose message holds every word."""
    try:
        fn(*args, **kw)
    except poot.Error as e:
        msg = str(e)
        assert e.kind == kind, "wanted a %s error, got %s: %s" % (kind, e.kind, msg)
        for w in words:
            assert w in msg, "%r is not in the message %r" % (w, msg)
        print("refused as %s: %s" % (kind, msg))
        return
    raise AssertionError("%s%r was not refused" % (fn.__name__, args))


def oracle(tag, pos, token, states):
    """pootc eval's logits for one step, its states given as .npy files."""
    d = os.path.join(out, "eval-" + tag)
    os.makedirs(d)
    cmd = [pootc, "eval", graph, "--weights", weights, "--slot", "pos=%d" % pos, "--output-dir", d]
    for name, value in dict(states, tokens=np.array([[token]], np.int32)).items():
        np.save(os.path.join(d, name + ".in.npy"), value)
        cmd += ["--input", "%s=%s" % (name, os.path.join(d, name + ".in.npy"))]
    subprocess.run(cmd, check=True)
    return np.load(os.path.join(d, "logits.npy"))


plan = poot.Plan(plan_path)
assert (plan.target, plan.device) == ("spirv", "lavapipe"), (plan.target, plan.device)
assert plan.inputs == {"tokens": (np.dtype(np.int32), (1, 1))}, plan.inputs
assert plan.slots == {"pos": (np.dtype(np.int32), ())}, plan.slots
state_names = ["layers.%d.%s_cache" % (l, kv) for l in (0, 1) for kv in "kv"]
assert sorted(plan.states) == sorted(state_names), plan.states
assert all(v == (np.dtype(np.float32), (1, 2, 64, 16)) for v in plan.states.values()), plan.states
assert plan.outputs == {"logits": (np.dtype(np.float32), (1, 1, 256))}, plan.outputs
assert len(plan.weights) == 21, sorted(plan.weights)

s = poot.Session(plan, backend="vulkan")
expect("bind", ["weight %", "is not bound"], s.step, tokens=np.array([[17]], np.int32), pos=0)
expect("bind", ["no step has run, or the last one failed"], poot._check,
       poot._lib.poot_session_output(s._handle, b"logits", ctypes.byref(poot._Tensor())))
s.bind_weights(weights)
zeros = {name: s.state(name) for name in state_names}
assert all(not z.any() for z in zeros.values()), "states do not start as zeros"
for step, token in enumerate((17, 42)):
    before = {name: s.state(name) for name in state_names}
    got = s.step(tokens=np.array([[token]], np.int32), pos=step)["logits"]
    want = oracle(str(step), step, token, before)
    assert got.shape == want.shape == (1, 1, 256) and got.dtype == np.float32
    assert np.abs(want).max() > 0.01, "the oracle's logits are all but zero: nothing is compared"
    assert np.allclose(got, want, atol=1e-4, rtol=1e-3), "step %d: max abs %g" % (step, np.abs(got - want).max())
    print("step %d: logits within tolerance of pootc eval (max abs %.3g)" % (step, np.abs(got - want).max()))
    after = s.state("layers.0.k_cache")
    assert after[0, :, step].any() and not after[0, :, step + 1:].any(), "step %d wrote the wrong cache row" % step

# Refusals: each names what is wrong, and none changes a state.
cache = s.state("layers.1.v_cache")
tok = np.array([[5]], np.int32)
expect("bind", ["%tokens", "f32[1,1]", "i32[1,1]"], s.step, tokens=tok.astype(np.float32), pos=2)
expect("bind", ["%tokens", "i32[2,1]"], s.step, tokens=np.zeros((2, 1), np.int32), pos=2)
expect("range", ["%tokens", "300", "[0, 255]"], s.step, tokens=np.array([[300]], np.int32), pos=2)
expect("range", ["%pos", "64"], s.step, tokens=tok, pos=64)
# Python integers past the dtype's range are refused, not wrapped (2**32 + 5
# would run at position 5); a name with a NUL is refused, not cut to its
# prefix.
expect("range", ["%pos", str(2**32 + 5), "int32", "[-2147483648, 2147483647]"], s.step, tokens=tok, pos=2**32 + 5)
expect("bind", ["'tokens\\x00junk'", "NUL"], s.step, {"tokens\0junk": tok}, pos=2)
expect("bind", ["input %tokens is not bound"], s.step, pos=2)
expect("bind", ["%bogus"], s.step, tokens=tok, pos=2, bogus=np.zeros(1, np.int32))
expect("bind", ["%layers.0.k_cache is a state"], s.step, {"layers.0.k_cache": zeros["layers.0.k_cache"]}, tokens=tok,
       pos=2)
expect("bind", ["%tokens", "uint8"], s.step, tokens=tok.astype(np.uint8), pos=2)
assert np.array_equal(s.state("layers.1.v_cache"), cache), "a refused step changed a state"
expect("bind", ["%nope"], s.state, "nope")
expect("bind", ["%layers.0.k_cache", "f32[1,2,64,8]"], s.set_state, "layers.0.k_cache",
       np.zeros((1, 2, 64, 8), np.float32))
expect("bind", ["model.norm.weight", "f32[3]"], s.bind_weights, {"model.norm.weight": np.zeros(3, np.float32)})
expect("io", ["missing.safetensors"], s.bind_weights, os.path.join(out, "missing.safetensors"))
expect("io", ["missing.plan"], poot.Plan, os.path.join(out, "missing.plan"))
with open(plan_path, "rb") as f:
    raw = bytearray(f.read())
raw[len(raw) // 2] ^= 0xFF
with open(os.path.join(out, "corrupt.plan"), "wb") as f:
    f.write(raw)
expect("format", ["corrupt.plan"], poot.Plan, os.path.join(out, "corrupt.plan"))
# Signed plans: trust=KEY.pub (or a list) loads only a plan signed by one
# of the keys, and refuses an unsigned one or another key's, as kind "trust".
for name in ("rel", "other"):
    subprocess.run([pootc, "keygen", "-o", os.path.join(out, name)], check=True, stdout=subprocess.DEVNULL)
signed = os.path.join(out, "signed.plan")
subprocess.run([pootc, "compile", graph, "--device", os.path.join(src, "targets", "lavapipe.yaml"), "-o", signed,
                "--sign", os.path.join(out, "rel.key")], check=True)
rel, other = os.path.join(out, "rel.pub"), os.path.join(out, "other.pub")
assert poot.Plan(signed, trust=rel).inputs == plan.inputs
assert poot.Plan(signed, trust=[other, rel]).device == plan.device
expect("trust", ["signed.plan.sig", "not among the trusted keys", "other.pub"], poot.Plan, signed, trust=other)
expect("trust", ["tiny-llama-decode.plan", "not signed"], poot.Plan, plan_path, trust=rel)
expect("format", ["rel.key:1", "poot-ed25519-public-key"], poot.Plan, signed, trust=os.path.join(out, "rel.key"))
expect("usage", ["no public keys"], poot.Plan, signed, trust=[])
expect("usage", ["NUL"], poot.Plan, signed, trust=rel + "\0junk")
expect("usage", ["metal"], poot.Session, plan, backend="metal")

# The C API itself: null pointers and a byte count that does not fit.
lib = poot._lib
expect("usage", ["poot_session_step", "session is null"], poot._check, lib.poot_session_step(None, None, 0))
expect("usage", ["poot_plan_load", "path is null"], poot._check,
       lib.poot_plan_load(None, ctypes.byref(ctypes.c_void_p())))
expect("usage", ["poot_session_output", "name is null"], poot._check, lib.poot_session_output(s._handle, None, None))
info = poot._Tensor()
expect("usage", ["poot_plan_param: plan is null"], poot._check, lib.poot_plan_param(None, 0, 0, ctypes.byref(info)))
expect("usage", ["poot_plan_count: kind 9 is not a poot_kind"], poot._check,
       lib.poot_plan_count(plan._handle, 9, ctypes.byref(ctypes.c_size_t())))
expect("usage", ["index 1 is past the plan's 1"], poot._check,
       lib.poot_plan_param(plan._handle, 0, 1, ctypes.byref(info)))
shape = (ctypes.c_int64 * 2)(1, 1)
word = ctypes.c_int32(3)
short = poot._Tensor(b"tokens", 3, 2, shape, ctypes.addressof(word), 2)
expect("bind", ["%tokens is i32[1,1], 4 bytes, but 2 are given"], poot._check,
       lib.poot_session_step(s._handle, short, 1))
unnamed = poot._Tensor(None, 3, 2, shape, ctypes.addressof(word), 4)
expect("usage", ["a tensor's name is null"], poot._check, lib.poot_session_step(s._handle, unnamed, 1))
assert np.array_equal(s.state("layers.1.v_cache"), cache), "a refused step changed a state"

# The installed package, in a fresh prefix, imported without the build tree.
prefix = os.path.join(out, "prefix")
subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True, stdout=subprocess.DEVNULL)
site = [os.path.join(r, d) for r, ds, _ in os.walk(prefix) for d in ds if d == "site-packages"]
assert len(site) == 1, site
probe = """
import os, sys, numpy as np, poot
assert poot.__file__.startswith(sys.argv[1]) and os.path.realpath(poot._library.PATH).startswith(sys.argv[1])
s = poot.Session(sys.argv[2])
s.bind_weights(sys.argv[3])
np.save(sys.argv[4], s.step(tokens=np.array([[17]], np.int32), pos=0)["logits"])
"""
env = dict(os.environ, PYTHONPATH=site[0])
first = os.path.join(out, "installed.npy")
subprocess.run([sys.executable, "-c", probe, prefix, plan_path, weights, first], check=True, env=env)
installed = np.load(first)
assert np.allclose(installed, oracle("installed", 0, 17, zeros), atol=1e-4, rtol=1e-3), "the installed module differs"
print("the installed module agrees with pootc eval")
print("PASS")
