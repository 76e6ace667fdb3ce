"""The transformers side of the model benchmark, on the GPU host.

prepare PLANS WORK: builds LlamaForCausalLM from PLANS/config.json with seeded
random weights (f32, on the GPU), saves them as WORK/model.safetensors
(checkpoint names, which poot binds by name), the same weights rounded to
bf16 as a sharded directory with its index (WORK/bf16, save_pretrained), and
the token ids poot reads (WORK/tokens-*.npy, int32).

check PLANS WORK: loads the same weights, computes the reference logits and
compares poot's (WORK/out-NAME/logits.npy) with them, then times transformers
eager on the same GPU (CUDA events, median): a decode step at 512 and 4096
tokens of context (B = 1 and 8) and prefills of 512 and 2048 tokens.

compiled PLANS WORK: the decode step (B = 1, 512 tokens of context) of the
same model through `torch.compile(mode="reduce-overhead")` over a static
cache of 4096 tokens (CUDA graphs: PyTorch's own recipe for fast decoding),
in f32 and with the weights in bf16 (bf16 activations too, as PyTorch runs
a bf16 model). The static cache's attention reads all 4096 slots whatever
the context, so one figure stands for both.

Each prints one line a figure, `name value`, for run_h200.sh to tabulate.
"""
import inspect
import json
import statistics
import sys
import time

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.cache_utils import DynamicCache

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def build(plans):
    config = LlamaConfig(**json.load(open(f"{plans}/config.json")))
    config.torch_dtype = torch.float32
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).float().eval()
    return config, model


def tokens(config, shape, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, config.vocab_size, size=shape, dtype=np.int32)


def save_weights(model, work):
    """The f32 weights by their checkpoint names, which poot binds by name."""
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, f"{work}/model.safetensors")


def prepare(plans, work):
    config, model = build(plans)
    save_weights(model, work)
    # The same weights rounded to bf16, as transformers publishes a model:
    # shards of at most 2 GB with their index.
    model.to(torch.bfloat16).save_pretrained(f"{work}/bf16", max_shard_size="2GB")
    np.save(f"{work}/tokens-1.npy", tokens(config, (1, 1), 1))
    np.save(f"{work}/tokens-8.npy", tokens(config, (8, 1), 8))
    np.save(f"{work}/tokens-512.npy", tokens(config, (1, 512), 512))
    np.save(f"{work}/tokens-2048.npy", tokens(config, (1, 2048), 2048))


def timed(fn, reps):
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


@torch.inference_mode()
def check(plans, work):
    config, model = build(plans)
    model.load_state_dict(load_file(f"{work}/model.safetensors", device="cuda"))
    f32 = {k: v.clone() for k, v in model.state_dict().items()}
    # bf16 weights widened to f32, f32 activations: what the bf16 plan computes.
    rounded = {k: v.to(torch.bfloat16).float() for k, v in f32.items()}
    for name, tok in [("decode-b1", "1"), ("decode-b1-bf16", "1"), ("decode-b8", "8"), ("prefill-512", "512"),
                      ("prefill-2048", "2048")]:
        ids = torch.from_numpy(np.load(f"{work}/tokens-{tok}.npy")).long().cuda()
        model.load_state_dict(rounded if name.endswith("bf16") else f32)
        want = model(ids).logits.double()
        try:
            got = torch.from_numpy(np.load(f"{work}/out-{name}/logits.npy")).cuda().double().reshape(want.shape)
        except FileNotFoundError:
            print(f"{name}.check missing")
            continue
        rel = ((got - want).abs().max() / want.abs().max()).item()
        same = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
        print(f"{name}.rel_err {rel:.3g}")
        print(f"{name}.argmax_agree {same:.4f}")
    model.load_state_dict(f32)
    del f32, rounded  # two copies of the weights: the eager timings below need the room
    torch.cuda.empty_cache()
    for length in (512, 4096):
        for batch in (1, 8):
            ctx = torch.from_numpy(tokens(config, (batch, length), 7)).long().cuda()
            cache = DynamicCache()
            model(ctx[:, : length - 1], past_key_values=cache, use_cache=True)
            nxt = ctx[:, length - 1 :]
            ms = timed(lambda: model(nxt, past_key_values=cache, use_cache=True), 20)
            print(f"torch.decode-b{batch}{'' if length == 512 else '-ctx4096'}.ms {ms:.3f}")
            del cache
    for n in (512, 2048):
        ids = torch.from_numpy(np.load(f"{work}/tokens-{n}.npy")).long().cuda()
        model(ids)
        print(f"torch.prefill-{n}.ms {timed(lambda: model(ids), 5):.3f}")


def static_cache(config, length, dtype, batch=1):
    """A StaticCache of `length` tokens for `batch` rows, whichever of its
    constructor's spellings this transformers has."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"config": config, "max_cache_len": length}
    kw.update({k: v for k, v in (("max_batch_size", batch), ("device", "cuda"), ("dtype", dtype)) if k in params})
    return StaticCache(**kw)


def compiled_decode(model, config, dtype, batch=1):
    """(compile seconds, median ms) of one decode step of `batch` rows at 512
    tokens of context through torch.compile(mode="reduce-overhead") over a
    static cache of 4096 tokens."""
    ctx = torch.from_numpy(tokens(config, (batch, 512), 7)).long().cuda()
    cache = static_cache(config, 4096, dtype, batch)
    model(ctx[:, :511], past_key_values=cache, cache_position=torch.arange(511, device="cuda"), use_cache=True)
    step = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    nxt, pos = ctx[:, 511:], torch.tensor([511], device="cuda")
    start = time.time()
    for _ in range(3):
        step(input_ids=nxt, past_key_values=cache, cache_position=pos, use_cache=True)
    torch.cuda.synchronize()
    seconds = time.time() - start
    return seconds, timed(lambda: step(input_ids=nxt, past_key_values=cache, cache_position=pos, use_cache=True), 20)


@torch.inference_mode()
def compiled(plans, work):
    config, model = build(plans)
    model.load_state_dict(load_file(f"{work}/model.safetensors", device="cuda"))
    for label, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        model.to(dtype)
        try:
            seconds, ms = compiled_decode(model, config, dtype)
            print(f"torch.compile-{label}.compile_s {seconds:.1f}")
            print(f"torch.compile-decode-b1-{label}.ms {ms:.3f}")
        except Exception as e:  # report it and go on to the next dtype
            print(f"torch.compile-{label}.failed {type(e).__name__}: {str(e)[:300]!r}")
        torch._dynamo.reset()


if __name__ == "__main__":
    {"prepare": prepare, "check": check, "compiled": compiled}[sys.argv[1]](sys.argv[2], sys.argv[3])
