# make-adapter.py GRAPH BASE.safetensors ADAPTER_DIR MERGED.safetensors
# [--target SUFFIX]... [--seed N]: writes a LoRA adapter as PEFT saves it for
# the weights of GRAPH whose names end in one of the SUFFIXes (default
# self_attn.q_proj.weight and self_attn.v_proj.weight): adapter_config.json
# (r = 4, lora_alpha = 8, so scale 2) and adapter_model.safetensors with
# base_model.model.MODULE.lora_A.weight [4, in] and .lora_B.weight [out, 4]
# (values k/64, k in -32..32, drawn from seed N, default 11), and MERGED: BASE (f32, as
# make-weights.py writes it) with each target replaced by W + 2 * B A. Every
# value is a multiple of 1/4096 below 32 in magnitude, so f32 holds the
# merge exactly whatever the order of its sums.
import importlib.util
import json
import os
import random
import re
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("make_weights", os.path.join(here, "..", "..", "make-weights.py"))
mw = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mw)

args, targets, seed = [], [], 11
i = 1
while i < len(sys.argv):
    if sys.argv[i] == "--target":
        targets.append(sys.argv[i + 1])
        i += 2
    elif sys.argv[i] == "--seed":
        seed = int(sys.argv[i + 1])
        i += 2
    else:
        args.append(sys.argv[i])
        i += 1
graph, base_path, adapter_dir, merged_path = args
targets = targets or ["self_attn.q_proj.weight", "self_attn.v_proj.weight"]
rank, alpha = 4, 8


def read_f32_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F32", (name, h["dtype"])
        lo, hi = h["data_offsets"]
        raw = data[8 + n + lo:8 + n + hi]
        out[name] = (h["shape"], list(struct.unpack("<%df" % (len(raw) // 4), raw)))
    return out


base = read_f32_safetensors(base_path)
rng = random.Random(seed)
small = lambda: rng.choice([k for k in range(-32, 33) if k]) / 64
adapter, merged = [], dict(base)
for line in open(graph):
    m = re.match(r"weight %(\S+) : f32\[(\d+),(\d+)\]", line)
    if not m or not any(m.group(1).endswith(t) for t in targets):
        continue
    name, out, inn = m.group(1), int(m.group(2)), int(m.group(3))
    module = name[:-len(".weight")]
    a = [small() for _ in range(rank * inn)]
    b = [small() for _ in range(out * rank)]
    adapter.append(("base_model.model.%s.lora_A.weight" % module, ("f32", [rank, inn], mw.encode("f32", a))))
    adapter.append(("base_model.model.%s.lora_B.weight" % module, ("f32", [out, rank], mw.encode("f32", b))))
    shape, w = base[name]
    scale = alpha / rank
    merged[name] = (shape, [w[o * inn + j] + scale * sum(b[o * rank + k] * a[k * inn + j] for k in range(rank))
                            for o in range(out) for j in range(inn)])
os.makedirs(adapter_dir, exist_ok=True)
with open(os.path.join(adapter_dir, "adapter_model.safetensors"), "wb") as f:
    f.write(mw.safetensors(adapter))
with open(os.path.join(adapter_dir, "adapter_config.json"), "w") as f:
    json.dump({"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "target_modules": sorted({t.split(".")[-2] for t in targets}),
               "fan_in_fan_out": False}, f)
with open(merged_path, "wb") as f:
    f.write(mw.safetensors([(name, ("f32", shape, mw.encode("f32", v))) for name, (shape, v) in merged.items()]))
