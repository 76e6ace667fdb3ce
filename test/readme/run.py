# The README's quick start, as written: every ```sh block after a
# "<!-- ctest readme" comment, in order, in one bash -euo pipefail shell,
# from a folder standing for the repository root: the source tree's entries
# linked in, and build/ holding links to this build's tools and library
# (the README's build/start lands in that folder, not in a build tree of
# yours). python/ is copied, not linked, so that pip's build finds the
# library through that folder's build/ whichever build tree this is. Fails when a command fails or when
# the README has fewer than four marked blocks (a marker lost in an edit).
# Usage: run.py BUILD
import os
import re
import shutil
import subprocess
import sys

build = os.path.abspath(sys.argv[1])
src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
root = os.path.join(build, "test", "readme")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(os.path.join(root, "build"))
for entry in os.listdir(src):
    if entry == "python":
        shutil.copytree(os.path.join(src, entry), os.path.join(root, entry))
    elif entry not in ("build", ".git"):
        os.symlink(os.path.join(src, entry), os.path.join(root, entry))
for entry in ("tools", "lib"):
    os.symlink(os.path.join(build, entry), os.path.join(root, "build", entry))

with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
    blocks = re.findall(r"<!-- ctest readme[^\n]*-->\n```sh\n(.*?)```", f.read(), re.S)
if len(blocks) < 4:
    sys.exit("FAIL: README.md has %d blocks marked for ctest readme, wanted at least 4" % len(blocks))
script = "".join(blocks)
print(script, flush=True)
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "POOT_LIBRARY")}
# `python3` is Debian's, as on a fresh Debian 12 machine (this one's, whose
# numpy the venv sees), not another interpreter earlier on the PATH.
env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
env.setdefault("MESA_SHADER_CACHE_DIR", os.path.join(build, "test", "mesa-shader-cache"))
code = subprocess.call(["bash", "-euo", "pipefail", "-c", script], cwd=root, env=env)
print("PASS" if code == 0 else "FAIL: the quick start exits %d" % code)
sys.exit(code)
