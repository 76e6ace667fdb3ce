#!/usr/bin/env python3
# Makes the reference fixtures that test/unit/hf_test.cpp compares poot's
# traced models with: for the tiny config of every family (examples/models/
# tiny-*.json), it builds the Hugging Face transformers model from that config
# in float32 with eager attention, re-initializes every parameter at a
# non-trivial scale (seeded, so reruns give the same files), runs the forward
# on the CPU on random token ids [1, L] at position 0, and writes one folder
# per family: model.safetensors (under the checkpoint names poot's tracer
# binds), tokens.npy (int32 [1, L]), logits.npy (float32 [1, L, vocab]) and
# config.json (a copy of the tiny config). With --dtype bfloat16 or float16
# the folder (NAME-bf16, NAME-f16) is a checkpoint as one is published in
# that dtype: the weights rounded to it and saved by transformers'
# save_pretrained in shards of at most half the model's bytes (two or three)
# with model.safetensors.index.json (or, where the names save_pretrained
# writes are not the checkpoint names poot binds, the same tensors in two
# shards and an index written here), config.json
# with torch_dtype set, logits.npy from the rounded weights computed in
# float32 (what poot computes) and logits-native.npy from the model run in
# that dtype. It needs torch, transformers, safetensors and numpy, and no
# network: run it where those are installed,
#   python3 test/hf/make_fixtures.py [--out test/hf/fixtures] [--only NAME ...] [--dtype D] [--tokens L]
# and copy the folders under test/hf/fixtures/. It prints the versions it ran
# with; test/hf/README.md records the ones the checked-in fixtures came from.
import argparse
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(ROOT, "examples", "models")

# fixture folder -> tiny config (examples/models/)
FAMILIES = {
    "llama": "tiny-llama.json",
    "qwen2": "tiny-qwen2.json",
    "qwen3": "tiny-qwen3.json",
    "mistral": "tiny-mistral.json",
    "gemma2": "tiny-gemma2.json",
    "bloom": "tiny-bloom.json",
    "deepseek_v2": "tiny-deepseek-v2.json",
}
SEED = 0
# --dtype: torch dtype, config torch_dtype, fixture folder suffix
DTYPES = {
    "float32": (torch.float32, ""),
    "bfloat16": (torch.bfloat16, "-bf16"),
    "float16": (torch.float16, "-f16"),
}
INDEX = "model.safetensors.index.json"


def load_model(config_path):
    """The transformers model of a config.json, float32, eager attention."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(config_path, os.path.join(tmp, "config.json"))
        config = transformers.AutoConfig.from_pretrained(tmp)
    try:
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    except TypeError:  # older transformers spell it torch_dtype
        model = transformers.AutoModelForCausalLM.from_config(
            config, attn_implementation="eager", torch_dtype=torch.float32
        )
    return model.float().eval()


def is_norm(name):
    leaf = name.rsplit(".", 2)
    module = leaf[-2] if len(leaf) >= 2 else ""
    return "norm" in module or module.startswith("ln_")


def reinitialize(model, model_type, gen):
    """Every parameter at a scale that keeps activations and logits O(1):
    matrices N(0, 1/fan_in) (embeddings N(0, 0.2^2)), biases N(0, 0.1^2),
    norm gains around 1 (Gemma stores w of (1 + w), so N(0, 0.1^2) there)."""
    with torch.no_grad():
        for name, p in model.named_parameters():  # a tied parameter is listed once
            if is_norm(name):
                if name.endswith("bias"):
                    v = 0.1 * torch.randn(p.shape, generator=gen)
                elif model_type == "gemma2":
                    v = 0.1 * torch.randn(p.shape, generator=gen)
                else:
                    v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
            elif p.dim() == 1:
                v = 0.1 * torch.randn(p.shape, generator=gen)
            elif "embed" in name or name.endswith("word_embeddings.weight"):
                v = 0.2 * torch.randn(p.shape, generator=gen)
            else:
                v = torch.randn(p.shape, generator=gen) / float(p.shape[-1]) ** 0.5
            p.copy_(v.to(p.dtype))


def checkpoint_tensors(model, config):
    """The state dict under the checkpoint names poot binds: tied heads left
    out (as save_pretrained does), and experts stored as fused 3-D tensors
    (transformers 5's DeepseekV2Experts) split into the published per-expert
    names model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight."""
    state = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in model.state_dict().items()}
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    for key in sorted(state):
        if key.endswith("mlp.experts.gate_up_proj"):
            prefix = key[: -len("gate_up_proj")]
            t = state.pop(key)
            inter = t.shape[1] // 2
            for e in range(t.shape[0]):
                state[f"{prefix}{e}.gate_proj.weight"] = t[e, :inter].contiguous().clone()
                state[f"{prefix}{e}.up_proj.weight"] = t[e, inter:].contiguous().clone()
        elif key.endswith("mlp.experts.down_proj"):
            prefix = key[: -len("down_proj")]
            t = state.pop(key)
            for e in range(t.shape[0]):
                state[f"{prefix}{e}.down_proj.weight"] = t[e].contiguous().clone()
    return state


def write_shards(state, out, shards=2):
    """state as `shards` safetensors files named as transformers names them
    (model-00001-of-00002.safetensors, ...), tensors in name order split by
    bytes, and the index mapping every tensor to its file."""
    names = sorted(state)
    total = sum(state[k].numel() * state[k].element_size() for k in names)
    files, weight_map, part, done = [], {}, {}, 0
    for k in names:
        part[k] = state[k]
        done += state[k].numel() * state[k].element_size()
        if done * shards >= total * (len(files) + 1) and len(files) < shards - 1:
            files.append(part)
            part = {}
    files.append(part)
    for i, tensors in enumerate(files):
        fname = f"model-{i + 1:05d}-of-{len(files):05d}.safetensors"
        save_file(tensors, os.path.join(out, fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in tensors})
    with open(os.path.join(out, INDEX), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)


def save_checkpoint(model, state, out):
    """The model as transformers publishes it, in shards with an index;
    'transformers' when save_pretrained's names are the checkpoint names,
    else 'here' (the same tensors sharded by write_shards)."""
    total = sum(v.numel() * v.element_size() for v in state.values())
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, max_shard_size=total // 2 + 1)
        names = set()
        if os.path.exists(os.path.join(tmp, INDEX)):
            with open(os.path.join(tmp, INDEX)) as f:
                names = set(json.load(f)["weight_map"])
        if names == set(state):
            for f in sorted(os.listdir(tmp)):
                if f.endswith(".safetensors") or f == INDEX:
                    shutil.copy(os.path.join(tmp, f), os.path.join(out, f))
            return "transformers"
    write_shards(state, out)
    return "here"


def make(name, config_file, out_root, dtype="float32", length=8):
    config_path = os.path.join(MODELS, config_file)
    with open(config_path) as f:
        model_type = json.load(f)["model_type"]
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    model = load_model(config_path)
    reinitialize(model, model_type, gen)
    if getattr(model.config, "tie_word_embeddings", False):
        head, table = model.get_output_embeddings().weight, model.get_input_embeddings().weight
        assert head.data_ptr() == table.data_ptr(), "tie_word_embeddings is set but the head is not tied"
    vocab = model.config.vocab_size
    tokens = torch.randint(0, vocab, (1, length), generator=gen)
    torch_dtype, suffix = DTYPES[dtype]
    with torch.no_grad():
        for p in model.parameters():  # rounded to the checkpoint's dtype, computed in float32
            p.copy_(p.to(torch_dtype).to(torch.float32))
        logits = model(input_ids=tokens, use_cache=False).logits.to(torch.float32)
    out = os.path.join(out_root, name + suffix)
    os.makedirs(out, exist_ok=True)
    how = "one file"
    if torch_dtype == torch.float32:
        save_file(checkpoint_tensors(model, model.config), os.path.join(out, "model.safetensors"))
        shutil.copy(config_path, os.path.join(out, "config.json"))
    else:
        model = model.to(torch_dtype)
        state = {k: v.to(torch_dtype) for k, v in checkpoint_tensors(model, model.config).items()}
        how = "shards written by " + save_checkpoint(model, state, out)
        with torch.no_grad():
            native = model(input_ids=tokens, use_cache=False).logits.to(torch.float32)
        np.save(os.path.join(out, "logits-native.npy"), native.numpy().astype(np.float32))
        how += f", max |native - float32| {(native - logits).abs().max().item():.3g}"
        with open(config_path) as f:
            config = json.load(f)
        config["torch_dtype"] = dtype
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
    np.save(os.path.join(out, "tokens.npy"), tokens.numpy().astype(np.int32))
    np.save(os.path.join(out, "logits.npy"), logits.numpy().astype(np.float32))
    print(f"{name}{suffix}: {config_file}, {how}, logits {tuple(logits.shape)}, "
          f"max |logit| {logits.abs().max().item():.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(HERE, "fixtures"))
    ap.add_argument("--only", nargs="*", default=None, help="fixture names (default: all)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="the checkpoint's weight dtype")
    ap.add_argument("--tokens", type=int, default=8, help="L of the token ids [1, L], at position 0 (default: 8)")
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, numpy {np.__version__}")
    failed = []
    for name, config_file in FAMILIES.items():
        if args.only and name not in args.only:
            continue
        if not os.path.exists(os.path.join(MODELS, config_file)):
            print(f"{name}: skipped, no {config_file}")
            continue
        try:
            make(name, config_file, args.out, args.dtype, args.tokens)
        except Exception as e:  # report every family, then fail
            print(f"{name}: FAILED: {type(e).__name__}: {e}")
            failed.append(name)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
