"""The transformers side of the generation benchmark (generate_h200.sh), on
the GPU host.

prepare PLANS WORK: builds the model as hf_side.py does (the same seeded
random f32 weights from PLANS/config.json), saves its weights as
WORK/model.safetensors, and writes WORK/prompts-B.txt for B = 1, 8 and 32:
B prompts of 128 random token ids (seeded; each file's prompts are the
first B of 32), one a line, as `poot generate --prompts` reads them.

run PLANS WORK: loads those weights and, for each B, times
`model.generate` (greedy, 128 new tokens, no end-of-sequence id, f32, TF32
off) on the B prompts as one batch, after one untimed warm-up of the same
call, and compares its tokens with poot's (WORK/poot-bB.jsonl, as
`poot generate --output` writes them): tokens equal at the same place,
sequences equal whole, and the first position they part at. Prints one line
a figure, `name value`.
"""
import json
import sys
import time

import numpy as np
import torch
from safetensors.torch import load_file

from hf_side import build, save_weights, tokens

BATCHES = (1, 8, 32)
PROMPT, NEW = 128, 128


def prepare(plans, work):
    config, model = build(plans)
    save_weights(model, work)
    ids = tokens(config, (max(BATCHES), PROMPT), 128)
    for b in BATCHES:
        with open(f"{work}/prompts-{b}.txt", "w") as f:
            for row in ids[:b]:
                f.write(" ".join(map(str, row)) + "\n")


def read_prompts(path):
    return [[int(w) for w in line.split()] for line in open(path)]


def read_poot(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        out[r["index"]] = r["tokens"]
    return [out[i] for i in range(len(out))]


@torch.inference_mode()
def run(plans, work):
    config, model = build(plans)
    model.load_state_dict(load_file(f"{work}/model.safetensors", device="cuda"))
    model.generation_config.eos_token_id = None  # poot runs every prompt to its 128 tokens too
    model.generation_config.pad_token_id = 0
    for b in BATCHES:
        ids = torch.tensor(read_prompts(f"{work}/prompts-{b}.txt"), device="cuda")
        mask = torch.ones_like(ids)

        def generate():
            return model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=NEW,
                                  use_cache=True)

        generate()
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = generate()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        new = out[:, PROMPT:].tolist()
        if out.shape[1] != PROMPT + NEW:
            print(f"torch.generate-b{b}.short {out.shape[1] - PROMPT}")
        print(f"torch.generate-b{b}.s {seconds:.3f}")
        print(f"torch.generate-b{b}.tokens_per_s {b * NEW / seconds:.1f}")
        try:
            poot = read_poot(f"{work}/poot-b{b}.jsonl")
        except FileNotFoundError:
            print(f"agree-b{b}.missing poot-b{b}.jsonl")
            continue
        same = sum(x == y for p, t in zip(poot, new) for x, y in zip(p, t))
        whole = sum(p == t for p, t in zip(poot, new))
        parted = [next((i for i, (x, y) in enumerate(zip(p, t)) if x != y), None) for p, t in zip(poot, new)]
        print(f"agree-b{b}.tokens {same} of {b * NEW}")
        print(f"agree-b{b}.sequences {whole} of {b}")
        first = min((i for i in parted if i is not None), default=None)
        print(f"agree-b{b}.first_difference {'none' if first is None else first}")


if __name__ == "__main__":
    {"prepare": prepare, "run": run}[sys.argv[1]](sys.argv[2], sys.argv[3])
