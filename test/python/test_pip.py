# pip install of the Python module from the source tree (python/pyproject.toml)
# into a fresh virtual environment, with no package index (--no-index: the
# build backend needs nothing beyond the standard library; numpy comes from
# Debian through --system-site-packages). Then, from outside the source and
# build trees and with no PYTHONPATH, the installed module loads a plan
# compiled for lavapipe and runs a step of it, whose logits must equal
# `pootc eval`'s on the same weights; and the wheel must work once the
# libpoot it was built from is out of reach. Finally a build with no
# libpoot to package is refused, naming what is missing. Usage:
# test_pip.py BUILD
import os
import shutil
import subprocess
import sys

import numpy as np

build = os.path.abspath(sys.argv[1])
src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(build, "test", "python-pip")
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "POOT_LIBRARY")}
env.setdefault("MESA_SHADER_CACHE_DIR", os.path.join(build, "test", "mesa-shader-cache"))
pootc = os.path.join(build, "tools", "pootc", "pootc")
library = os.path.join(build, "lib", "capi", "libpoot.so")


def run(*cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


graph = os.path.join(src, "examples", "graphs", "tiny-llama-decode.pg")
plan = os.path.join(out, "d.plan")
weights = os.path.join(out, "w.safetensors")
run(pootc, "compile", graph, "--device", "lavapipe", "-o", plan)
run(pootc, "weights", graph, "-o", weights, "--seed", "3")
np.save(os.path.join(out, "tokens.npy"), np.array([[17]], np.int32))
run(pootc, "eval", graph, "--weights", weights, "--input", "tokens=" + os.path.join(out, "tokens.npy"), "--slot",
    "pos=0", "--output-dir", out)

venv = os.path.join(out, "env")
run(sys.executable, "-m", "venv", "--system-site-packages", venv)
python = os.path.join(venv, "bin", "python")
# A copy of the build's libpoot, deleted after the install: the wheel holds its own.
copy = os.path.join(out, "libpoot-copy.so")
shutil.copy(library, copy)
run(python, "-m", "pip", "install", "--no-index", "--no-cache-dir", os.path.join(src, "python"),
    env=dict(env, POOT_LIBRARY=copy))
os.remove(copy)
step = """
import sys, numpy as np, poot
assert poot.__file__.startswith(sys.prefix), poot.__file__
s = poot.Session(poot.Plan(sys.argv[1]), backend="vulkan")
s.bind_weights(sys.argv[2])
np.save(sys.argv[3], s.step(tokens=np.array([[17]], np.int32), pos=0)["logits"])
print("installed poot ran a step:", poot.__file__)
"""
got_path = os.path.join(out, "got.npy")
run(python, "-c", step, plan, weights, got_path, env=env, cwd=out)
got, want = np.load(got_path), np.load(os.path.join(out, "logits.npy"))
assert np.abs(want).max() > 0.01, "the oracle's logits are all but zero: nothing is compared"
assert np.allclose(got, want, atol=1e-4, rtol=1e-3), "max abs %g" % np.abs(got - want).max()

# No libpoot: refused before anything is installed, naming the file.
missing = os.path.join(out, "missing", "libpoot.so")
failed = subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-cache-dir", os.path.join(src, "python")],
                        env=dict(env, POOT_LIBRARY=missing), capture_output=True, text=True)
assert failed.returncode != 0 and "POOT_LIBRARY=" + missing + ": no such file" in failed.stdout + failed.stderr, \
    failed.stdout + failed.stderr
print("PASS")
