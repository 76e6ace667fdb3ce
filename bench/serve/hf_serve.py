#!/usr/bin/env python3
"""The transformers side of the serving benchmark (NOTES.md), on the GPU
host: the traces `poot serve` answered, served as a transformers 5 user
would, on the same weights, with the figures replay.py gives.

WEIGHTS: the bf16 model folder (bf16_side.py prepare's WORK/bf16), loaded
with from_pretrained in bf16 and moved to the GPU (no device_map), with the
first attention implementation of HF_ATTN (default "flash_attention_2,sdpa";
flash_attention_2 only where the flash_attn package is installed) that
loads; continuous batching runs it as its paged variant.

One continuous-batching manager (init_continuous_batching, default
ContinuousBatchingConfig, warmed up once: its CUDA graphs) serves, in turn:
  WARMUP (a short trace, not reported), then each TRACE with its arrivals:
    each request goes to add_request at its arrival time, greedy, with the
    max_tokens its trace line asks and no end-of-sequence id, so every
    request makes exactly that many tokens, as `poot serve --eos VOCAB`
    does; per-token timestamps (record_timestamps) give the time to the
    first token (from the request's creation) and the time per output token
    (hf_cb.NAME.*);
  then the first TRACE's requests all at once (arrivals ignored), the
    offline upper bound: what generate_batch does, but with each request's
    own max_new_tokens, which generate_batch cannot take (hf_batch.*).
With HF_GENERATE_BATCH=1, or when the manager could not be made, generate_batch itself on those prompts, one
max_new_tokens for all (the trace's mean, so about the same number of
tokens), its own manager and warm-up (hf_generate_batch.*; wall from the
first request's creation to the last token, the warm-up left out).

Each phase writes WORK/PREFIX.jsonl (replay.py's fields) and prints
summarize.py's `name value` lines; a phase that fails prints
`PREFIX.failed ERROR` and the next one runs. A phase waits at most
HF_PHASE_TIMEOUT seconds (default 90) past its last arrival; requests not
finished by then are cancelled and count as failed.

usage: hf_serve.py WEIGHTS WORK WARMUP.jsonl TRACE.jsonl [TRACE.jsonl ...]
"""
import importlib.util
import inspect
import json
import os
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import results as summarize  # noqa: E402

PHASE_TIMEOUT = float(os.environ.get("HF_PHASE_TIMEOUT", "90"))


def say(line):
    print(line, flush=True)


def load_trace(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def trace_name(path):
    return os.path.basename(path)[: -len(".jsonl")] if path.endswith(".jsonl") else os.path.basename(path)


def load_model(weights):
    import torch
    from transformers import AutoModelForCausalLM

    for impl in [a.strip() for a in os.environ.get("HF_ATTN", "flash_attention_2,sdpa").split(",") if a.strip()]:
        if impl.startswith("flash_attention") and importlib.util.find_spec("flash_attn") is None:
            say(f"hf.attn_skipped {impl} (no flash_attn package)")
            continue
        try:
            start = time.perf_counter()
            model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.bfloat16, attn_implementation=impl)
            model = model.cuda().eval()
            say(f"hf.load_s {time.perf_counter() - start:.1f}")
            say(f"hf.attn_implementation {model.config._attn_implementation}")
            return model
        except Exception as e:  # the next implementation
            say(f"hf.attn_failed {impl} {type(e).__name__}: {str(e)[:300]!r}")
    raise RuntimeError("no attention implementation of HF_ATTN loaded")


def generation_config(max_new_tokens):
    from transformers import GenerationConfig

    # Greedy, no end-of-sequence id (continuous batching takes None as -1,
    # none), no other logits processor.
    return GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=None)


def workload_hints(traces):
    try:
        from transformers.generation.continuous_batching.utils import WorkloadHints
    except ImportError:
        return None
    reqs = [q for t in traces for q in t]
    hints = {"max_prompt_length": max(len(q["prompt"]) for q in reqs),
             "max_generated_length": max(q["max_tokens"] for q in reqs),
             "num_requests": max(len(t) for t in traces)}
    fields = getattr(WorkloadHints, "__dataclass_fields__", hints)
    return WorkloadHints(**{k: v for k, v in hints.items() if k in fields})


def record(gen, created, t0):
    """replay.py's fields of one finished (or failed) GenerationOutput."""
    stamps = getattr(gen, "timestamps", None) or []
    error = getattr(gen, "error", None)
    if not stamps and not error:
        error = "no token timestamps"
    return {"start": created - t0, "first": stamps[0] - t0 if stamps else None,
            "end": (stamps[-1] if stamps else time.perf_counter()) - t0,
            "completion_tokens": len(gen.generated_tokens), "error": error}


def serve_trace(manager, reqs, prefix, use_arrivals):
    """Submits each request at its arrival (or all at once), waits for them,
    returns replay.py's records in trace order."""
    n = len(reqs)
    ids = [f"{prefix}-{i}" for i in range(n)]
    created = {}
    t0 = time.perf_counter()
    submit_error = []

    # The options this add_request takes (all of them in 5.17's source).
    params = inspect.signature(manager.add_request).parameters
    extra = {k: v for k, v in (("record_timestamps", True), ("eos_token_id", -1)) if k in params}

    def submit():
        try:
            for rid, q in zip(ids, reqs):
                if use_arrivals:
                    delay = t0 + q["arrival"] - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                created[rid] = time.perf_counter()
                manager.add_request(input_ids=q["prompt"], request_id=rid, max_new_tokens=q["max_tokens"], **extra)
        except Exception as e:
            submit_error.append(f"{type(e).__name__}: {e}")

    thread = threading.Thread(target=submit, daemon=True)
    thread.start()
    last_arrival = reqs[-1]["arrival"] if use_arrivals else 0.0
    deadline = t0 + last_arrival + PHASE_TIMEOUT
    done = {}
    while len(done) < n and time.perf_counter() < deadline and not submit_error:
        gen = manager.get_result(timeout=0.2)
        if gen is None:
            if not getattr(manager, "is_running", lambda: True)():
                submit_error.append("the generation thread is not running")
            continue
        status = getattr(gen.status, "name", str(gen.status))  # RequestStatus: FINISHED or FAILED end it
        if gen.request_id in created and (gen.is_finished() or status in ("FINISHED", "FAILED")):
            done[gen.request_id] = gen
    thread.join(timeout=1)
    out = []
    for rid, q in zip(ids, reqs):
        gen = done.get(rid)
        if gen is not None:
            r = record(gen, getattr(gen, "created_time", None) or created[rid], t0)
        else:
            if rid in created:
                manager.cancel_request(rid)
            why = submit_error[0] if submit_error else f"not finished {PHASE_TIMEOUT:.0f} s after the last arrival"
            r = {"start": created.get(rid, t0) - t0, "first": None, "end": time.perf_counter() - t0,
                 "completion_tokens": 0, "error": why}
        out.append({"arrival": q["arrival"] if use_arrivals else 0.0, **r, "prompt_tokens": len(q["prompt"]),
                    "max_tokens": q["max_tokens"]})
    return out


def write_and_summarize(work, prefix, records, trace_path):
    path = os.path.join(work, prefix + ".jsonl")
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    summarize(prefix, path, trace_path)


def phase(name, fn):
    start = time.perf_counter()
    try:
        fn()
    except Exception as e:
        say(f"{name}.failed {type(e).__name__}: {str(e)[:500]!r}")
        traceback.print_exc()
    say(f"phase.{name}_s {time.perf_counter() - start:.1f}")


def generate_batch(model, work, trace_path):
    """generate_batch itself: one max_new_tokens for every prompt."""
    reqs = load_trace(trace_path)
    mean = round(sum(q["max_tokens"] for q in reqs) / len(reqs))
    kw = {"record_timestamps": True, "progress_bar": False}
    params = inspect.signature(model.generate_batch).parameters
    kw = {k: v for k, v in kw.items() if k in params}
    start = time.perf_counter()
    outs = model.generate_batch(inputs=[q["prompt"] for q in reqs], generation_config=generation_config(mean), **kw)
    say(f"hf_generate_batch.call_s {time.perf_counter() - start:.1f}")
    say(f"hf_generate_batch.max_new_tokens {mean}")
    gens = [outs.get(f"req_{i}") for i in range(len(reqs))]
    t0 = min(g.created_time for g in gens if g is not None)
    records = []
    for q, g in zip(reqs, gens):
        r = record(g, g.created_time, t0) if g is not None else {
            "start": 0.0, "first": None, "end": 0.0, "completion_tokens": 0, "error": "no result"}
        records.append({"arrival": 0.0, **r, "prompt_tokens": len(q["prompt"]), "max_tokens": mean})
    path = os.path.join(work, "hf_generate_batch.jsonl")
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    summarize("hf_generate_batch", path, None)


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    weights, work, warmup_path, trace_paths = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    os.makedirs(work, exist_ok=True)
    import torch
    import transformers

    say(f"hf.torch {torch.__version__}")
    say(f"hf.transformers {transformers.__version__}")
    say(f"hf.gpu {torch.cuda.get_device_name(0).replace(' ', '_')}")
    traces = {p: load_trace(p) for p in [warmup_path, *trace_paths]}
    state = {}

    def load():
        state["model"] = load_model(weights)

    phase("hf_load", load)
    if "model" not in state:
        return 1
    model = state["model"]

    def init():
        gc = generation_config(max(q["max_tokens"] for t in traces.values() for q in t))
        kw = {"generation_config": gc}
        hints = workload_hints(list(traces.values()))
        if hints is not None and "workload_hints" in inspect.signature(model.init_continuous_batching).parameters:
            kw["workload_hints"] = hints
        manager = model.init_continuous_batching(**kw)
        start = time.perf_counter()
        if hasattr(manager, "warmup"):
            manager.warmup()
        say(f"hf_cb.warmup_s {time.perf_counter() - start:.1f}")
        manager.start()
        state["manager"] = manager
        say(f"hf_cb.attn_implementation {model.config._attn_implementation}")

    phase("hf_cb_init", init)
    manager = state.get("manager")
    if manager is not None:
        def run(path, prefix, use_arrivals, report=True):
            records = serve_trace(manager, traces[path], prefix, use_arrivals)
            if report:
                write_and_summarize(work, prefix, records, None)

        phase("hf_cb_warmup_trace", lambda: run(warmup_path, "hf_cb.warmup", True, report=False))
        try:
            cfg = manager.continuous_batching_config
            say(f"hf_cb.num_blocks {getattr(cfg, 'num_blocks', None)}")
            say(f"hf_cb.block_size {getattr(cfg, 'block_size', None)}")
            say(f"hf_cb.max_batch_tokens {getattr(cfg, 'max_batch_tokens', None)}")
            say(f"hf_cb.max_requests_per_batch {getattr(cfg, 'max_requests_per_batch', None)}")
            say(f"hf_cb.use_cuda_graph {getattr(cfg, 'use_cuda_graph', None)}")
            say(f"hf_cb.use_async_batching {getattr(cfg, 'use_async_batching', None)}")
        except Exception as e:
            say(f"hf_cb.config_unread {type(e).__name__}")
        for path in trace_paths:
            phase(f"hf_cb.{trace_name(path)}", lambda p=path: run(p, f"hf_cb.{trace_name(p)}", True))
        phase("hf_batch", lambda: run(trace_paths[0], "hf_batch", False))
        phase("hf_cb_stop", lambda: manager.stop(block=True, timeout=60))
    if os.environ.get("HF_GENERATE_BATCH") == "1" or manager is None:  # at least generate_batch's figures
        phase("hf_generate_batch", lambda: generate_batch(model, work, trace_paths[0]))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # a generation thread left running must not hold the process
