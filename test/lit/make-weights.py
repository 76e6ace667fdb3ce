# Writes a checkpoint for the weights a graph declares, for the tests of
# --weights: the `weight %NAME : DTYPE[SHAPE]` lines of a .pg file, each
# filled with values k/64 (k in -32..32, k != 0, from a seeded generator),
# which f32, bf16 and f16 all hold exactly, so the same seed gives the same
# numbers in every dtype. Usage:
#   make-weights.py GRAPH.pg OUT [--dtype f32|bf16|f16] [--shards N] [--seed N]
#                   [--extra NAME]... [--drop NAME]... [--dup NAME]...
# --dtype writes every float weight in that dtype (default: the graph's own);
# --shards N > 1 makes OUT a directory as Hugging Face saves a sharded model:
# model-0000i-of-0000N.safetensors, the weights split in order into N runs,
# and model.safetensors.index.json; with 1 (the default) OUT is one
# .safetensors file. --extra adds an f32[4] tensor the graph does not use,
# --drop leaves a weight out, --dup writes a weight into the last shard too.
import json
import os
import random
import re
import struct
import sys

DTYPES = {"f32": ("F32", 4), "bf16": ("BF16", 2), "f16": ("F16", 2), "i32": ("I32", 4), "i64": ("I64", 8)}


def encode(dtype, values):
    if dtype == "f32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "f16":
        return struct.pack("<%de" % len(values), *values)
    if dtype == "bf16":  # the values are exact in bf16: the top half of the f32 bits
        return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in values)
    return struct.pack("<%d%s" % (len(values), "i" if dtype == "i32" else "q"), *[int(v) for v in values])


def safetensors(tensors):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors:
        header[name] = {"dtype": DTYPES[dtype][0], "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def main(argv):
    args = {"--dtype": None, "--shards": "1", "--seed": "0"}
    lists = {"--extra": [], "--drop": [], "--dup": []}
    pos = []
    i = 0
    while i < len(argv):
        if argv[i] in args:
            args[argv[i]] = argv[i + 1]
            i += 2
        elif argv[i] in lists:
            lists[argv[i]].append(argv[i + 1])
            i += 2
        else:
            pos.append(argv[i])
            i += 1
    graph, out = pos
    rng = random.Random(int(args["--seed"]))
    tensors = []
    for line in open(graph):
        m = re.match(r"weight %(\S+) : (\w+)\[([0-9,]*)\]", line)
        if not m or m.group(1) in lists["--drop"]:
            continue
        name, dtype = m.group(1), m.group(2)
        shape = [int(d) for d in m.group(3).split(",") if d]
        if args["--dtype"] and dtype in ("f32", "bf16", "f16"):
            dtype = args["--dtype"]
        n = 1
        for d in shape:
            n *= d
        values = [rng.choice([k for k in range(-32, 33) if k]) / 64 for _ in range(n)]
        tensors.append((name, (dtype, shape, encode(dtype, values))))
    for name in lists["--extra"]:
        tensors.append((name, ("f32", [4], encode("f32", [0.5, -0.25, 0.125, 1.0]))))

    shards = int(args["--shards"])
    if shards == 1:
        with open(out, "wb") as f:
            f.write(safetensors(tensors))
        return
    os.makedirs(out, exist_ok=True)
    per = (len(tensors) + shards - 1) // shards
    runs = [tensors[s * per:(s + 1) * per] for s in range(shards)]
    runs[-1] += [t for t in tensors if t[0] in lists["--dup"] and t not in runs[-1]]
    weight_map, total = {}, 0
    for s, run in enumerate(runs):
        file = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        with open(os.path.join(out, file), "wb") as f:
            f.write(safetensors(run))
        for name, (dtype, shape, raw) in run:
            weight_map.setdefault(name, file)
            total += len(raw)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
