"""Optimizer trajectories computed by PyTorch, for `tests/trajectories.rs`.

Run with the bench venv (PyTorch 2.15, CPU):

    /work/main/bench/.venv/bin/python crates/optim/tests/gen_optim.py

writes `crates/optim/tests/data/trajectories.json`. Each case builds a
`torch.optim` optimizer (the CPU default, the single-tensor implementation:
`foreach=False`) over a few parameters in one or more param groups, feeds
it fixed random gradients for several steps (`null`: the parameter has no
gradient at that step) and records every parameter after every step, the
final per-parameter state and the state dict's `param_groups`.

Large cases (`"large": true`) build their tensors from a formula the Rust
test reproduces and record FNV-1a hashes of the result bytes and every
97th element instead of the values (they cover the parallel chunked path).

Square roots: this venv's `torch.sqrt` is not correctly rounded on every
CPU (on the AMD EPYC these files were generated on, about 15% of float32
square roots come out one ulp off: MKL's vectorised sqrt), while on the
shared oracle's machine it is (all 17 optimizer cases of the oracle agree
with ferrotorch bit for bit). So that the files do not depend on the
machine, the optimizers' `Tensor.sqrt` / `sqrt_` are replaced below by a
correctly rounded square root (numpy's); every other operation is
PyTorch's own.
"""

import json
import math
import os

import numpy as np
import torch
import zlib

torch.set_num_threads(1)


def _ieee_sqrt(self):
    return torch.from_numpy(np.sqrt(self.detach().numpy()))


def _ieee_sqrt_(self):
    self.copy_(_ieee_sqrt(self))
    return self


torch.Tensor.sqrt = _ieee_sqrt
torch.Tensor.sqrt_ = _ieee_sqrt_
HERE = os.path.dirname(os.path.abspath(__file__))


def tensor_json(t):
    t = t.detach()
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).replace("torch.", ""),
        "data": [float(x) if math.isfinite(x) else str(x) for x in t.flatten().tolist()],
    }


def value_json(v):
    if isinstance(v, torch.Tensor):
        return tensor_json(v)
    if isinstance(v, tuple):
        return {"tuple": [value_json(x) for x in v]}
    if isinstance(v, list):
        return [value_json(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def fnv1a(t):
    h = 0xCBF29CE484222325
    for b in t.detach().contiguous().numpy().tobytes():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return format(h, "016x")


def formula(n, dtype, seed):
    """The large cases' data: the Rust test computes the same values."""
    i = torch.arange(n, dtype=torch.int64)
    x = ((i * 2654435761 + seed * 40503) % 4294967296).to(torch.float64) / 4294967296.0 - 0.5
    return x.to(dtype)


CLASSES = {
    "SGD": torch.optim.SGD,
    "Adam": torch.optim.Adam,
    "AdamW": torch.optim.AdamW,
    "RMSprop": torch.optim.RMSprop,
    "Adagrad": torch.optim.Adagrad,
}


def run(name, optimizer, defaults, shapes, groups=None, steps=5, dtype=torch.float32, missing=(), large=False):
    """`groups`: list of (param indices, group kwargs); `missing`: (step, param) without gradient."""
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    if large:
        params = [formula(math.prod(s), dtype, k + 1).reshape(s).clone() for k, s in enumerate(shapes)]
    else:
        params = [torch.randn(s, generator=g, dtype=dtype) for s in shapes]
    init = [p.clone() for p in params]
    params = [torch.nn.Parameter(p) for p in params]
    if groups is None:
        groups = [(list(range(len(params))), {})]
    spec = [dict(params=[params[i] for i in idx], **kw) for idx, kw in groups]
    opt = CLASSES[optimizer](spec, **defaults)  # CPU default: the single-tensor path
    grads, outputs = [], []
    for s in range(steps):
        step_grads = []
        for k, p in enumerate(params):
            if (s, k) in missing:
                p.grad = None
                step_grads.append(None)
            else:
                if large:
                    gr = formula(p.numel(), dtype, 100 * (s + 1) + k).reshape(p.shape) * 2.0
                else:
                    gr = torch.randn(p.shape, generator=g, dtype=dtype)
                p.grad = gr.clone()
                step_grads.append(gr)
        opt.step()
        grads.append(step_grads)
        outputs.append([p.detach().clone() for p in params])
    sd = opt.state_dict()
    case = {
        "name": name,
        "optimizer": optimizer,
        "defaults": defaults,
        "groups": [{"params": idx, "kwargs": kw} for idx, kw in groups],
        "steps": steps,
        "dtype": str(dtype).replace("torch.", ""),
        "param_groups": [{k: value_json(v) for k, v in grp.items()} for grp in sd["param_groups"]],
        "missing": [list(m) for m in missing],
    }
    if large:
        case["large"] = True
        case["shapes"] = [list(s) for s in shapes]
        case["output_hashes"] = [[fnv1a(p) for p in out] for out in outputs]
        # Every 97th element, for a tolerance comparison where the bits differ.
        case["output_samples"] = [[tensor_json(p.flatten()[::97]) for p in out] for out in outputs]
        case["state_hashes"] = {
            str(k): {key: fnv1a(v) if v.dim() > 0 else float(v) for key, v in st.items()}
            for k, st in sd["state"].items()
        }
    else:
        case["params"] = [tensor_json(p) for p in init]
        case["grads"] = [[None if gr is None else tensor_json(gr) for gr in sg] for sg in grads]
        case["outputs"] = [[tensor_json(p) for p in out] for out in outputs]
        case["state"] = {str(k): {key: tensor_json(v) for key, v in st.items()} for k, st in sd["state"].items()}
    return case


SHAPES = [(4, 5), (7,), (2, 3, 3)]

cases = [
    run("sgd_plain_lr", "SGD", {"lr": 0.05}, SHAPES),
    run("sgd_nesterov_wd", "SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-2}, SHAPES),
    run("sgd_maximize_dampening", "SGD", {"lr": 0.1, "momentum": 0.5, "dampening": 0.3, "maximize": True}, SHAPES),
    run("sgd_f64", "SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1}, SHAPES, dtype=torch.float64),
    run("sgd_missing_grads", "SGD", {"lr": 0.1, "momentum": 0.9}, SHAPES, missing=[(0, 1), (2, 0), (3, 2)]),
    run(
        "sgd_groups",
        "SGD",
        {"lr": 0.1, "momentum": 0.9},
        SHAPES,
        groups=[([0], {}), ([1, 2], {"lr": 0.01, "momentum": 0.5, "weight_decay": 0.1})],
    ),
    run("adam_amsgrad_wd_maximize", "Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.05, "maximize": True}, SHAPES),
    run("adam_decoupled", "Adam", {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True}, SHAPES),
    run("adam_betas_lerp_large_weight", "Adam", {"lr": 0.01, "betas": (0.3, 0.6)}, SHAPES),
    run("adam_f64_amsgrad", "Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.01}, SHAPES, dtype=torch.float64),
    run("adam_many_steps", "Adam", {"lr": 0.003}, SHAPES, steps=40),
    run("adamw_f64", "AdamW", {"lr": 0.01}, SHAPES, dtype=torch.float64),
    run("adamw_missing_grads", "AdamW", {"lr": 0.01, "amsgrad": True}, SHAPES, missing=[(0, 2), (1, 2), (4, 0)]),
    run(
        "adamw_groups",
        "AdamW",
        {"lr": 1e-3},
        SHAPES,
        groups=[([2, 0], {"lr": 0.02, "weight_decay": 0.0}), ([1], {"betas": (0.8, 0.9), "amsgrad": True})],
    ),
    run("rmsprop_default", "RMSprop", {}, SHAPES),
    run(
        "rmsprop_centered_momentum_wd",
        "RMSprop",
        {"lr": 0.01, "centered": True, "momentum": 0.9, "weight_decay": 0.01},
        SHAPES,
    ),
    run("rmsprop_alpha_maximize", "RMSprop", {"lr": 0.005, "alpha": 0.3, "maximize": True, "eps": 1e-6}, SHAPES),
    run("rmsprop_centered_f64", "RMSprop", {"lr": 0.01, "centered": True}, SHAPES, dtype=torch.float64),
    run("rmsprop_momentum", "RMSprop", {"lr": 0.01, "momentum": 0.5}, SHAPES, steps=12),
    run("adagrad_default", "Adagrad", {}, SHAPES),
    run(
        "adagrad_decay_wd_init",
        "Adagrad",
        {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.05, "initial_accumulator_value": 0.1},
        SHAPES,
    ),
    run("adagrad_f64_maximize", "Adagrad", {"lr": 0.05, "maximize": True, "eps": 1e-8}, SHAPES, dtype=torch.float64),
    run(
        "adagrad_groups",
        "Adagrad",
        {"lr": 0.05},
        SHAPES,
        groups=[([1], {"lr_decay": 0.1}), ([0, 2], {"lr": 0.2})],
        missing=[(1, 0)],
    ),
    # Large parameters: the parallel chunked path (hash-compared).
    run("large_adam", "Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.01}, [(300, 250), (70001,)], steps=3, large=True),
    run("large_adamw_f64", "AdamW", {"lr": 0.01}, [(70001,)], steps=3, dtype=torch.float64, large=True),
    run("large_sgd", "SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}, [(70001,)], steps=3, large=True),
    run("large_rmsprop", "RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.9}, [(70001,)], steps=3, large=True),
    run("large_adagrad", "Adagrad", {"lr": 0.1, "lr_decay": 0.01}, [(70001,)], steps=3, large=True),
]



def clip_case(name, shapes, max_norm, norm_type, dtypes=None, scale=1.0):
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    dtypes = dtypes or [torch.float32] * len(shapes)
    params = [torch.nn.Parameter(torch.zeros(s, dtype=d)) for s, d in zip(shapes, dtypes)]
    grads = [torch.randn(s, generator=g, dtype=d) * scale for s, d in zip(shapes, dtypes)]
    for p, gr in zip(params, grads):
        p.grad = gr.clone()
    total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    return {
        "name": name,
        "max_norm": max_norm,
        "norm_type": str(norm_type) if math.isinf(norm_type) else norm_type,
        "grads": [tensor_json(gr) for gr in grads],
        "total_norm": tensor_json(total),
        "clipped": [tensor_json(p.grad) for p in params],
    }


clip = [
    clip_case("l2_clips", SHAPES, 1.0, 2.0),
    clip_case("l2_no_clip", SHAPES, 100.0, 2.0),
    clip_case("inf", SHAPES, 0.5, math.inf),
    clip_case("l1", SHAPES, 2.0, 1.0),
    clip_case("p3", SHAPES, 1.0, 3.0),
    clip_case("p05", SHAPES, 1.0, 0.5),
    clip_case("large_l2", [(300, 300), (1000,)], 1.0, 2.0, scale=0.1),
    clip_case("mixed_dtypes", SHAPES, 1.0, 2.0, dtypes=[torch.float32, torch.float64, torch.float32]),
    clip_case("f64", SHAPES, 0.3, 2.0, dtypes=[torch.float64] * 3),
]

out = {"torch_version": torch.__version__.split("+")[0], "cases": cases, "clip": clip}
path = os.path.join(HERE, "data", "trajectories.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print(f"wrote {len(cases)} cases to {path}")
