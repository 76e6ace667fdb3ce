#!/usr/bin/env python3
# Makes the reference fixtures that test/unit/hf_test.cpp compares poot's
# traced models with: for the tiny config of every family (examples/models/
# tiny-*.json), it builds the Hugging Face transformers model from that config
# in float32 with eager attention, re-initializes every parameter at a
# non-trivial scale (seeded, so reruns give the same files), runs the forward
# on the CPU on random token ids [1, L] at position 0, and writes one folder
# per family: model.safetensors (under the checkpoint names poot's tracer
# binds), tokens.npy (int32 [1, L]), logits.npy (float32 [1, L, vocab]) and
# config.json (a copy of the tiny config). It needs torch, transformers,
# safetensors and numpy, and no network: run it where those are installed,
#   python3 test/hf/make_fixtures.py [--out test/hf/fixtures] [--only NAME ...]
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
    "mistral": "tiny-mistral.json",
    "gemma2": "tiny-gemma2.json",
    "bloom": "tiny-bloom.json",
    "deepseek_v2": "tiny-deepseek-v2.json",
}
TOKENS = 8  # L; the position is 0
SEED = 0


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


def make(name, config_file, out_root):
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
    tokens = torch.randint(0, vocab, (1, TOKENS), generator=gen)
    with torch.no_grad():
        logits = model(input_ids=tokens, use_cache=False).logits.to(torch.float32)
    out = os.path.join(out_root, name)
    os.makedirs(out, exist_ok=True)
    save_file(checkpoint_tensors(model, model.config), os.path.join(out, "model.safetensors"))
    np.save(os.path.join(out, "tokens.npy"), tokens.numpy().astype(np.int32))
    np.save(os.path.join(out, "logits.npy"), logits.numpy().astype(np.float32))
    shutil.copy(config_path, os.path.join(out, "config.json"))
    print(f"{name}: {config_file}, logits {tuple(logits.shape)}, max |logit| {logits.abs().max().item():.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(HERE, "fixtures"))
    ap.add_argument("--only", nargs="*", default=None, help="fixture names (default: all)")
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
            make(name, config_file, args.out)
        except Exception as e:  # report every family, then fail
            print(f"{name}: FAILED: {type(e).__name__}: {e}")
            failed.append(name)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
