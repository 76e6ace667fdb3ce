"""The transformers side of the bf16 model benchmark (run_bf16_h200.sh), on
the GPU host. Reuses hf_side.py's model, token and timing helpers.

prepare PLANS WORK: builds LlamaForCausalLM from PLANS/config.json with
hf_side's seeded random weights and saves them rounded to bf16 as
transformers publishes a model (WORK/bf16, save_pretrained shards with their
index), and the token ids poot reads (WORK/tokens-{1,8,32,512,2048}.npy).

check PLANS WORK: fidelity and speed of transformers in bf16 on the same
weights. The reference is the model in f32 on the bf16 weights widened
(exact); transformers' own bf16 run (eager) is the yardstick. For the poot
outputs WORK/out-NAME/logits.npy of the bf16 plans at pos 0 it prints the
largest and the root-mean-square distance to the reference of poot and of
transformers-bf16, their ratio, and how many greedy tokens of each equal
the reference's. Then times transformers bf16 eager (CUDA events, median of
20 decode steps after a prefill of the context, or of 5 prefills): decode
B = 1, 8 and 32 at 512 tokens of context, B = 1 at 4096, prefills of 512
and 2048 tokens; and (unless TORCH_COMPILE=0) the B = 1 decode through
torch.compile(mode="reduce-overhead") over a static cache of 4096 tokens.

compiled PLANS WORK [B...]: the bf16 model from WORK/bf16 (as check loads
it) through torch.compile(mode="reduce-overhead") over a static cache: the
decode step of B rows at 512 tokens of context (default B = 8 and 32), what
a user serving a batch with transformers would run; each batch size is
compiled afresh.

Each prints one line a figure, `name value`.
"""
import os
import sys

import numpy as np
import torch
from transformers import LlamaForCausalLM
from transformers.cache_utils import DynamicCache

from hf_side import build, compiled_decode, timed, tokens

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def prepare(plans, work):
    config, model = build(plans)
    model.to(torch.bfloat16).save_pretrained(f"{work}/bf16", max_shard_size="2GB")
    for shape in ((1, 1), (8, 1), (32, 1), (1, 512), (1, 2048)):
        n = shape[0] * shape[1]
        np.save(f"{work}/tokens-{n if shape[1] > 1 else shape[0]}.npy", tokens(config, shape, n))


def distances(got, ref):
    d = (got - ref).abs()
    agree = (got.argmax(-1) == ref.argmax(-1)).sum().item()
    return d.max().item(), d.pow(2).mean().sqrt().item(), agree


@torch.inference_mode()
def check(plans, work):
    # Each model as a user loads it: from_pretrained in its dtype, then moved
    # to the GPU (no device_map, whose dispatch hooks cost time every step).
    # Not model.to(bfloat16) of the f32 model: that would round its rotary
    # inverse frequencies to bf16 too, which a model loaded in bf16 keeps f32.
    cases = [("bf16-decode-b1", "1"), ("bf16-decode-b8", "8"), ("bf16-decode-b32", "32"), ("bf16-prefill-512", "512")]
    ids = {tok: torch.from_numpy(np.load(f"{work}/tokens-{tok}.npy")).long().cuda() for _, tok in cases}
    model = LlamaForCausalLM.from_pretrained(f"{work}/bf16", dtype=torch.float32).cuda().eval()
    ref = {tok: model(i).logits.double() for tok, i in ids.items()}
    del model
    torch.cuda.empty_cache()
    model = LlamaForCausalLM.from_pretrained(f"{work}/bf16", dtype=torch.bfloat16).cuda().eval()
    print(f"hf_bf16.inv_freq_dtype {model.model.rotary_emb.inv_freq.dtype}")
    native = {tok: model(i).logits.double() for tok, i in ids.items()}
    for name, tok in cases:
        try:
            got = torch.from_numpy(np.load(f"{work}/out-{name}/logits.npy")).cuda().double().reshape(ref[tok].shape)
        except FileNotFoundError:
            print(f"{name}.check missing")
            continue
        ours, theirs = distances(got, ref[tok]), distances(native[tok], ref[tok])
        rows = ref[tok].numel() // ref[tok].shape[-1]
        print(f"{name}.poot_max {ours[0]:.4g} {name}.poot_rms {ours[1]:.4g} {name}.poot_greedy {ours[2]}/{rows}")
        print(f"{name}.hf_bf16_max {theirs[0]:.4g} {name}.hf_bf16_rms {theirs[1]:.4g} {name}.hf_bf16_greedy {theirs[2]}/{rows}")
        print(f"{name}.ratio_max {ours[0] / theirs[0]:.3f} {name}.ratio_rms {ours[1] / theirs[1]:.3f}")
    del ref, native
    torch.cuda.empty_cache()
    config = model.config
    for batch, length in ((1, 512), (8, 512), (32, 512), (1, 4096)):
        ctx = torch.from_numpy(tokens(config, (batch, length), 7)).long().cuda()
        cache = DynamicCache()
        model(ctx[:, : length - 1], past_key_values=cache, use_cache=True)
        nxt = ctx[:, length - 1 :]
        ms = timed(lambda: model(nxt, past_key_values=cache, use_cache=True), 20)
        print(f"torch.bf16-decode-b{batch}-ctx{length}.ms {ms:.3f}")
        del cache
    for n in (512, 2048):
        x = torch.from_numpy(np.load(f"{work}/tokens-{n}.npy")).long().cuda()
        model(x)
        print(f"torch.bf16-prefill-{n}.ms {timed(lambda: model(x), 5):.3f}")
    if os.environ.get("TORCH_COMPILE") == "0":
        return
    seconds, ms = compiled_decode(model, config, torch.bfloat16)
    print(f"torch.compile-bf16.compile_s {seconds:.1f}")
    print(f"torch.compile-bf16-decode-b1-ctx512.ms {ms:.3f}")


@torch.inference_mode()
def compiled(plans, work, *batches):
    model = LlamaForCausalLM.from_pretrained(f"{work}/bf16", dtype=torch.bfloat16).cuda().eval()
    for batch in [int(b) for b in batches] or [8, 32]:
        seconds, ms = compiled_decode(model, model.config, torch.bfloat16, batch)
        print(f"torch.compile-bf16.b{batch}.compile_s {seconds:.1f}")
        print(f"torch.compile-bf16-decode-b{batch}-ctx512.ms {ms:.3f}")
        torch._dynamo.reset()


if __name__ == "__main__":
    {"prepare": prepare, "check": check, "compiled": compiled}[sys.argv[1]](*sys.argv[2:])
