# The lit configuration: every .test and .pg file under test/lit is a test
# (inputs that are not tests live in Inputs/ folders);
# %pootc runs the compiler driver, %poot the runtime's tool, %examples and %targets name the source
# tree's example graphs and device profiles, %expect-exit checks a command's exit code,
# %plan-edit changes a plan file's bytes and %make-weights writes a checkpoint for a
# graph's weights. FileCheck and not come from LLVM 19.
import os
import shutil
import subprocess
import lit.formats

config.name = "poot"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".test", ".pg"]
config.excludes = ["Inputs", "expect-exit.py", "plan-edit.py", "make-weights.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.build_root, "test", "lit-out")

config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, config.environment.get("PATH", "/usr/bin:/bin")])
# The sanitizer build (a Debug build, several times slower) leaves out the
# tests marked `UNSUPPORTED: sanitized`: sweeps over many example graphs or
# families whose host code the other tests run under the sanitizers too.
if config.sanitized:
    config.available_features.add("sanitized")
config.substitutions.append(("%pootc", config.pootc))
config.substitutions.append(("%poot\\b", os.path.join(config.build_root, "tools", "poot", "poot")))
# Vulkan drivers (lavapipe) must not write their shader cache under $HOME.
config.environment["MESA_SHADER_CACHE_DIR"] = os.environ.get(
    "MESA_SHADER_CACHE_DIR", os.path.join(config.build_root, "test", "mesa-shader-cache"))
config.substitutions.append(("%examples", os.path.join(config.source_root, "examples")))
config.substitutions.append(("%targets", os.path.join(config.source_root, "targets")))
config.substitutions.append(("%expect-exit", "python3 " + os.path.join(config.test_source_root, "expect-exit.py")))
config.substitutions.append(("%plan-edit", "python3 " + os.path.join(config.test_source_root, "plan-edit.py")))
config.substitutions.append(("%make-weights", "python3 " + os.path.join(config.test_source_root, "make-weights.py")))
# The serve test with the official openai npm package installs it from the
# registry: it runs where node and npm are and the registry gives the
# package (asked once here, as the published-fixture tests skip where it
# does not), with the host's settings for reaching the registry (npm's
# config under HOME, proxies, extra CAs).
for var in ("HOME", "NODE_EXTRA_CA_CERTS", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
            "no_proxy", "npm_config_registry"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
if shutil.which("node") and shutil.which("npm"):
    try:
        asked = subprocess.run(["npm", "view", "openai@4.95.0", "version"], capture_output=True, text=True,
                               timeout=60, env={**os.environ, **config.environment})
        if asked.returncode == 0 and asked.stdout.strip() == "4.95.0":
            config.available_features.add("npm")
    except subprocess.TimeoutExpired:
        pass
