# The engine from Python (poot.Engine over libpoot's poot_engine_* calls) on
# lavapipe, with the tiny Llama's paged plans of test/lit/generate: three
# prompts of different lengths generate, streamed step by step, exactly the
# tokens `poot generate` writes for them (greedy, and seeded sampling), whose
# greedy tokens test/lit/generate checks against the oracle; a stop id ends
# a request at that token; with a mixed plan too the greedy tokens are the
# same; a cancelled request, queued or running, stops
# with a "cancelled" event, its tokens a prefix of its full run, and the
# others' tokens do not change; a LoRA adapter loaded into the engine gives
# the tokens of its merged weights, and loaded again under its name with
# other weights (a hot reload) serves the requests submitted from then on
# while one submitted before finishes on the old; every refusal has its kind
# and a message naming what is wrong, and queues nothing. Usage:
# test_engine.py BUILD, with the build tree's package on PYTHONPATH.
import json
import os
import shutil
import subprocess
import sys

import poot

build = os.path.abspath(sys.argv[1])
src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(build, "test", "python-engine")
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
os.environ.setdefault("MESA_SHADER_CACHE_DIR", os.path.join(build, "test", "mesa-shader-cache"))
pootc = os.path.join(build, "tools", "pootc", "pootc")
poot_tool = os.path.join(build, "tools", "poot", "poot")
config = os.path.join(src, "examples", "models", "tiny-llama.json")
target = os.path.join(src, "targets", "lavapipe.yaml")
paths = {}
for phase, extra in (("prefill", ["--batch", "2", "--tokens", "8"]), ("decode", ["--live", "--batch", "3"]),
                     ("mixed", ["--live", "--batch", "3", "--tokens", "12"])):
    graph, plan = os.path.join(out, phase + ".pg"), os.path.join(out, phase + ".plan")
    subprocess.run([pootc, "trace", config, "--phase", phase, "--kv", "paged", "--capacity", "48", "--pool-slots",
                    "256", "-o", graph] + extra, check=True)
    subprocess.run([pootc, "compile", graph, "--device", target, "-o", plan], check=True)
    paths[phase] = plan
weights = os.path.join(out, "w.safetensors")
subprocess.run([sys.executable, os.path.join(src, "test", "lit", "make-weights.py"), os.path.join(out, "prefill.pg"),
                weights, "--seed", "5"], check=True)
prompts = [list(range(5)), list(range(30, 41)), list(range(60, 80))]


def generate(max_new, *more, weights=weights):
    """poot generate's tokens for the prompts."""
    with open(os.path.join(out, "prompts.txt"), "w") as f:
        f.write("".join(" ".join(map(str, p)) + "\n" for p in prompts))
    jsonl = os.path.join(out, "out.jsonl")
    subprocess.run([poot_tool, "generate", paths["prefill"], paths["decode"], "--prompts",
                    os.path.join(out, "prompts.txt"), "--weights", weights, "--max-new", str(max_new), "--output",
                    jsonl] + list(more), check=True, stdout=subprocess.DEVNULL)
    with open(jsonl) as f:
        return [json.loads(line)["tokens"] for line in f]


def expect(kind, words, fn, *args, **kw):
    """fn(*args) raises poot.Error of `kind` whose message holds every word."""
    try:
        fn(*args, **kw)
    except poot.Error as e:
        assert e.kind == kind, "wanted a %s error, got %s: %s" % (kind, e.kind, e)
        for w in words:
            assert w in str(e), "%r is not in the message %r" % (w, str(e))
        print("refused as %s: %s" % (kind, e))
        return
    raise AssertionError("%s%r was not refused" % (fn.__name__, args))


def run(engine, requests, cancel_after=None):
    """Streams every request's tokens and events; cancel_after = (request,
    n) cancels that request once it has n tokens."""
    tokens, finish, polls = {r: [] for r in requests}, {}, 0
    for request, token, end in engine.stream():
        polls += 1
        assert request not in finish, "an event after request %d ended" % request
        if end == "cancelled":
            assert token == -1
        else:
            tokens[request].append(token)
        if end:
            finish[request] = end
        if cancel_after and request == cancel_after[0] and len(tokens[request]) == cancel_after[1] and not end:
            assert engine.cancel(request)
    assert set(finish) == set(requests), (finish, requests)
    return tokens, finish


engine = poot.Engine(paths["prefill"], paths["decode"], weights=weights)
greedy = generate(6)
ids = [engine.submit(p, max_new=6) for p in prompts]
assert ids == [0, 1, 2], ids
tokens, finish = run(engine, ids)
assert [tokens[i] for i in ids] == greedy, (tokens, greedy)
assert all(finish[i] == "length" for i in ids), finish
print("greedy: the engine's tokens equal poot generate's", greedy)

# With the mixed plan: the same tokens, and steps where the shorter prompts'
# tokens were sampled beside the longest prompt's rest.
mixed = poot.Engine(paths["prefill"], paths["decode"], weights=weights, mixed=paths["mixed"])
ids = [mixed.submit(p, max_new=6) for p in prompts]
tokens, _ = run(mixed, ids)
assert [tokens[i] for i in ids] == greedy, (tokens, greedy)
print("mixed: the engine's tokens equal poot generate's without the mixed plan")
expect("bind", ["a mixed plan is traced with --phase mixed"], poot.Engine, paths["prefill"], paths["decode"],
       weights=weights, mixed=paths["decode"])

sampled = generate(6, "--temperature", "0.8", "--top-p", "0.9", "--top-k", "12", "--min-p", "0.01", "--seed", "3")
assert sampled != greedy, "sampling drew the greedy tokens: nothing is compared"
# Requests draw from generators seeded by the seed and their number, which
# poot generate counts from 0: a fresh engine numbers them the same.
fresh = poot.Engine(paths["prefill"], paths["decode"], weights=weights)
ids = [fresh.submit(p, max_new=6, temperature=0.8, top_p=0.9, top_k=12, min_p=0.01, seed=3) for p in prompts]
tokens, _ = run(fresh, ids)
assert [tokens[i] for i in ids] == sampled, (tokens, sampled)
print("sampling: the engine's tokens equal poot generate's", sampled)

# A stop id ends its request at that token; the others run on.
ids = [engine.submit(p, max_new=6, stop=[greedy[1][2]] if i == 1 else []) for i, p in enumerate(prompts)]
tokens, finish = run(engine, ids)
assert tokens[ids[1]] == greedy[1][:greedy[1].index(greedy[1][2]) + 1] and finish[ids[1]] == "stop", tokens
assert tokens[ids[0]] == greedy[0] and tokens[ids[2]] == greedy[2], tokens

# Cancels: the third request while it is queued (before any step admits
# it), the first while it runs, after two tokens.
ids = [engine.submit(p, max_new=6) for p in prompts]
assert engine.cancel(ids[2]) and not engine.cancel(ids[2])
tokens, finish = run(engine, ids, cancel_after=(ids[0], 2))
assert finish == {ids[0]: "cancelled", ids[1]: "length", ids[2]: "cancelled"}, finish
assert tokens[ids[0]] == greedy[0][:2] and tokens[ids[2]] == [], tokens
assert tokens[ids[1]] == greedy[1], tokens
print("cancel: a running and a queued request stopped, the other's tokens unchanged")

# Adapters: a (on q and v) and b (on k and down), each checked against its
# merged weights run by poot generate. a is loaded, a request on it runs a
# step, then the name a is loaded again with b's weights: the running
# request finishes on a's, the one submitted after runs on b's.
adapters = {}
for name, extra in (("a", []), ("b", ["--seed", "12", "--target", "self_attn.k_proj.weight", "--target",
                                      "mlp.down_proj.weight"])):
    subprocess.run([sys.executable, os.path.join(src, "test", "lit", "generate", "Inputs", "make-adapter.py"),
                    os.path.join(out, "prefill.pg"), weights, os.path.join(out, "lora-" + name),
                    os.path.join(out, "merged-" + name + ".safetensors")] + extra, check=True)
    adapters[name] = generate(6, weights=os.path.join(out, "merged-" + name + ".safetensors"))
assert adapters["a"] != greedy and adapters["b"] != greedy and adapters["a"] != adapters["b"]
engine.load_adapter("a", os.path.join(out, "lora-a"))
first = engine.submit(prompts[2], max_new=6, adapter="a")
base = engine.submit(prompts[2], max_new=6)
assert engine.step()
engine.load_adapter("a", os.path.join(out, "lora-b"))
second = engine.submit(prompts[2], max_new=6, adapter="a")
tokens, _ = run(engine, [first, base, second])
assert tokens[first] == adapters["a"][2], (tokens[first], adapters["a"][2])
assert tokens[base] == greedy[2], (tokens[base], greedy[2])
assert tokens[second] == adapters["b"][2], (tokens[second], adapters["b"][2])
print("adapters: a's and, after the reload, b's tokens equal their merged weights'")

# Refusals, none of which queues anything.
before = engine.submit([1], max_new=1)
expect("range", ["token 1 of the prompt is 256", "[0, 256)"], engine.submit, [3, 256])
expect("range", ["passes the capacity of 48"], engine.submit, [1] * 40, max_new=10)
expect("usage", ["at least one token", "asks for 0"], engine.submit, [1], max_new=0)
expect("usage", ["at least one token"], engine.submit, [])
expect("usage", ["temperature", "-1"], engine.submit, [1], temperature=-1.0)
expect("usage", ["top_p", "(0, 1]"], engine.submit, [1], top_p=1.5)
expect("usage", ["top_k", "-2"], engine.submit, [1], top_k=-2)
expect("usage", ["min_p", "[0, 1]"], engine.submit, [1], min_p=2.0)
expect("usage", ["presence_penalty", "[-2, 2]"], engine.submit, [1], presence_penalty=3.0)
expect("usage", ["no adapter 'x'"], engine.submit, [1], adapter="x")
expect("range", ["int32"], engine.submit, [2**40])
assert engine.submit([1], max_new=1) == before + 1, "a refused request was numbered"
expect("usage", ["no request 99"], engine.cancel, 99)
expect("io", ["missing"], engine.load_adapter, "a", os.path.join(out, "missing"))
expect("bind", ["prefill.plan", "a decode plan takes one token a row, this one 8"], poot.Engine, paths["decode"],
       paths["prefill"], weights=weights)
expect("io", ["nothere.safetensors"], poot.Engine, paths["prefill"], paths["decode"],
       weights=os.path.join(out, "nothere.safetensors"))
expect("usage", ["metal"], poot.Engine, paths["prefill"], paths["decode"], backend="metal")
lib = poot._lib
expect("usage", ["poot_engine_step", "engine is null"], poot._check, lib.poot_engine_step(None, None))
print("PASS")
