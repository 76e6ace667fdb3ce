#!/usr/bin/env python3
# Checks traced prefill graphs against Hugging Face transformers, on a host
# that has torch and transformers (lit does not run it: it is neither a .test
# nor a .pg). For each (config, graph) pair it builds the transformers model
# from the config as published, fills every parameter with seeded random
# values, evaluates the .pg graph with a small torch interpreter of the
# primitive ops (its own, independent of the oracle) with the same weights,
# tokens at pos 0 (a graph traced with --layers N against the model's first
# N layers; a paged graph with the identity slot map), and compares
# the logits.
#   python3 test/lit/trace/hf_check.py [--device cuda] CONFIG.json GRAPH.pg ...
import argparse
import json
import re
import sys

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}


def parse_type(s):
    m = re.fullmatch(r"(\w+)\[([0-9,]*)\]", s.strip())
    dims = [int(d) for d in m.group(2).split(",") if d]
    return DTYPES[m.group(1)], dims


def split_top(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_attr(v):
    if v.startswith("["):
        items = split_top(v[1:-1])
        return [parse_attr(i) for i in items]
    if v in ("true", "false"):
        return v == "true"
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


EQN = re.compile(r"^(%[^=]+?) = (\w+)\(([^)]*)\)(?: \{(.*)\})? : (.*)$")


def parse_graph(text):
    params, eqns, outputs, states = [], [], [], []
    for line in text.splitlines():
        if not line or line.startswith("#") or line.startswith("graph "):
            continue
        kw = line.split(" ", 1)[0]
        if kw in ("input", "weight", "state", "slot"):
            name, rest = line.split(" ", 1)[1].split(" : ")
            params.append((kw, name[1:], parse_type(rest.split(" range")[0])))
        elif kw == "output":
            outputs.append(line.split()[1][1:])
        elif kw in ("state_out", "validation"):
            continue
        else:
            m = EQN.match(line)
            results = [r.strip()[1:] for r in m.group(1).split(",")]
            operands = [o.strip()[1:] for o in m.group(3).split(",") if o.strip()]
            attrs = {}
            for a in split_top(m.group(4) or ""):
                k, v = a.split("=", 1)
                attrs[k] = parse_attr(v)
            types = [parse_type(t) for t in split_top(m.group(5))]
            eqns.append((m.group(2), results, operands, attrs, types))
    return params, eqns, outputs


UNARY = {"Exp": torch.exp, "Log": torch.log, "Neg": torch.neg, "Sqrt": torch.sqrt, "Rsqrt": torch.rsqrt,
         "Recip": torch.reciprocal, "Tanh": torch.tanh, "Sin": torch.sin, "Cos": torch.cos, "Abs": torch.abs,
         "Erf": torch.erf, "Sigmoid": torch.sigmoid, "Not": torch.logical_not}
BINARY = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div, "Max": torch.maximum,
          "Min": torch.minimum, "Pow": torch.pow, "And": torch.logical_and, "Or": torch.logical_or,
          "Lt": torch.lt, "Le": torch.le, "Gt": torch.gt, "Ge": torch.ge, "Eq": torch.eq, "Ne": torch.ne}


def eval_eqn(op, xs, a, types, dev):
    dt, shape = types[0]
    if op in UNARY:
        return [UNARY[op](xs[0])]
    if op in BINARY:
        return [BINARY[op](xs[0], xs[1])]
    if op == "Iota":
        n = shape[a["axis"]]
        view = [1] * len(shape)
        view[a["axis"]] = n
        return [torch.arange(n, device=dev).to(dt).reshape(view).expand(shape).clone()]
    if op == "Constant":
        v = torch.tensor(a["value"], dtype=torch.float64, device=dev).to(dt)
        return [v.reshape(shape) if v.numel() > 1 else v.reshape([]).expand(shape).clone()]
    if op == "Reshape":
        return [xs[0].reshape(shape)]
    if op == "Broadcast":
        return [xs[0].expand(shape).clone()]
    if op == "Transpose":
        return [xs[0].permute(a["perm"]).contiguous()]
    if op == "Slice":
        ax = a["axis"] % xs[0].dim()
        return [xs[0].narrow(ax, a["start"], a["limit"] - a["start"])]
    if op == "Concat":
        return [torch.cat(xs, dim=a["axis"])]
    if op == "Gather":
        ax = a["axis"] % xs[0].dim()
        idx = xs[1].long()
        flat = torch.index_select(xs[0], ax, idx.reshape(-1))
        return [flat.reshape(list(xs[0].shape[:ax]) + list(idx.shape) + list(xs[0].shape[ax + 1:]))]
    if op == "DynamicUpdateSlice":
        x, u = xs[0].clone(), xs[1]
        ax = a["axis"] % x.dim()
        start = max(0, min(int(xs[2].reshape(-1)[0]), x.shape[ax] - u.shape[ax]))
        x.narrow(ax, start, u.shape[ax]).copy_(u)
        return [x]
    if op == "ScatterUpdate":
        x = xs[0].clone()
        for j, i in enumerate(xs[1].tolist()):
            if i != -1:
                x[i] = xs[2][j]
        return [x]
    if op == "Convert":
        return [xs[0].to(dt)]
    if op == "Select":
        return [torch.where(xs[0], xs[1], xs[2])]
    if op in ("ReduceSum", "ReduceMax", "ReduceMin"):
        f = {"ReduceSum": lambda t, d, k: torch.sum(t, d, keepdim=k),
             "ReduceMax": lambda t, d, k: torch.amax(t, d, keepdim=k),
             "ReduceMin": lambda t, d, k: torch.amin(t, d, keepdim=k)}[op]
        return [f(xs[0], a["axis"], a["keepdim"])]
    if op == "MatMul":
        return [torch.matmul(xs[0], xs[1])]
    if op == "IndexGuard":
        x = xs[0]
        ok = bool(((x >= a["lo"]) & (x <= a["hi"])).all())
        return [x.clamp(a["lo"], a["hi"]), torch.tensor(ok, device=dev)]
    raise SystemExit("hf_check: no evaluator for " + op)


def run_graph(text, bound, dev):
    params, eqns, outputs = parse_graph(text)
    env = {}
    for kind, name, (dt, shape) in params:
        if name in bound:
            env[name] = bound[name].to(dev)
        elif name == "read":  # row b's position p in pool slot b * cap + p
            rows, cap = shape
            env[name] = torch.arange(rows * cap, dtype=dt, device=dev).reshape(shape)
        elif name == "write":  # the prompt's tokens at positions 0..L-1
            rows, cap = next(s for _, n, (_, s) in params if n == "read")
            per_row = shape[0] // rows
            env[name] = torch.tensor([b * cap + j for b in range(rows) for j in range(per_row)], dtype=dt, device=dev)
        elif kind == "slot":  # pos 0
            env[name] = torch.zeros(shape, dtype=dt, device=dev)
        else:  # caches and anything else: values the prefill must not depend on
            env[name] = torch.randn(shape, device=dev).to(dt)
    for op, results, operands, attrs, types in eqns:
        outs = eval_eqn(op, [env[o] for o in operands], attrs, types, dev)
        for r, v, (dt, shape) in zip(results, outs, types):
            assert list(v.shape) == shape and v.dtype == dt, (op, r, v.shape, shape, v.dtype, dt)
            env[r] = v
    return {o: env[o] for o in outputs}


def check(config_path, graph_path, dev):
    import transformers
    cfg_json = json.load(open(config_path))
    text = open(graph_path).read()
    params = parse_graph(text)[0]
    # a graph traced with --layers N: the model's first N layers
    layers = {int(m.group(1)) for _, n, _ in params for m in [re.match(r"model\.layers\.(\d+)\.", n)] if m}
    cfg_json["num_hidden_layers"] = len(layers)
    cfg = transformers.AutoConfig.for_model(**cfg_json)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32).to(dev).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 1.0 / p.shape[-1] ** 0.5 if p.dim() >= 2 else 0.2
            p.copy_(torch.randn_like(p) * scale + (1.0 if p.dim() == 1 and "norm" in name else 0.0))
    tokens_shape = next(s for _, n, (_, s) in params if n == "tokens")
    tokens = torch.randint(0, cfg.vocab_size, tokens_shape, dtype=torch.int32, device=dev)
    weights = dict(model.state_dict())
    bound = {n: weights[n] for k, n, _ in params if k == "weight"}
    bound["tokens"] = tokens
    with torch.no_grad():
        want = model(input_ids=tokens.long()).logits.float()
        got = run_graph(text, bound, dev)["logits"]
    err = (got - want).abs().max().item()
    ref = want.abs().max().item()
    ok = err <= 1e-4 * max(1.0, ref)
    print(f"{'ok  ' if ok else 'FAIL'} {graph_path}: max |diff| {err:.3g}, max |logit| {ref:.3g}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("pairs", nargs="+")
    args = ap.parse_args()
    if len(args.pairs) % 2:
        raise SystemExit("hf_check: give CONFIG GRAPH pairs")
    results = [check(args.pairs[i], args.pairs[i + 1], args.device) for i in range(0, len(args.pairs), 2)]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
