#!/usr/bin/env python3
"""Differential fuzzer: random small tensor programs run in PyTorch and in
ferrotorch (the `ferrotorch-fuzz-eval` binary); every difference is reported.

    bench/.venv/bin/python fuzz/driver.py --quick
    bench/.venv/bin/python fuzz/driver.py --seed 1 --count 100000 --out fuzz/out/s1
    bench/.venv/bin/python fuzz/driver.py --replay open

See fuzz/README.md.
"""

import argparse
import collections
import functools
import json
import math
import os
import select
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_PY = os.path.join(ROOT, "bench", ".venv", "bin", "python")
CASES = os.path.join(ROOT, "fuzz", "cases")

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    if os.path.exists(VENV_PY) and os.path.realpath(sys.executable) != os.path.realpath(VENV_PY):
        os.execv(VENV_PY, [VENV_PY] + sys.argv)
    sys.exit("PyTorch not found: run bench/setup_venv.sh, then bench/.venv/bin/python fuzz/driver.py")

import random  # noqa: E402
import warnings  # noqa: E402

warnings.filterwarnings("ignore")
torch.set_num_threads(1)

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
DNAME = {v: k for k, v in DTYPES.items()}
FLOATS = ("float32", "float64", "float16", "bfloat16")

# ---------------------------------------------------------------- encoding


def jf(x):
    """A float as JSON: non-finite values as strings."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def pf(x):
    if isinstance(x, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[x]
    return float(x)


def enc(t):
    t = t.detach()
    if t.is_floating_point():
        data = [jf(v) for v in t.to(torch.float64).flatten().tolist()]
    else:
        data = t.flatten().tolist()
    return {"dtype": DNAME[t.dtype], "shape": list(t.shape), "data": data}


def snapshot(t):
    v = enc(t)
    v["rg"] = t.requires_grad
    try:
        v["grad_fn"] = type(t.grad_fn).__name__ if t.grad_fn is not None else None
    except RuntimeError:  # a multi-output view modified in place: PyTorch refuses to say
        v["grad_fn"] = "<unavailable>"
    return v


def dec_scalar(v):
    if "int" in v:
        return int(v["int"])
    if "float" in v:
        return pf(v["float"])
    return bool(v["bool"])


def make_input(spec):
    """The base tensor and the (possibly non-contiguous) view of an input spec."""
    dt = DTYPES[spec["dtype"]]
    data = [pf(v) for v in spec["data"]] if spec["dtype"] in FLOATS else spec["data"]
    # clone(): a fresh tensor, not a view of the flat one (in-place ops on a
    # view would record CopySlices / AsStridedBackward0 in PyTorch only).
    base = torch.tensor(data, dtype=dt).reshape(spec["shape"]).clone()
    if spec.get("rg"):
        base.requires_grad_(True)
    t = base
    for v in spec.get("views", []):
        if v[0] == "t":
            t = t.transpose(v[1], v[2])
        elif v[0] == "slice":
            # aten::slice, as the evaluator's view (Python's indexing returns
            # an alias, node AliasBackward0, for a slice that keeps everything).
            t = torch.ops.aten.slice.Tensor(t, v[1] % t.dim(), v[2], v[3], v[4])
        elif v[0] == "expand":
            t = t.expand(v[1])
        elif v[0] == "permute":
            t = t.permute(v[1])
    return base, t


# ---------------------------------------------------------------- the op table (PyTorch side)

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "log1p": torch.log1p,
    "expm1": torch.expm1, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
    "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf,
    "relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc, "sign": torch.sign,
    "square": torch.square, "logical_not": torch.logical_not,
    "bitwise_not": torch.bitwise_not, "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite,
    "isposinf": torch.isposinf, "isneginf": torch.isneginf,
}
UNARY_INPLACE = [
    "neg_", "abs_", "exp_", "log_", "log1p_", "expm1_", "sqrt_", "rsqrt_", "reciprocal_", "sin_", "cos_", "tanh_",
    "sigmoid_", "erf_", "relu_", "floor_", "ceil_", "round_", "trunc_", "sign_",
]
NOARG = {
    "sum": torch.sum, "prod": torch.prod, "max": torch.max, "min": torch.min, "all": torch.all, "any": torch.any,
    "mean": torch.mean, "t": torch.t, "squeeze": torch.squeeze, "contiguous": lambda x: x.contiguous(),
    "nonzero": torch.nonzero, "zeros_like": torch.zeros_like, "ones_like": torch.ones_like,
    "zero_": lambda x: x.zero_(), "clone": lambda x: x.clone(),
}
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
          "logical_and", "logical_or", "logical_xor"]
BINARY_INPLACE = ["add_", "sub_", "mul_", "div_", "pow_", "eq_", "ne_", "lt_", "le_", "gt_", "ge_",
                  "logical_and_", "logical_or_", "logical_xor_"]
# More binary ops (ferrotorch's BinaryMath): tensor first, then a tensor or
# (where PyTorch has a Scalar overload) a scalar.
MATH = ["atan2", "hypot", "logaddexp", "logaddexp2", "copysign", "remainder", "fmod", "bitwise_and", "bitwise_or",
        "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"]
MATH_INPLACE = [n + "_" for n in MATH]
MATH_TENSOR_ONLY = ("atan2", "hypot", "logaddexp", "logaddexp2")
MATH_INT = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift")
RLHS = {
    "radd": lambda s, x: s + x, "rsub": lambda s, x: s - x, "rmul": lambda s, x: s * x,
    "rdiv": lambda s, x: s / x, "rpow": lambda s, x: s ** x, "rlt": lambda s, x: s < x,
    "rle": lambda s, x: s <= x, "rgt": lambda s, x: s > x, "rge": lambda s, x: s >= x,
    "req": lambda s, x: s == x, "rne": lambda s, x: s != x,
}


def opnd(env, v):
    return env[v] if isinstance(v, str) else dec_scalar(v)


def sl(x, d, s, e, st):
    if not -x.dim() <= d < max(x.dim(), 1) or x.dim() == 0:
        raise IndexError("dim out of range")
    d %= x.dim()
    # aten::slice, which ferrotorch's `slice` is (Python's x[:, a:b] skips a
    # no-op slice and returns an alias instead).
    if st is not None and st <= 0:
        raise ValueError("slice step must be positive")
    return torch.ops.aten.slice.Tensor(x, d, s, e, 1 if st is None else st)


def exec_op(env, op):
    """Runs one op on the PyTorch side: its outputs as a list."""
    n, a = op["op"], op.get("args", [])
    T = lambda i: env[a[i]]  # noqa: E731
    S = lambda i: dec_scalar(a[i])  # noqa: E731
    if n in UNARY:
        return [UNARY[n](T(0))]
    if n in UNARY_INPLACE:
        return [getattr(T(0), n)()]
    if n in NOARG:
        return [NOARG[n](T(0))]
    base = n[:-1] if n.endswith("_") else n
    if base in BINARY:
        x, y = T(0), opnd(env, a[1])
        extra = a[2] if len(a) > 2 else None
        kw = {}
        if base in ("add", "sub") and extra is not None:
            kw["alpha"] = dec_scalar(extra)
        if base == "div" and extra is not None:
            kw["rounding_mode"] = extra
        if n.endswith("_"):
            return [getattr(x, n)(y, **kw)]
        return [getattr(torch, base)(x, y, **kw)]
    if base in MATH:
        return [getattr(T(0) if n.endswith("_") else torch, n)(*([] if n.endswith("_") else [T(0)]),
                                                               opnd(env, a[1]))]
    if n == "nan_to_num":
        return [torch.nan_to_num(T(0), nan=a[1], posinf=a[2], neginf=a[3])]
    if n == "lerp":
        return [torch.lerp(T(0), T(1), opnd(env, a[2]))]
    if n == "clamp_t":
        lo = None if a[1] is None else T(1)
        hi = None if a[2] is None else T(2)
        return [torch.clamp(T(0), min=lo, max=hi)]
    if n in RLHS:
        return [RLHS[n](S(0), T(1))]
    if n == "softplus":
        return [F.softplus(T(0), a[1], a[2])]
    if n == "where":
        return [torch.where(T(0), opnd(env, a[1]), opnd(env, a[2]))]
    if n in ("masked_fill", "masked_fill_"):
        return [getattr(T(0), n)(T(1), S(2))]
    if n in ("clamp", "clamp_"):
        lo = None if a[1] is None else S(1)
        hi = None if a[2] is None else S(2)
        return [getattr(T(0), n)(min=lo, max=hi)]
    if n in ("clamp_min", "clamp_max"):
        return [getattr(torch, n)(T(0), S(1))]
    if n == "scalar_pow":
        return [torch.pow(S(0), T(1))]
    if n == "sum_dim":
        return [torch.sum(T(0), dim=a[1], keepdim=a[2])]
    if n == "sum_dtype":
        if a[1] is None:
            return [torch.sum(T(0), dtype=DTYPES[a[3]])]
        return [torch.sum(T(0), dim=a[1], keepdim=a[2], dtype=DTYPES[a[3]])]
    if n == "prod_dim":
        return [torch.prod(T(0), a[1], keepdim=a[2])]
    if n in ("amax", "amin", "mean_dim", "logsumexp"):
        f = {"amax": torch.amax, "amin": torch.amin, "mean_dim": torch.mean, "logsumexp": torch.logsumexp}[n]
        return [f(T(0), a[1], keepdim=a[2])]
    if n in ("all_dim", "any_dim"):
        return [getattr(torch, n[:3])(T(0), dim=tuple(a[1]), keepdim=a[2])]
    if n in ("max_dim", "min_dim"):
        r = getattr(torch, n[:3])(T(0), a[1], keepdim=a[2])
        return [r[0], r[1]]
    if n in ("argmax", "argmin"):
        return [getattr(torch, n)(T(0), dim=a[1], keepdim=a[2])]
    if n in ("cumsum", "cumprod"):
        return [getattr(torch, n)(T(0), a[1])]
    if n in ("var", "std"):
        return [getattr(torch, n)(T(0), correction=a[1])]
    if n in ("var_dim", "std_dim"):
        return [getattr(torch, n[:3])(T(0), dim=a[1], correction=a[2], keepdim=a[3])]
    if n == "norm":
        return [torch.linalg.vector_norm(T(0), ord=pf(a[1]))]
    if n == "norm_dim":
        return [torch.linalg.vector_norm(T(0), ord=pf(a[1]), dim=a[2], keepdim=a[3])]
    if n in ("softmax", "log_softmax"):
        return [getattr(torch, n)(T(0), a[1])]
    if n in ("mm", "bmm", "mv", "dot", "outer", "matmul"):
        return [getattr(torch, n)(T(0), T(1))]
    if n in ("view", "reshape", "permute", "expand"):
        return [getattr(T(0), n)(a[1])]
    if n == "transpose":
        return [T(0).transpose(a[1], a[2])]
    if n == "narrow":
        return [T(0).narrow(a[1], a[2], a[3])]
    if n == "slice":
        return [sl(T(0), a[1], a[2], a[3], a[4])]
    if n == "select":
        return [T(0).select(a[1], a[2])]
    if n == "squeeze_dim":
        return [T(0).squeeze(a[1])]
    if n == "squeeze_dims":
        return [T(0).squeeze(tuple(a[1]))]
    if n == "unsqueeze":
        return [T(0).unsqueeze(a[1])]
    if n == "flatten":
        return [T(0).flatten(a[1], a[2])]
    if n == "unflatten":
        return [T(0).unflatten(a[1], a[2])]
    if n in ("split", "chunk"):
        return list(getattr(torch, n)(T(0), a[1], a[2]))
    if n == "unbind":
        return list(torch.unbind(T(0), a[1]))
    if n == "gather":
        return [torch.gather(T(0), a[1], T(2))]
    if n in ("scatter", "scatter_add"):
        return [getattr(torch, n)(T(0), a[1], T(2), T(3))]
    if n in ("scatter_", "scatter_add_"):
        return [getattr(T(0), n)(a[1], T(2), T(3))]
    if n == "scatter_value":
        return [torch.scatter(T(0), a[1], T(2), S(3))]
    if n == "index_select":
        return [torch.index_select(T(0), a[1], T(2))]
    if n == "index":
        # ferrotorch's Tensor::index is aten::index (0-d index tensors index, they do not select).
        return [torch.ops.aten.index.Tensor(T(0), [None if v is None else env[v] for v in a[1]])]
    if n in ("index_put", "index_put_"):
        idx = [None if v is None else env[v] for v in a[1]]
        return [getattr(torch.ops.aten, n)(T(0), idx, T(2), a[3])]
    if n in ("tril", "triu"):
        return [getattr(torch, n)(T(0), a[1])]
    if n == "one_hot":
        return [F.one_hot(T(0), -1 if a[1] is None else a[1])]
    if n == "sort":
        r = torch.sort(T(0), dim=a[1], descending=a[2], stable=True)
        return [r[0], r[1]]
    if n == "argsort":
        return [torch.argsort(T(0), dim=a[1], descending=a[2], stable=True)]
    if n == "topk":
        r = torch.topk(T(0), a[1], dim=a[2], largest=a[3], sorted=True)
        return [r[0], r[1]]
    if n == "kthvalue":
        r = torch.kthvalue(T(0), a[1], dim=a[2], keepdim=a[3])
        return [r[0], r[1]]
    if n in ("median_dim", "nanmedian_dim", "mode"):
        f = {"median_dim": torch.median, "nanmedian_dim": torch.nanmedian, "mode": torch.mode}[n]
        r = f(T(0), a[1], keepdim=a[2])
        return [r[0], r[1]]
    if n in ("median", "nanmedian", "nansum", "count_nonzero"):
        return [getattr(torch, n)(T(0))]
    if n in ("cummax", "cummin"):
        r = getattr(torch, n)(T(0), a[1])
        return [r[0], r[1]]
    if n == "logcumsumexp":
        return [torch.logcumsumexp(T(0), a[1])]
    if n == "nansum_dim":
        return [torch.nansum(T(0), dim=a[1], keepdim=a[2])]
    if n == "aminmax":
        r = torch.aminmax(T(0), dim=a[1], keepdim=a[2])
        return [r[0], r[1]]
    if n == "diff":
        return [torch.diff(T(0), n=a[1], dim=a[2])]
    if n in ("unique", "unique_consecutive"):
        kw = {"return_inverse": True, "return_counts": True}
        if a[1] is not None:
            kw["dim"] = a[1]
        return list(getattr(torch, n)(T(0), **kw))
    if n in ("cat", "stack"):
        return [getattr(torch, n)([env[v] for v in a[0]], a[1])]
    if n == "to":
        return [T(0).to(DTYPES[a[1]])]
    if n == "fill_":
        return [T(0).fill_(S(1))]
    if n == "copy_":
        return [T(0).copy_(T(1))]
    if n == "full_like":
        return [torch.full_like(T(0), S(1))]
    r = exec_cov(env, n, a)
    if r is None:
        r = exec_nn(env, n, a)
    if r is not None:
        return r
    raise KeyError("unknown op " + n)


# ---- the op-coverage ops (issue 14): shape and indexing, counting, reductions, linear algebra

COV_SHAPE = ["flip", "roll", "repeat", "tile", "repeat_interleave", "repeat_interleave_t", "movedim", "moveaxis",
             "swapaxes", "diagonal", "unfold", "diag", "diag_embed", "trace", "masked_select", "masked_scatter",
             "take", "take_along_dim", "index_add", "index_add_", "index_copy", "index_copy_", "index_fill",
             "index_fill_", "nonzero_tuple", "argwhere", "meshgrid", "cartesian_prod", "block_diag",
             "broadcast_tensors", "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d", "tril_indices",
             "triu_indices"]
COV_COUNT = ["searchsorted", "bucketize", "bincount", "histc"]
COV_REDUCE = ["nanmean", "nanmean_dim", "count_nonzero_dim", "var_mean", "std_mean", "diff_pa", "cumsum_dtype",
              "cumprod_dtype", "mean_dtype"]
COV_LINALG = ["addmm", "addmv", "addbmm", "baddbmm", "einsum", "tensordot", "kron", "cross", "matrix_norm", "inv",
              "det", "slogdet", "solve", "cholesky", "eigvalsh", "svdvals", "qr_abs"]
COV_LIST_OPS = ("meshgrid", "cartesian_prod", "block_diag", "broadcast_tensors")


def matrix_ord(v):
    return v if v in ("fro", "nuc") else pf(v)


def exec_cov(env, n, a):
    """The op-coverage ops (PyTorch side); None for another op."""
    T = lambda i: env[a[i]]  # noqa: E731
    S = lambda i: dec_scalar(a[i])  # noqa: E731
    if n == "flip":
        return [torch.flip(T(0), a[1])]
    if n == "roll":
        return [torch.roll(T(0), a[1]) if a[2] is None else torch.roll(T(0), a[1], a[2])]
    if n == "repeat":
        return [T(0).repeat(a[1])]
    if n == "tile":
        return [torch.tile(T(0), a[1])]
    if n == "repeat_interleave":
        return [torch.repeat_interleave(T(0), a[1], dim=a[2])]
    if n == "repeat_interleave_t":
        return [torch.repeat_interleave(T(0), T(1), dim=a[2])]
    if n in ("movedim", "moveaxis", "swapaxes"):
        return [getattr(torch, n)(T(0), a[1], a[2])]
    if n in ("diagonal", "diag_embed"):
        return [getattr(torch, n)(T(0), a[1], a[2], a[3])]
    if n == "unfold":
        return [T(0).unfold(a[1], a[2], a[3])]
    if n == "diag":
        return [torch.diag(T(0), a[1])]
    if n in ("trace", "argwhere", "atleast_1d", "atleast_2d", "atleast_3d"):
        return [getattr(torch, n)(T(0))]
    if n == "masked_select":
        return [torch.masked_select(T(0), T(1))]
    if n == "masked_scatter":
        return [T(0).masked_scatter(T(1), T(2))]
    if n == "take":
        return [torch.take(T(0), T(1))]
    if n == "take_along_dim":
        return [torch.take_along_dim(T(0), T(1), dim=a[2])]
    if n in ("index_add", "index_add_"):
        f = T(0).index_add_ if n.endswith("_") else functools.partial(torch.index_add, T(0))
        return [f(a[1], T(2), T(3), alpha=S(4))]
    if n in ("index_copy", "index_copy_"):
        f = T(0).index_copy_ if n.endswith("_") else functools.partial(torch.index_copy, T(0))
        return [f(a[1], T(2), T(3))]
    if n in ("index_fill", "index_fill_"):
        f = T(0).index_fill_ if n.endswith("_") else functools.partial(torch.index_fill, T(0))
        return [f(a[1], T(2), S(3))]
    if n == "nonzero_tuple":
        return list(torch.nonzero(T(0), as_tuple=True))
    if n in COV_LIST_OPS:
        ts = [env[v] for v in a[0]]
        if n == "meshgrid":
            return list(torch.meshgrid(*ts, indexing=a[1]))
        r = getattr(torch, n)(*ts)
        return list(r) if isinstance(r, (tuple, list)) else [r]
    if n == "broadcast_to":
        return [torch.broadcast_to(T(0), a[1])]
    if n in ("tril_indices", "triu_indices"):
        return [getattr(torch, n)(a[0], a[1], a[2])]
    # counting
    if n == "searchsorted":
        return [torch.searchsorted(T(0), opnd(env, a[1]), right=a[2], side=a[3],
                                   sorter=None if a[4] is None else T(4), out_int32=a[5])]
    if n == "bucketize":
        return [torch.bucketize(T(0), T(1), right=a[2], out_int32=a[3])]
    if n == "bincount":
        return [torch.bincount(T(0), weights=None if a[1] is None else T(1), minlength=a[2])]
    if n == "histc":
        return [torch.histc(T(0), bins=a[1], min=pf(a[2]), max=pf(a[3]))]
    # reductions
    if n == "nanmean":
        return [torch.nanmean(T(0))]
    if n == "nanmean_dim":
        return [torch.nanmean(T(0), dim=a[1], keepdim=a[2])]
    if n == "count_nonzero_dim":
        return [torch.count_nonzero(T(0), dim=a[1])]
    if n in ("var_mean", "std_mean"):
        return list(getattr(torch, n)(T(0), dim=a[1], correction=a[2], keepdim=a[3]))
    if n == "diff_pa":
        return [torch.diff(T(0), a[1], a[2], prepend=None if a[3] is None else T(3),
                           append=None if a[4] is None else T(4))]
    if n in ("cumsum_dtype", "cumprod_dtype"):
        return [getattr(torch, n[:-6])(T(0), a[1], dtype=DTYPES[a[2]])]
    if n == "mean_dtype":
        if a[1] is None:
            return [torch.mean(T(0), dtype=DTYPES[a[3]])]
        return [torch.mean(T(0), a[1], keepdim=a[2], dtype=DTYPES[a[3]])]
    # linear algebra
    if n in ("addmm", "addmv", "addbmm", "baddbmm"):
        return [getattr(torch, n)(T(0), T(1), T(2), beta=a[3], alpha=a[4])]
    if n == "einsum":
        return [torch.einsum(a[0], *[env[v] for v in a[1]])]
    if n == "tensordot":
        return [torch.tensordot(T(0), T(1), dims=a[2] if len(a) == 3 else (a[2], a[3]))]
    if n == "kron":
        return [torch.kron(T(0), T(1))]
    if n == "cross":
        return [torch.linalg.cross(T(0), T(1), dim=a[2])]
    if n == "matrix_norm":
        return [torch.linalg.matrix_norm(T(0), ord=matrix_ord(a[1]), keepdim=a[2])]
    if n in ("inv", "det", "svdvals"):
        return [getattr(torch.linalg, n)(T(0))]
    if n == "slogdet":
        return list(torch.linalg.slogdet(T(0)))
    if n == "solve":
        return [torch.linalg.solve(T(0), T(1))]
    if n == "cholesky":
        return [torch.linalg.cholesky(T(0), upper=a[1])]
    if n == "eigvalsh":
        return [torch.linalg.eigvalsh(T(0), UPLO=a[1])]
    if n == "qr_abs":
        q, rr = torch.linalg.qr(T(0), mode=a[1])
        return [q.abs(), rr.abs()]
    return None


# ---- the nn op group: torch.nn.functional's poolings, convolutions, norms, embedding, losses, activations

NN_POOL = ["max_pool1d", "max_pool2d", "max_pool1d_idx", "max_pool2d_idx", "avg_pool1d", "avg_pool2d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d"]
NN_CONV = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "linear"]
NN_NORM = ["layer_norm", "rms_norm", "group_norm", "batch_norm", "embedding"]
NN_LOSS = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "bce_with_logits", "kl_div"]
NN_ACT_ARGS = {"leaky_relu": F.leaky_relu, "elu": F.elu, "celu": F.celu, "softshrink": F.softshrink,
               "hardshrink": F.hardshrink}
NN_ACT_NOARG = {"selu": F.selu, "relu6": F.relu6, "mish": F.mish, "hardswish": F.hardswish,
                "hardsigmoid": F.hardsigmoid, "logsigmoid": F.logsigmoid}
NN_ACT = list(NN_ACT_ARGS) + list(NN_ACT_NOARG) + ["hardtanh"]
NN_OPS = NN_POOL + NN_CONV + NN_NORM + NN_LOSS + NN_ACT + ["sdpa"]


def exec_nn(env, n, a):
    """The nn ops (PyTorch side); None for another op."""
    T = lambda i: env[a[i]]  # noqa: E731
    O = lambda i: None if a[i] is None else env[a[i]]  # noqa: E731
    if n in ("max_pool1d", "max_pool2d", "max_pool1d_idx", "max_pool2d_idx"):
        f = F.max_pool1d if n.startswith("max_pool1d") else F.max_pool2d
        idx = n.endswith("_idx")
        r = f(T(0), a[1], stride=a[2], padding=a[3], dilation=a[4], ceil_mode=a[5], return_indices=idx)
        return list(r) if idx else [r]
    if n == "avg_pool1d":
        return [F.avg_pool1d(T(0), a[1], stride=a[2], padding=a[3], ceil_mode=a[4], count_include_pad=a[5])]
    if n == "avg_pool2d":
        return [F.avg_pool2d(T(0), a[1], stride=a[2], padding=a[3], ceil_mode=a[4], count_include_pad=a[5],
                             divisor_override=a[6])]
    if n in ("adaptive_avg_pool1d", "adaptive_avg_pool2d"):
        return [getattr(F, n)(T(0), a[1])]
    if n in ("adaptive_max_pool1d", "adaptive_max_pool2d"):
        return list(getattr(F, n)(T(0), a[1], return_indices=True))
    if n in ("conv1d", "conv2d"):
        return [getattr(F, n)(T(0), T(1), O(2), stride=a[3], padding=a[4], dilation=a[5], groups=a[6])]
    if n in ("conv_transpose1d", "conv_transpose2d"):
        return [getattr(F, n)(T(0), T(1), O(2), stride=a[3], padding=a[4], output_padding=a[5], groups=a[6],
                              dilation=a[7])]
    if n == "linear":
        return [F.linear(T(0), T(1), O(2))]
    if n == "layer_norm":
        return [F.layer_norm(T(0), a[1], O(2), O(3), a[4])]
    if n == "rms_norm":
        return [F.rms_norm(T(0), a[1], O(2), a[3])]
    if n == "group_norm":
        return [F.group_norm(T(0), a[1], O(2), O(3), a[4])]
    if n == "batch_norm":
        return [F.batch_norm(T(0), O(1), O(2), O(3), O(4), training=a[5], momentum=a[6], eps=a[7])]
    if n == "embedding":
        return [F.embedding(T(0), T(1), padding_idx=a[2], max_norm=a[3], norm_type=a[4], scale_grad_by_freq=a[5])]
    if n == "cross_entropy":
        return [F.cross_entropy(T(0), T(1), weight=O(2), ignore_index=a[3], reduction=a[4], label_smoothing=a[5])]
    if n == "nll_loss":
        return [F.nll_loss(T(0), T(1), weight=O(2), ignore_index=a[3], reduction=a[4])]
    if n in ("mse_loss", "l1_loss"):
        return [getattr(F, n)(T(0), T(1), reduction=a[2])]
    if n == "smooth_l1_loss":
        return [F.smooth_l1_loss(T(0), T(1), reduction=a[2], beta=a[3])]
    if n == "huber_loss":
        return [F.huber_loss(T(0), T(1), reduction=a[2], delta=a[3])]
    if n == "binary_cross_entropy":
        return [F.binary_cross_entropy(T(0), T(1), weight=O(2), reduction=a[3])]
    if n == "bce_with_logits":
        return [F.binary_cross_entropy_with_logits(T(0), T(1), weight=O(2), pos_weight=O(3), reduction=a[4])]
    if n == "kl_div":
        return [F.kl_div(T(0), T(1), reduction=a[2], log_target=a[3])]
    if n == "sdpa":
        return [F.scaled_dot_product_attention(T(0), T(1), T(2), attn_mask=O(3), is_causal=a[4], scale=a[5])]
    if n in NN_ACT_ARGS:
        return [NN_ACT_ARGS[n](T(0), a[1])]
    if n in NN_ACT_NOARG:
        return [NN_ACT_NOARG[n](T(0))]
    if n == "hardtanh":
        return [F.hardtanh(T(0), a[1], a[2])]
    return None


def out_prefix(op, k):
    return op.get("out", "r%d" % k)


class Run:
    """A program being run in PyTorch."""

    def __init__(self):
        self.env = {}
        self.leaves = []
        self.status = None  # (kind, step, msg) on error
        self.steps = []  # each op's outputs right after it ran

    def add_input(self, spec):
        base, t = make_input(spec)
        if base.requires_grad:
            self.leaves.append((spec["name"], base))
        if spec.get("views"):
            self.env[spec["name"] + ".b"] = base
        self.env[spec["name"]] = t

    def step(self, op, k):
        try:
            outs = exec_op(self.env, op)
        except Exception as e:  # noqa: BLE001 - every PyTorch error counts as an error
            self.status = ("error", k, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
            return None
        snap = {}
        for j, t in enumerate(outs):
            name = "%s.%d" % (out_prefix(op, k), j)
            self.env[name] = t
            snap[name] = snapshot(t)
        self.steps.append(snap)
        return outs

    def result(self, backward):
        if self.status:
            return {"status": self.status[0], "step": self.status[1], "msg": self.status[2], "steps": self.steps}
        vals = {name: snapshot(t) for name, t in self.env.items()}
        r = {"status": "ok", "steps": self.steps, "values": vals}
        if backward:
            try:
                self.env[backward].sum().backward()
                r["bwd"] = "ok"
                r["grads"] = {n: (None if b.grad is None else enc(b.grad)) for n, b in self.leaves}
            except Exception as e:  # noqa: BLE001
                r["bwd"] = "error"
                r["bwd_msg"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return r


def run_torch(prog):
    """PyTorch's result of a program."""
    run = Run()
    try:
        for spec in prog["inputs"]:
            run.add_input(spec)
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "step": -1, "msg": str(e)}
    for k, op in enumerate(prog["ops"]):
        if run.step(op, k) is None:
            break
    return run.result(prog.get("backward"))


# ---------------------------------------------------------------- program generation

EDGE_F = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-40, -1e-30, 1e-8,
          3e38, -3e38, 65504.0, 7e4, 1e300, 88.8, -104.0, 710.0, 1e-310]
EDGE_I = {
    "int64": [0, -1, 1, 2**63 - 1, -2**63, 2**31, -2**31 - 1, 255, 256, 7],
    "int32": [0, -1, 1, 2**31 - 1, -2**31, 255, 256, 7],
    "uint8": [0, 1, 255, 128, 127, 7],
}
IRANGE = {"int64": (-2**63, 2**63 - 1), "int32": (-2**31, 2**31 - 1), "uint8": (0, 255)}
DTYPE_W = [("float32", 30), ("float64", 14), ("float16", 9), ("bfloat16", 9), ("int64", 16), ("int32", 8),
           ("uint8", 6), ("bool", 8)]


def wchoice(rng, pairs):
    tot = sum(w for _, w in pairs)
    r = rng.random() * tot
    for v, w in pairs:
        r -= w
        if r < 0:
            return v
    return pairs[-1][0]


def numel(shape):
    return math.prod(shape)


class Gen:
    """Generates one program, running it in PyTorch as it grows."""

    def __init__(self, rng, ops, pid):
        self.rng = rng
        self.ops_allowed = ops
        self.prog = {"id": pid, "inputs": [], "ops": []}
        self.run = Run()
        self.edge = rng.choice([0.0, 0.0, 0.05, 0.05, 0.2, 0.5])
        self.grad = rng.random() < 0.4
        self.outs = []  # names of op outputs

    # ---- values
    def rand_dtype(self):
        return wchoice(self.rng, DTYPE_W)

    def rand_shape(self, max_ndim=4):
        r = self.rng
        nd = wchoice(r, [(0, 14), (1, 30), (2, 30), (3, 20), (4, 6)][: max_ndim + 1])
        return [wchoice(r, [(0, 3), (1, 20), (2, 25), (3, 25), (4, 15), (5, 12)]) for _ in range(nd)]

    def rand_value(self, dtype):
        r = self.rng
        if dtype == "bool":
            return r.random() < 0.5
        if dtype in FLOATS:
            if r.random() < self.edge:
                return r.choice(EDGE_F)
            if r.random() < 0.3:
                return float(r.randint(-6, 6)) + r.choice([0.0, 0.5])
            return r.gauss(0, 2)
        if r.random() < self.edge:
            return r.choice(EDGE_I[dtype])
        lo, hi = (0, 12) if dtype == "uint8" else (-6, 6)
        return r.randint(lo, hi)

    def new_input(self, dtype=None, shape=None, views=True, rg=None, data=None):
        r = self.rng
        dtype = dtype or self.rand_dtype()
        shape = list(self.rand_shape() if shape is None else shape)
        base_shape, vs = list(shape), []
        if isinstance(views, list):
            vs = views  # given by the caller, with a base of the same shape
        elif views and r.random() < 0.3:
            kind = r.choice(["t", "slice", "expand", "permute"])
            nd = len(shape)
            if kind == "t" and nd >= 2:
                d0, d1 = r.sample(range(nd), 2)
                base_shape[d0], base_shape[d1] = shape[d1], shape[d0]
                vs = [["t", d0, d1]]
            elif kind == "slice" and nd >= 1:
                d = r.randrange(nd)
                step, start = r.choice([1, 2, 3]), r.choice([0, 1])
                base_shape[d] = start + shape[d] * step + r.choice([0, 1])
                vs = [["slice", d - nd if r.random() < 0.3 else d, start, start + shape[d] * step, step]]
            elif kind == "expand" and nd >= 1:
                base_shape = [1 if (s != 1 and r.random() < 0.5) else s for s in shape]
                drop = r.randint(0, nd) if r.random() < 0.3 else 0
                base_shape = base_shape[drop:]
                vs = [["expand", shape]]
            elif kind == "permute" and nd >= 2:
                perm = list(range(nd))
                r.shuffle(perm)
                inv = [0] * nd
                for i, p in enumerate(perm):
                    inv[p] = i
                base_shape = [shape[inv[i]] for i in range(nd)]
                # base.permute(perm) has shape[i] = base_shape[perm[i]]
                base_shape = [0] * nd
                for i, p in enumerate(perm):
                    base_shape[p] = shape[i]
                vs = [["permute", perm]]
        if data is None:
            data = [self.rand_value(dtype) for _ in range(numel(base_shape))]
        if rg is None:
            rg = self.grad and dtype in FLOATS and r.random() < 0.8
        # Store the values as the dtype holds them, so both sides start from the same bits.
        t = torch.tensor([pf(v) for v in data] if dtype in FLOATS else data, dtype=DTYPES[dtype])
        data = [jf(v) for v in t.to(torch.float64).tolist()] if dtype in FLOATS else t.tolist()
        name = "a%d" % len(self.prog["inputs"])
        spec = {"name": name, "dtype": dtype, "shape": base_shape, "data": data}
        if vs:
            spec["views"] = vs
        if rg:
            spec["rg"] = True
        self.prog["inputs"].append(spec)
        self.run.add_input(spec)
        return name

    def index_input(self, size, shape, oob=0.04):
        """An int64 index tensor with entries in [-size, size) mostly valid."""
        r = self.rng
        data = []
        for _ in range(numel(shape)):
            if r.random() < oob:
                data.append(r.choice([size, -size - 1, size + 3]))
            elif size > 0:
                data.append(r.randrange(size) - (size if r.random() < 0.1 else 0))
            else:
                data.append(0)
        return self.new_input("int64", shape, views=False, rg=False, data=data)

    def t(self, name):
        return self.run.env[name]

    def index_list(self, xs, none_p, oob):
        """An aten::index list for a tensor of shape xs: None (with
        probability none_p, drawn only when positive), bool masks and
        integer indices of one random shape."""
        r = self.rng
        k = r.randint(1, len(xs))
        ish = [r.randint(0, 3) for _ in range(r.randint(0, 2))]
        idx = []
        for d in range(k):
            if none_p > 0 and r.random() < none_p:
                idx.append(None)
            elif r.random() < 0.15:
                idx.append(self.new_input("bool", xs[d:d + 1], views=False, rg=False))
            else:
                idx.append(self.index_input(xs[d], ish, oob))
        return idx

    def pick(self, pred=lambda t: True, fresh=0.35):
        """An existing value satisfying pred (recent op outputs preferred), or a new input."""
        r = self.rng
        if r.random() >= fresh:
            cands = [n for n in self.outs if pred(self.t(n))]
            if cands and r.random() < 0.7:
                return cands[-1] if r.random() < 0.6 else r.choice(cands)
            cands = [n for n in self.run.env if not n.endswith(".b") and pred(self.t(n))]
            if cands:
                return r.choice(cands)
        for _ in range(4):
            n = self.new_input()
            if pred(self.t(n)):
                return n
        return n

    def like(self, x, dtype=None):
        """A second operand for x: same, broadcastable, 0-d, or random shape."""
        r = self.rng
        sh = list(self.t(x).shape)
        k = r.random()
        if k < 0.45:
            shape = sh
        elif k < 0.7:
            shape = [1 if r.random() < 0.4 else s for s in sh][r.randint(0, len(sh)) if r.random() < 0.3 else 0:]
        elif k < 0.85:
            shape = []
        elif k < 0.92:
            shape = [s for s in sh] + [1] if r.random() < 0.5 else [2] + sh
        else:
            shape = None
        return self.new_input(dtype, shape)

    def operand(self, x, scalar_p=0.3):
        r = self.rng
        if r.random() < scalar_p:
            return self.scalar()
        if r.random() < 0.25:
            sh = tuple(self.t(x).shape)
            return self.pick(lambda t: tuple(t.shape) == sh, fresh=0.0)
        return self.like(x)

    def scalar(self, kinds=("int", "float", "bool")):
        r = self.rng
        k = r.choice(kinds)
        if k == "bool":
            return {"bool": r.random() < 0.5}
        if k == "int":
            return {"int": r.choice([0, 1, 2, -1, 3, -7, 100, 2**31, -2**63, 2**63 - 1]) if r.random() < 0.3
                    else r.randint(-4, 4)}
        if r.random() < 0.3:
            return {"float": jf(r.choice(EDGE_F))}
        return {"float": r.choice([0.5, -1.5, 2.0, 0.1, 1e10, -3.25, 1e-3])}

    def dim(self, x, oob=0.04):
        r = self.rng
        nd = self.t(x).dim()
        if r.random() < oob:
            return r.choice([nd, -nd - 1, nd + 2])
        lo, hi = (-1, 0) if nd == 0 else (-nd, nd - 1)
        return r.randint(lo, hi)

    def dims(self, x):
        r = self.rng
        nd = self.t(x).dim()
        if nd == 0:
            return r.choice([[], [0], [-1]])
        k = r.randint(0 if r.random() < 0.1 else 1, nd)
        ds = r.sample(range(nd), k)
        ds = [d - nd if r.random() < 0.3 else d for d in ds]
        if r.random() < 0.03:
            ds.append(ds[0] if ds else nd)
        return ds

    def float_x(self):
        return self.pick(lambda t: t.is_floating_point())

    # ---- ops
    def gen_op(self, name):
        """Arguments of op `name`, or None when it cannot be generated here."""
        r = self.rng
        if name in UNARY or name in NOARG or name in UNARY_INPLACE:
            if name.endswith("_"):
                return [self.pick(lambda t: not (t.is_leaf and t.requires_grad), fresh=0.2)]
            return [self.pick()]
        base = name[:-1] if name.endswith("_") else name
        if base in BINARY:
            if name.endswith("_"):
                x = self.pick(lambda t: not (t.is_leaf and t.requires_grad), fresh=0.2)
            else:
                x = self.pick()
            tensor_only = base in ("maximum", "minimum") or base.startswith("logical")
            y = self.operand(x, 0.0 if tensor_only else 0.35)
            if base in ("add", "sub") and r.random() < 0.25 and name != "sub_":
                return [x, y, self.scalar(("int", "float", "bool"))]
            if base == "div" and r.random() < 0.5:
                return [x, y, r.choice(["trunc", "floor"])]
            return [x, y]
        if base in MATH:
            want_int = base in MATH_INT
            pred = (lambda t: not t.is_floating_point()) if want_int else (lambda t: True)
            if name.endswith("_"):
                x = self.pick(lambda t: pred(t) and not (t.is_leaf and t.requires_grad), fresh=0.2)
            else:
                x = self.pick(pred)
            y = self.operand(x, 0.0 if base in MATH_TENSOR_ONLY else 0.35)
            if want_int and isinstance(y, str) and r.random() < 0.7:
                y = self.like(x, self.t(x).dtype)
            return [x, y]
        if name == "nan_to_num":
            pos = r.choice([None, 1.0, -2.5, 1e10])
            return [self.pick(), r.choice([0.0, 1.5, -7.0]), pos, r.choice([None, -1.0, 3.0])]
        if name == "lerp":
            x = self.pick(lambda t: t.is_floating_point())
            end = self.like(x, self.t(x).dtype)
            w = self.like(x, self.t(x).dtype) if r.random() < 0.5 else self.scalar(("float",))
            return [x, end, w]
        if name == "clamp_t":
            x = self.pick()
            lo = self.like(x) if r.random() < 0.7 else None
            hi = self.like(x) if r.random() < 0.7 or lo is None else None
            return [x, lo, hi]
        if name in RLHS:
            return [self.scalar(), self.pick()]
        if name == "softplus":
            return [self.pick(), r.choice([1.0, 2.0, 0.5]), r.choice([20.0, 1.0, 5.0])]
        if name == "where":
            x = self.pick()
            c = self.pick(lambda t: t.dtype == torch.bool, fresh=0.0) if r.random() < 0.5 else None
            if c is None or r.random() < 0.3:
                c = self.like(x, "bool" if r.random() < 0.95 else None)
            y = self.operand(x, 0.3)
            return [c, x if r.random() < 0.8 else self.scalar(), y]
        if name in ("masked_fill", "masked_fill_"):
            x = self.pick(lambda t: not (t.is_leaf and t.requires_grad), fresh=0.2) if name.endswith("_") \
                else self.pick()
            return [x, self.like(x, "bool" if r.random() < 0.95 else None), self.scalar()]
        if name in ("clamp", "clamp_"):
            x = self.pick(lambda t: not (t.is_leaf and t.requires_grad), fresh=0.2) if name.endswith("_") \
                else self.pick()
            lo = self.scalar(("int", "float")) if r.random() < 0.7 else None
            hi = self.scalar(("int", "float")) if r.random() < 0.7 else None
            return [x, lo, hi]
        if name in ("clamp_min", "clamp_max"):
            return [self.pick(), self.scalar(("int", "float"))]
        if name == "scalar_pow":
            return [self.scalar(("int", "float")), self.pick()]
        if name in ("sum_dim", "amax", "amin", "all_dim", "any_dim", "mean_dim", "logsumexp"):
            x = self.pick()
            return [x, self.dims(x), r.random() < 0.4]
        if name == "sum_dtype":
            x = self.pick()
            if r.random() < 0.3:
                return [x, None, False, self.rand_dtype()]
            return [x, self.dims(x), r.random() < 0.4, self.rand_dtype()]
        if name in ("prod_dim", "max_dim", "min_dim"):
            x = self.pick()
            return [x, self.dim(x), r.random() < 0.4]
        if name in ("argmax", "argmin"):
            x = self.pick()
            return [x, self.dim(x) if r.random() < 0.7 else None, r.random() < 0.4]
        if name in ("cumsum", "cumprod", "softmax", "log_softmax", "unsqueeze", "squeeze_dim", "unbind"):
            x = self.pick()
            if name == "unsqueeze":
                nd = self.t(x).dim()
                return [x, r.randint(-nd - 1, nd) if r.random() < 0.95 else nd + 1]
            return [x, self.dim(x)]
        if name in ("var", "std"):
            return [self.pick(), r.choice([0, 1, 1, 2])]
        if name in ("var_dim", "std_dim"):
            x = self.pick()
            return [x, self.dims(x) if r.random() < 0.8 else None, r.choice([0, 1, 1, 2]), r.random() < 0.4]
        if name == "norm":
            return [self.pick(), jf(r.choice([2.0, 1.0, math.inf, -math.inf, 0.0, 3.0, 0.5]))]
        if name == "norm_dim":
            x = self.pick()
            p = jf(r.choice([2.0, 1.0, math.inf, -math.inf, 0.0, 3.0]))
            return [x, p, self.dims(x) if r.random() < 0.8 else None, r.random() < 0.4]
        if name in ("mm", "bmm", "mv", "dot", "outer", "matmul"):
            nd = {"mm": (2, 2), "bmm": (3, 3), "mv": (2, 1), "dot": (1, 1), "outer": (1, 1)}.get(name)
            if nd is None:
                nd = (r.randint(1, 4), r.randint(1, 4))
            dt = self.rand_dtype() if r.random() < 0.8 else None
            sa = [r.randint(0, 4) for _ in range(nd[0])]
            x = self.new_input(dt, sa)
            if name == "outer":
                sb = [r.randint(0, 4)]
            else:
                sb = [r.randint(1, 3) for _ in range(nd[1])]
                if r.random() < 0.9:
                    sb[-2 if nd[1] >= 2 else -1] = sa[-1]
                if nd[0] >= 3 and nd[1] >= 3 and r.random() < 0.8:
                    sb[:-2] = sa[:-2][-(nd[1] - 2):] if nd[1] - 2 <= nd[0] - 2 else sb[:-2]
            y = self.new_input(dt if r.random() < 0.9 else None, sb)
            return [x, y]
        if name in ("view", "reshape"):
            x = self.pick()
            n = self.t(x).numel()
            shape = self.factor(n)
            if shape and r.random() < 0.3:
                shape[r.randrange(len(shape))] = -1
            return [x, shape]
        if name == "permute":
            x = self.pick()
            p = list(range(self.t(x).dim()))
            r.shuffle(p)
            return [x, [q - len(p) if r.random() < 0.3 else q for q in p]]
        if name == "transpose":
            x = self.pick()
            return [x, self.dim(x), self.dim(x)]
        if name == "expand":
            x = self.pick()
            sh = list(self.t(x).shape)
            new = [r.randint(1, 3) if s == 1 else (-1 if r.random() < 0.3 else s) for s in sh]
            if r.random() < 0.3:
                new = [r.randint(0, 3)] + new
            return [x, new]
        if name == "narrow":
            x = self.pick()
            d = self.dim(x)
            size = self.t(x).shape[d] if -self.t(x).dim() <= d < max(self.t(x).dim(), 1) and self.t(x).dim() else 1
            start = r.randint(-size, size)
            return [x, d, start, r.randint(0, max(size - (start % max(size, 1)), 0))]
        if name == "slice":
            x = self.pick(lambda t: t.dim() > 0)
            d = self.dim(x)
            return [x, d, r.choice([None, 0, 1, -1, -2, 3]), r.choice([None, 2, -1, 5, 100]), r.choice([1, 1, 2, 3])]
        if name == "select":
            x = self.pick(lambda t: t.dim() > 0)
            d = self.dim(x)
            size = self.t(x).shape[d] if -self.t(x).dim() <= d < self.t(x).dim() else 1
            return [x, d, r.randint(-size, size)]
        if name == "squeeze_dims":
            x = self.pick()
            return [x, self.dims(x)]
        if name == "flatten":
            x = self.pick()
            a, b = self.dim(x), self.dim(x)
            return [x, a, b]
        if name == "unflatten":
            x = self.pick(lambda t: t.dim() > 0)
            d = self.dim(x)
            size = self.t(x).shape[d] if -self.t(x).dim() <= d < self.t(x).dim() else 1
            sizes = self.factor(size, 2)
            if sizes and r.random() < 0.3:
                sizes[0] = -1
            return [x, d, sizes]
        if name in ("split", "chunk"):
            x = self.pick(lambda t: t.dim() > 0)
            return [x, r.randint(1, 3) if r.random() < 0.97 else 0, self.dim(x)]
        if name in ("gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_value"):
            if name.endswith("_"):
                x = self.pick(lambda t: not (t.is_leaf and t.requires_grad), fresh=0.2)
            else:
                x = self.pick()
            d = self.dim(x, 0.02)
            xs = list(self.t(x).shape)
            nd = len(xs)
            size = xs[d] if -nd <= d < nd else 1
            ish = [r.randint(0, s) for s in xs] if r.random() < 0.9 else self.rand_shape()
            if name == "gather" and r.random() < 0.5 and -nd <= d < nd:
                ish[d] = r.randint(0, 5)
            idx = self.index_input(size, ish)
            if name == "gather":
                return [x, d, idx]
            if name == "scatter_value":
                return [x, d, idx, self.scalar()]
            src_shape = [s + (1 if r.random() < 0.3 else 0) for s in ish]
            src = self.new_input(DNAME[self.t(x).dtype] if r.random() < 0.9 else None, src_shape, views=False)
            return [x, d, idx, src]
        if name == "index_select":
            x = self.pick()
            d = self.dim(x, 0.02)
            nd = self.t(x).dim()
            size = self.t(x).shape[d] if -nd <= d < nd and nd else 1
            return [x, d, self.index_input(size, [r.randint(0, 4)] if r.random() < 0.9 else [])]
        if name == "index":
            x = self.pick(lambda t: t.dim() > 0)
            xs = list(self.t(x).shape)
            return [x, self.index_list(xs, 0.4, 0.04)]
        if name in ("index_put", "index_put_"):
            if name == "index_put_":
                x = self.pick(lambda t: t.dim() > 0 and not (t.is_leaf and t.requires_grad), fresh=0.3)
            else:
                x = self.pick(lambda t: t.dim() > 0)
            xs = list(self.t(x).shape)
            # No None entries: aten::index_put_ called directly with them
            # fails inside PyTorch 2.15 (internal asserts, undefined tensors);
            # Python's x[:, i] = v applies the slice as a view first.
            idx = self.index_list(xs, 0.0, 0.02)
            try:
                res = list(torch.ops.aten.index.Tensor(self.t(x), [None if v is None else self.t(v) for v in idx]).shape)
            except Exception:
                res = self.rand_shape()
            # A value of the result's shape, or one that broadcasts to it.
            vs = [1 if r.random() < 0.25 else s for s in res]
            vs = vs[r.randint(0, len(vs)):] if r.random() < 0.3 else vs
            dt = DNAME[self.t(x).dtype] if r.random() < 0.95 else None
            return [x, idx, self.new_input(dt, vs, views=False), r.random() < 0.4]
        if name in ("tril", "triu"):
            return [self.pick(), r.randint(-2, 2)]
        if name == "one_hot":
            x = self.index_input(4, self.rand_shape(3), 0.02)
            return [x, r.choice([None, 4, 5, 2])]
        if name in ("sort", "argsort"):
            x = self.pick()
            return [x, self.dim(x), r.random() < 0.5]
        if name == "topk":
            x = self.pick()
            d = self.dim(x)
            nd = self.t(x).dim()
            size = (self.t(x).shape[d] if -nd <= d < nd else 1) if nd else 1
            return [x, r.randint(0, size + (1 if r.random() < 0.05 else 0)), d, r.random() < 0.7]
        if name == "kthvalue":
            x = self.pick()
            d = self.dim(x)
            nd = self.t(x).dim()
            size = (self.t(x).shape[d] if -nd <= d < nd else 1) if nd else 1
            return [x, r.randint(0, size + 1), d, r.random() < 0.4]
        if name in ("median_dim", "nanmedian_dim", "mode", "nansum_dim", "aminmax"):
            x = self.pick()
            if name == "nansum_dim":
                return [x, self.dims(x), r.random() < 0.4]
            if name == "aminmax" and r.random() < 0.3:
                return [x, None, r.random() < 0.4]
            return [x, self.dim(x), r.random() < 0.4]
        if name in ("median", "nanmedian", "nansum", "count_nonzero"):
            return [self.pick()]
        if name in ("cummax", "cummin", "logcumsumexp"):
            x = self.pick()
            return [x, self.dim(x)]
        if name == "diff":
            x = self.pick()
            return [x, r.choice([0, 1, 1, 2, 3]), self.dim(x)]
        if name in ("unique", "unique_consecutive"):
            x = self.pick()
            return [x, self.dim(x) if r.random() < 0.4 else None]
        if name in ("cat", "stack"):
            x = self.pick()
            xs = list(self.t(x).shape)
            d = self.dim(x) if name == "cat" else r.randint(-len(xs) - 1, len(xs))
            parts = [x]
            for _ in range(r.randint(0, 2)):
                sh = list(xs)
                if name == "cat" and -len(xs) <= d < len(xs) and r.random() < 0.7:
                    sh[d] = r.randint(0, 3)
                if r.random() < 0.05:
                    sh = [0]
                parts.append(self.new_input(DNAME[self.t(x).dtype] if r.random() < 0.6 else None, sh))
            return [parts, d]
        if name == "to":
            return [self.pick(), self.rand_dtype()]
        if name == "fill_":
            return [self.pick(lambda t: not (t.is_leaf and t.requires_grad), fresh=0.2), self.scalar()]
        if name == "copy_":
            x = self.pick(lambda t: not (t.is_leaf and t.requires_grad), fresh=0.2)
            return [x, self.like(x)]
        if name == "full_like":
            return [self.pick(), self.scalar()]
        r = self.gen_cov(name)
        return r if r is not None else self.gen_nn(name)

    # ---- the op-coverage ops (issue 14)
    def size_of(self, x, d):
        """Size of dim d of x (1 for a 0-d tensor or a bad dim)."""
        sh = list(self.t(x).shape)
        return sh[d] if sh and -len(sh) <= d < len(sh) else 1

    def inplace_target(self, pred=lambda t: True):
        return self.pick(lambda t: pred(t) and not (t.is_leaf and t.requires_grad), fresh=0.2)

    def index_of(self, size, shape, oob=0.04, dtype="int64"):
        """index_input, sometimes in another dtype (int32, or a float/uint8 one PyTorch refuses)."""
        name = self.index_input(size, shape, oob)
        if dtype == "int64":
            return name
        spec = self.prog["inputs"][-1]
        data = spec["data"] if dtype != "float32" else [float(v) for v in spec["data"]]
        if dtype == "uint8":
            data = [v % 256 for v in data]
        self.prog["inputs"].pop()
        self.run.env.pop(name)
        return self.new_input(dtype, shape, views=False, rg=False, data=data)

    def index_dtype(self, allowed=("int64",)):
        r = self.rng
        if r.random() < 0.06:
            return r.choice(["float32", "uint8", "int32"])
        return r.choice(allowed)

    def list_of(self, k, pred_shape, dtype=None):
        return [self.new_input(dtype, pred_shape()) for _ in range(k)]

    def sorted_input(self, dtype, shape, unsorted=False):
        """An input sorted along its last dim (its values drawn as any input's)."""
        data = [self.rand_value(dtype) for _ in range(numel(shape))]
        t = torch.tensor([pf(v) for v in data] if dtype in FLOATS else data, dtype=DTYPES[dtype]).reshape(shape)
        if not unsorted and t.dim() > 0 and dtype != "bool":
            t = torch.sort(t, dim=-1).values
        vals = t.flatten().tolist()
        return self.new_input(dtype, shape, views=False, rg=False, data=vals)

    def square(self, dtype, batch, n, kind=None):
        """A batch of n x n matrices: well conditioned (mostly), symmetric
        positive definite, random, or singular."""
        r = self.rng
        kind = kind or wchoice(r, [("cond", 5), ("spd", 2), ("rand", 2), ("sing", 1)])
        shape = list(batch) + [n, n]
        g = torch.tensor([r.gauss(0, 1) for _ in range(numel(shape))], dtype=torch.float64).reshape(shape)
        if kind == "cond":
            g = g + 3 * torch.eye(n, dtype=torch.float64)
        elif kind == "spd":
            g = g @ g.transpose(-1, -2) + 0.5 * torch.eye(n, dtype=torch.float64)
        elif kind == "sing" and n >= 2:
            g[..., -1, :] = g[..., 0, :] * r.choice([1.0, -2.0, 0.0])
        if dtype not in FLOATS:
            g = g.round()
        data = g.flatten().tolist() if dtype != "bool" else [v > 0 for v in g.flatten().tolist()]
        if r.random() < 0.3 and shape:
            # stored transposed: a non-contiguous view of the same matrices
            tdata = g.transpose(-1, -2).flatten().tolist() if dtype != "bool" else data
            if dtype == "bool":
                tdata = [v > 0 for v in g.transpose(-1, -2).flatten().tolist()]
            return self.new_input(dtype, shape, views=[["t", len(shape) - 2, len(shape) - 1]], data=tdata)
        return self.new_input(dtype, shape, views=False, data=data)

    def lin_dtype(self):
        r = self.rng
        return wchoice(r, [("float32", 10), ("float64", 10), ("float16", 1), ("bfloat16", 1), ("int64", 1),
                           ("int32", 1)])

    def einsum_args(self):
        r = self.rng
        letters = "ijklm"
        size = {c: r.choice([0, 1, 1, 2, 2, 3, 3, 4]) if r.random() < 0.1 else r.randint(1, 4) for c in letters}
        k = r.choice([1, 1, 2, 2, 2, 3])
        ell = r.random() < 0.15
        ell_shape = [r.randint(1, 3) for _ in range(r.randint(0, 2))]
        terms, ops, used = [], [], []
        dt = self.lin_dtype()
        for _ in range(k):
            nd = r.randint(0, 3)
            sub = "".join(r.choice(letters[:4]) for _ in range(nd))
            shape = [size[c] if r.random() < 0.93 else 1 for c in sub]
            if ell and r.random() < 0.8:
                pos = r.randint(0, len(sub))
                e_sh = ell_shape[r.randint(0, len(ell_shape)):] if ell_shape else []
                e_sh = [1 if r.random() < 0.2 else s for s in e_sh]
                sub = sub[:pos] + "..." + sub[pos:]
                shape = shape[:pos] + e_sh + shape[pos:]
            if r.random() < 0.03:
                shape = shape + [2]  # one dim too many
            terms.append(sub)
            used += [c for c in sub if c != "."]
            ops.append(self.new_input(dt if r.random() < 0.95 else None, shape))
        eq = ",".join(terms)
        kind = r.random()
        if kind < 0.3:
            pass  # implicit output
        else:
            uniq = sorted(set(used))
            r.shuffle(uniq)
            out = uniq[:r.randint(0, len(uniq))]
            if r.random() < 0.03:
                out.append("m" if r.random() < 0.5 else (out[0] if out else "z"))
            o = "".join(out)
            if ell and r.random() < 0.8:
                p = r.randint(0, len(o))
                o = o[:p] + "..." + o[p:]
            eq += "->" + o
        if r.random() < 0.05:
            eq = eq.replace(",", ", ") if r.random() < 0.5 else eq + ("," if r.random() < 0.5 else "-")
        return [eq, ops]

    def gen_cov(self, name):
        """Arguments of an op-coverage op, or None."""
        r = self.rng
        inplace = name.endswith("_")
        if name == "flip":
            x = self.pick()
            return [x, self.dims(x) if r.random() < 0.95 else []]
        if name == "roll":
            x = self.pick()
            nd = self.t(x).dim()
            if r.random() < 0.25 or nd == 0:
                shifts = [r.randint(-7, 7) for _ in range(1 if r.random() < 0.95 else 2)]
                return [x, shifts, None]
            ds = self.dims(x)
            shifts = [r.randint(-7, 7) for _ in ds]
            if r.random() < 0.04:
                shifts.append(1)
            return [x, shifts, ds]
        if name in ("repeat", "tile"):
            x = self.pick()
            nd = self.t(x).dim()
            k = r.randint(0, nd + 2) if name == "tile" else r.randint(nd, nd + 2)
            if name == "repeat" and r.random() < 0.04:
                k = max(nd - 1, 0)
            reps = [r.choice([0, 1, 1, 2, 2, 3]) for _ in range(k)]
            if r.random() < 0.02 and reps:
                reps[0] = -1
            return [x, reps]
        if name == "repeat_interleave":
            x = self.pick()
            return [x, r.choice([0, 1, 2, 3]) if r.random() < 0.97 else -1, self.dim(x) if r.random() < 0.7 else None]
        if name == "repeat_interleave_t":
            x = self.pick()
            d = self.dim(x) if r.random() < 0.7 else None
            n = self.t(x).numel() if d is None else self.size_of(x, d)
            if r.random() < 0.2:
                shape = []
            else:
                shape = [n if r.random() < 0.95 else n + 1]
            dt = wchoice(r, [("int64", 10), ("int32", 3), ("float32", 1), ("uint8", 1)])
            data = [r.choice([0, 1, 1, 2, 3]) if r.random() < 0.98 else -1 for _ in range(numel(shape))]
            return [x, self.new_input(dt, shape, views=False, rg=False, data=data), d]
        if name in ("movedim", "moveaxis"):
            x = self.pick()
            nd = self.t(x).dim()
            k = r.randint(0, nd) if nd else r.randint(0, 1)
            src = r.sample(range(nd), k) if nd else [0] * k
            dst = r.sample(range(nd), k) if nd else [-1] * k
            src = [s - nd if r.random() < 0.3 else s for s in src]
            if r.random() < 0.04:
                (src if r.random() < 0.5 else dst).append(0)
            if k == 1 and r.random() < 0.5:
                return [x, src[0], dst[0]]
            return [x, src, dst]
        if name == "swapaxes":
            x = self.pick()
            return [x, self.dim(x), self.dim(x)]
        if name in ("diagonal", "diag_embed"):
            x = self.pick(lambda t: t.dim() >= 2) if name == "diagonal" and r.random() < 0.8 else self.pick()
            nd = self.t(x).dim() + (name == "diag_embed")
            d1, d2 = self.dim(x), self.dim(x)
            if nd >= 2 and r.random() < 0.9:
                d1, d2 = r.sample(range(nd), 2)
                d1, d2 = [d - nd if r.random() < 0.3 else d for d in (d1, d2)]
            return [x, r.randint(-3, 3), d1, d2]
        if name == "unfold":
            x = self.pick()
            d = self.dim(x)
            size = self.size_of(x, d)
            return [x, d, r.randint(0, size + (1 if r.random() < 0.05 else 0)), r.randint(1, 3) if r.random() < 0.97 else 0]
        if name == "diag":
            x = self.pick(lambda t: t.dim() in (1, 2)) if r.random() < 0.9 else self.pick()
            return [x, r.randint(-3, 3)]
        if name == "trace":
            x = self.pick(lambda t: t.dim() == 2) if r.random() < 0.9 else self.pick()
            return [x]
        if name in ("nonzero_tuple", "argwhere", "atleast_1d", "atleast_2d", "atleast_3d"):
            return [self.pick()]
        if name == "masked_select":
            x = self.pick()
            return [x, self.like(x, "bool" if r.random() < 0.95 else None)]
        if name == "masked_scatter":
            x = self.pick()
            sh = list(self.t(x).shape)
            mshape = [1 if r.random() < 0.3 else s for s in sh][r.randint(0, len(sh)) if r.random() < 0.3 else 0:]
            if r.random() < 0.05:
                mshape = self.rand_shape()
            m = self.new_input("bool" if r.random() < 0.95 else "uint8", mshape)
            n = self.t(x).numel()
            src_n = n if r.random() < 0.8 else r.randint(0, n + 2)
            src_shape = self.factor(src_n) if src_n else [0]
            dt = DNAME[self.t(x).dtype] if r.random() < 0.93 else None
            return [x, m, self.new_input(dt, src_shape)]
        if name == "take":
            x = self.pick()
            dt = self.index_dtype(("int64", "int64", "int32"))
            return [x, self.index_of(self.t(x).numel(), self.rand_shape(3), 0.04, dt)]
        if name == "take_along_dim":
            x = self.pick()
            if r.random() < 0.25:
                return [x, self.index_of(self.t(x).numel(), self.rand_shape(3), 0.03), None]
            d = self.dim(x, 0.02)
            sh = list(self.t(x).shape)
            ish = [1 if r.random() < 0.3 else s for s in sh]
            if sh and -len(sh) <= d < len(sh):
                ish[d] = r.randint(0, 4)
            if r.random() < 0.05:
                ish = ish + [1]
            return [x, self.index_of(self.size_of(x, d), ish, 0.03), d]
        if name in ("index_add", "index_add_", "index_copy", "index_copy_", "index_fill", "index_fill_"):
            x = self.inplace_target() if inplace else self.pick()
            d = self.dim(x, 0.02)
            size = self.size_of(x, d)
            k = r.randint(0, 4)
            ish = [k] if r.random() < 0.9 else ([] if r.random() < 0.7 else [1, k])
            allowed = ("int64", "int32") if name.startswith("index_add") else ("int64",)
            idx = self.index_of(size, ish, 0.03, self.index_dtype(allowed))
            if name.startswith("index_fill"):
                v = self.scalar() if r.random() < 0.97 else self.new_input(None, [])
                return [x, d, idx, v] if not isinstance(v, str) else [x, d, idx, self.scalar()]
            sh = list(self.t(x).shape)
            src_shape = list(sh)
            if sh and -len(sh) <= d < len(sh):
                src_shape[d] = numel(ish)
            elif not sh:
                src_shape = [] if r.random() < 0.5 else [numel(ish)]
            if r.random() < 0.05:
                src_shape = self.rand_shape()
            dt = DNAME[self.t(x).dtype] if r.random() < 0.92 else None
            src = self.new_input(dt, src_shape)
            if name.startswith("index_add"):
                return [x, d, idx, src, self.scalar(("int", "float")) if r.random() < 0.5 else {"int": 1}]
            return [x, d, idx, src]
        if name in ("meshgrid", "cartesian_prod"):
            k = r.randint(1, 3)
            dt = self.rand_dtype()
            shape = lambda: [r.randint(0, 4)] if r.random() < (0.75 if name == "meshgrid" else 0.97) else \
                ([] if r.random() < 0.6 else [2, 2])  # noqa: E731
            ts = [self.new_input(dt if r.random() < 0.95 else None, shape()) for _ in range(k)]
            if r.random() < 0.02:
                ts = []
            return [ts, r.choice(["ij", "xy"])] if name == "meshgrid" else [ts]
        if name == "block_diag":
            k = r.randint(0, 3) if r.random() < 0.05 else r.randint(1, 3)
            ts = [self.new_input(None, [r.randint(0, 3) for _ in range(r.choice([0, 1, 2, 2, 2]))] if
                                 r.random() < 0.97 else [1, 1, 1]) for _ in range(k)]
            return [ts]
        if name == "broadcast_tensors":
            x = self.pick()
            return [[x] + [self.like(x) for _ in range(r.randint(0, 2))]]
        if name == "broadcast_to":
            x = self.pick()
            sh = list(self.t(x).shape)
            new = [r.randint(0, 3) if s == 1 else (-1 if r.random() < 0.3 else s) for s in sh]
            if r.random() < 0.3:
                new = [r.randint(0, 3)] + new
            if r.random() < 0.04 and new:
                new[-1] += 1
            return [x, new]
        if name in ("tril_indices", "triu_indices"):
            return [r.randint(0, 4) if r.random() < 0.97 else -1, r.randint(0, 4), r.randint(-4, 4)]
        # ---- counting
        if name == "searchsorted":
            dt = wchoice(r, [("float32", 8), ("float64", 4), ("int64", 5), ("int32", 2), ("float16", 1),
                             ("bfloat16", 1), ("uint8", 1), ("bool", 1)])
            lead = [r.randint(0, 3) for _ in range(r.choice([0, 0, 0, 1, 2]))]
            m = r.randint(0, 6)
            use_sorter = r.random() < 0.2
            seq = self.sorted_input(dt, lead + [m], unsorted=use_sorter)
            vdt = dt if r.random() < 0.85 else self.rand_dtype()
            if not lead and r.random() < 0.15:
                vals = self.scalar(("int", "float"))
            elif not lead:
                vals = self.new_input(vdt, self.rand_shape(3))
            else:
                vals = self.new_input(vdt, (lead if r.random() < 0.95 else lead[:-1] + [5]) + [r.randint(0, 4)])
            sorter = None
            if use_sorter:
                order = torch.argsort(self.t(seq), dim=-1, stable=True) if self.t(seq).dim() else torch.tensor(0)
                data = order.flatten().tolist()
                if r.random() < 0.05 and data:
                    data[0] = m + 1
                sorter = self.new_input("int64" if r.random() < 0.95 else "int32", list(order.shape), views=False,
                                        rg=False, data=data)
            right = r.random() < 0.5
            side = r.choice([None, None, "right" if right else "left"])
            return [seq, vals, right, side, sorter, r.random() < 0.3]
        if name == "bucketize":
            x = self.pick()
            dt = DNAME[self.t(x).dtype] if r.random() < 0.8 else self.rand_dtype()
            b = self.sorted_input(dt, [r.randint(0, 6)] if r.random() < 0.96 else [2, 2])
            return [x, b, r.random() < 0.5, r.random() < 0.3]
        if name == "bincount":
            dt = wchoice(r, [("int64", 10), ("int32", 3), ("uint8", 3), ("float32", 1), ("bool", 1)])
            n = r.randint(0, 8)
            shape = [n] if r.random() < 0.96 else r.choice([[], [2, 2]])
            data = [r.randint(0, 7) if r.random() < 0.98 else -1 for _ in range(numel(shape))]
            if dt == "uint8":
                data = [v % 256 for v in data]
            if dt == "bool":
                data = [bool(v % 2) for v in data]
            x = self.new_input(dt, shape, views=False, rg=False, data=data)
            w = None
            if r.random() < 0.5:
                wdt = wchoice(r, [("float32", 6), ("float64", 4), ("float16", 1), ("int64", 1), ("bfloat16", 1)])
                w = self.new_input(wdt, [numel(shape)] if r.random() < 0.96 else [numel(shape) + 1])
            return [x, w, r.choice([0, 0, 1, 3, 10])]
        if name == "histc":
            x = self.pick(lambda t: t.dtype in (torch.float32, torch.float64)) if r.random() < 0.9 else self.pick()
            lo, hi = r.choice([(0.0, 0.0), (0.0, 0.0), (-2.0, 2.0), (-1.5, 3.0), (1.0, 1.0), (3.0, -3.0),
                               (0.0, 1e-3), (-1e30, 1e30)])
            return [x, r.randint(1, 8) if r.random() < 0.98 else 0, lo, hi]
        # ---- reductions
        if name == "nanmean":
            return [self.pick()]
        if name == "nanmean_dim":
            x = self.pick()
            return [x, self.dims(x), r.random() < 0.4]
        if name == "count_nonzero_dim":
            x = self.pick()
            return [x, self.dims(x)]
        if name in ("var_mean", "std_mean"):
            x = self.pick()
            return [x, self.dims(x) if r.random() < 0.8 else None, r.choice([0, 1, 1, 2]), r.random() < 0.4]
        if name == "diff_pa":
            x = self.pick()
            d = self.dim(x)
            sh = list(self.t(x).shape)

            def part():
                if r.random() < 0.5:
                    return None
                s = list(sh)
                if s and -len(s) <= d < len(s):
                    s[d] = r.randint(0, 3)
                if r.random() < 0.05:
                    s = s + [1] if r.random() < 0.5 else []
                return self.new_input(DNAME[self.t(x).dtype] if r.random() < 0.9 else None, s)
            return [x, r.choice([0, 1, 1, 2, 3]), d, part(), part()]
        if name in ("cumsum_dtype", "cumprod_dtype"):
            x = self.pick()
            return [x, self.dim(x), self.rand_dtype()]
        if name == "mean_dtype":
            x = self.pick()
            return [x, self.dims(x) if r.random() < 0.7 else None, r.random() < 0.4, self.rand_dtype()]
        # ---- linear algebra
        if name in ("addmm", "addmv", "addbmm", "baddbmm"):
            dt = self.lin_dtype()
            bt, n, m, p = r.randint(0, 3), r.randint(0, 4), r.randint(0, 4), r.randint(0, 4)
            odt = lambda: dt if r.random() < 0.95 else self.lin_dtype()  # noqa: E731
            if name == "addmv":
                full = [n]
                a1, a2 = self.new_input(odt(), [n, m]), self.new_input(odt(), [m] if r.random() < 0.97 else [m, 1])
            elif name == "addmm":
                full = [n, p]
                a1 = self.new_input(odt(), [n, m])
                a2 = self.new_input(odt(), [m if r.random() < 0.97 else m + 1, p])
            else:
                full = [bt, n, p] if name == "baddbmm" else [n, p]
                a1 = self.new_input(odt(), [bt, n, m])
                a2 = self.new_input(odt(), [bt if r.random() < 0.97 else bt + 1, m, p])
            ish = [1 if r.random() < 0.25 else s for s in full][r.randint(0, len(full)) if r.random() < 0.25 else 0:]
            inp = self.new_input(odt(), ish)
            if dt in FLOATS:
                beta, alpha = r.choice([1.0, 0.0, 0.5, -1.5, 2.0]), r.choice([1.0, 0.0, 0.5, -2.0])
            else:
                beta, alpha = r.choice([1, 0, 2, -1]), r.choice([1, 0, 3, -1])
            return [inp, a1, a2, beta, alpha]
        if name == "einsum":
            return self.einsum_args()
        if name == "tensordot":
            dt = self.lin_dtype()
            sa = [r.randint(0, 3) for _ in range(r.randint(0, 3))]
            k = r.randint(0, len(sa))
            da = r.sample(range(len(sa)), k)
            sb = [r.randint(1, 3) for _ in range(r.randint(0, 2))]
            db = []
            for dd in da:
                pos = r.randint(0, len(sb))
                sb.insert(pos, sa[dd] if r.random() < 0.97 else sa[dd] + 1)
                db = [q + 1 if q >= pos else q for q in db] + [pos]
            a = self.new_input(dt, sa)
            b = self.new_input(dt if r.random() < 0.95 else self.lin_dtype(), sb)
            if r.random() < 0.25:
                n = r.randint(0, 2)
                b2 = self.new_input(dt, sa[len(sa) - n:] + [r.randint(1, 3)] if n <= len(sa) else [2])
                return [a, b2, n]
            da = [q - len(sa) if r.random() < 0.2 else q for q in da]
            return [a, b, da, db]
        if name == "kron":
            x = self.new_input(self.lin_dtype() if r.random() < 0.7 else None, self.rand_shape(3))
            dt = None if r.random() < 0.3 else DNAME[self.t(x).dtype]
            return [x, self.new_input(dt, self.rand_shape(3))]
        if name == "cross":
            dt = self.lin_dtype()
            nd = r.randint(1, 3)
            sh = [r.randint(0, 3) for _ in range(nd)]
            d = r.randrange(nd)
            sh[d] = 3 if r.random() < 0.95 else 2
            sb = [1 if (r.random() < 0.2 and i != d) else s for i, s in enumerate(sh)]
            return [self.new_input(dt, sh), self.new_input(dt if r.random() < 0.95 else None, sb),
                    d - nd if r.random() < 0.5 else d]
        if name in ("matrix_norm", "inv", "det", "slogdet", "solve", "cholesky", "eigvalsh", "svdvals", "qr_abs"):
            dt = self.lin_dtype()
            batch = [r.randint(0, 3) for _ in range(r.choice([0, 0, 1, 1, 2]))]
            n = r.choice([0, 1, 2, 2, 3, 3, 4])
            if name in ("matrix_norm", "svdvals", "qr_abs") and r.random() < 0.5:
                shape = batch + [n, r.randint(0, 4)]
                x = self.new_input(dt, shape)
            elif r.random() < 0.03:
                x = self.new_input(dt, batch + [n, n + 1] if r.random() < 0.5 else [n])
            else:
                kind = "spd" if name in ("cholesky", "eigvalsh") and r.random() < 0.8 else None
                x = self.square(dt, batch, n, kind)
            if name == "matrix_norm":
                return [x, jf(r.choice(["fro", "nuc", math.inf, -math.inf, 1.0, -1.0, 2.0, -2.0, 3.0])) if
                        r.random() < 0.98 else "fro", r.random() < 0.4]
            if name == "solve":
                sh = list(self.t(x).shape)
                if r.random() < 0.3 and len(sh) >= 1:
                    bsh = sh[:-1]
                else:
                    bsh = sh[:-1] + [r.randint(0, 3)]
                    if r.random() < 0.2 and len(bsh) > 2:
                        bsh = bsh[1:]
                return [x, self.new_input(DNAME[self.t(x).dtype] if r.random() < 0.95 else None, bsh)]
            if name == "cholesky":
                return [x, r.random() < 0.3]
            if name == "eigvalsh":
                return [x, r.choice(["L", "U"])]
            if name == "qr_abs":
                return [x, r.choice(["reduced", "complete", "r"])]
            return [x]
        return None

    # ---- the nn op group
    def nn_dtype(self):
        return wchoice(self.rng, [("float32", 45), ("float64", 35), ("float16", 6), ("bfloat16", 6), ("int64", 2),
                                  ("int32", 1)])

    def nn_x(self, shape, dtype=None, ndims=(), data=None):
        """A float input of `shape`, or (sometimes) an earlier float output of a rank in ndims."""
        r = self.rng
        if ndims and data is None and r.random() < 0.25:
            cands = [n for n in self.outs if self.t(n).is_floating_point() and self.t(n).dim() in ndims]
            if cands:
                return r.choice(cands)
        return self.new_input(dtype or self.nn_dtype(), shape, views=data is None, data=data)

    def iol(self, vals):
        """An int-or-tuple argument: one int when the values agree (mostly), else the list;
        rarely a list of the wrong length."""
        r = self.rng
        if r.random() < 0.02:
            return vals + [vals[-1]]
        if len(set(vals)) == 1 and r.random() < 0.6:
            return vals[0]
        return list(vals)

    def dt_like(self, dt, p=0.97):
        return dt if self.rng.random() < p else self.nn_dtype()

    def gen_pool(self, name):
        r = self.rng
        k = 2 if "2d" in name else 1
        batched = r.random() < 0.7
        sp = [r.randint(1, 7) for _ in range(k)]
        if r.random() < 0.03:
            sp[0] = 0
        shape = ([r.choice([1, 1, 2, 2, 3]) if r.random() > 0.05 else 0] if batched else []) + [r.randint(1, 3)] + sp
        if r.random() < 0.03:
            shape = shape[1:] if r.random() < 0.5 else shape + [2]
        x = self.nn_x(shape, ndims=(k + 1, k + 2))
        xs = list(self.t(x).shape)
        sp = xs[-k:] if len(xs) >= k else [1] * k
        if name.startswith("adaptive"):
            out = [r.randint(1, 5) if r.random() < 0.96 else r.choice([0, -1]) for _ in range(k)]
            return [x, self.iol(out)]
        ks = [r.randint(1, max(1, min(4, s))) if r.random() < 0.9 else r.randint(1, 5) for s in sp]
        if r.random() < 0.02:
            ks[0] = r.choice([0, -1])
        stride = None if r.random() < 0.4 else self.iol([r.choice([1, 1, 2, 3]) if r.random() < 0.98 else 0
                                                        for _ in range(k)])
        pad = [r.randint(0, kk // 2) if r.random() < 0.4 else 0 for kk in ks]
        if r.random() < 0.03:
            pad[0] = ks[0]  # more than half the kernel
        ceil = r.random() < 0.35
        if name.startswith("max_pool"):
            dil = [1 if r.random() < 0.7 else 2 for _ in range(k)]
            return [x, self.iol(ks), stride, self.iol(pad), self.iol(dil), ceil]
        args = [x, self.iol(ks), stride, self.iol(pad), ceil, r.random() < 0.6]
        if name == "avg_pool2d":
            args.append(None if r.random() < 0.8 else r.choice([1, 2, 3, 5, 0]))
        return args

    def gen_conv(self, name):
        r = self.rng
        k = 2 if name.endswith("2d") else 1
        tr = "transpose" in name
        groups = r.choice([1, 1, 1, 2, 3])
        cin, cout = groups * r.randint(1, 2), groups * r.randint(1, 3)
        batched = r.random() < 0.75
        n = r.choice([1, 2, 2, 3]) if r.random() > 0.04 else 0
        ks = [r.randint(1, 3) for _ in range(k)]
        sp = [r.randint(1, 6) for _ in range(k)]
        dt = self.nn_dtype()
        x = self.new_input(dt, ([n] if batched else []) + [cin] + sp)
        wshape = ([cin, cout // groups] if tr else [cout, cin // groups]) + ks
        if r.random() < 0.04:
            wshape[r.randrange(len(wshape))] += 1
        w = self.new_input(self.dt_like(dt), wshape)
        bias = None if r.random() < 0.35 else self.new_input(self.dt_like(dt), [cout if r.random() < 0.97 else
                                                                                 cout + 1])
        g = groups if r.random() < 0.97 else r.choice([0, groups + 1])
        stride = [r.choice([1, 1, 2, 3]) for _ in range(k)]
        dil = [r.choice([1, 1, 1, 2]) for _ in range(k)]
        if r.random() < 0.02:
            stride[0] = 0
        if tr:
            pad = [r.randint(0, 2) for _ in range(k)]
            op = [r.randint(0, max(s, d) - 1) if r.random() < 0.4 else 0 for s, d in zip(stride, dil)]
            if r.random() < 0.03:
                op[0] = max(stride[0], dil[0])
            return [x, w, bias, self.iol(stride), self.iol(pad), self.iol(op), g, self.iol(dil)]
        p = r.random()
        if p < 0.15:
            padding = "same"
            if r.random() < 0.8:
                stride = [1] * k
        elif p < 0.25:
            padding = "valid"
        else:
            padding = self.iol([r.randint(0, 2) for _ in range(k)])
        return [x, w, bias, self.iol(stride), padding, self.iol(dil), g]

    def pos_input(self, dt, shape, lo=0.1, hi=3.0):
        """An input of positive values (variances, class weights)."""
        r = self.rng
        return self.new_input(dt, shape, views=False, rg=False,
                              data=[r.uniform(lo, hi) for _ in range(numel(shape))])

    def unit_input(self, dt, shape, edge=0.1, rg=None):
        """An input of values in [0, 1] (probabilities), some exactly 0 or 1."""
        r = self.rng
        data = [r.choice([0.0, 1.0]) if r.random() < edge else r.random() for _ in range(numel(shape))]
        return self.new_input(dt, shape, views=False, data=data, rg=rg)

    def gen_nn(self, name):
        """Arguments of an nn op, or None."""
        r = self.rng
        if name in NN_POOL:
            return self.gen_pool(name)
        if name in ("conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"):
            return self.gen_conv(name)
        if name == "linear":
            din, dout = r.randint(1, 4), r.randint(1, 4)
            dt = self.nn_dtype()
            lead = [r.randint(0 if r.random() < 0.05 else 1, 3) for _ in range(r.choice([0, 1, 1, 2]))]
            x = self.new_input(dt, lead + [din])
            w = self.new_input(self.dt_like(dt), [dout, din if r.random() < 0.97 else din + 1])
            return [x, w, None if r.random() < 0.3 else self.new_input(self.dt_like(dt), [dout])]
        if name in ("layer_norm", "rms_norm"):
            x = self.nn_x([r.randint(1, 4) if r.random() < 0.97 else 0 for _ in range(r.randint(1, 4))],
                          ndims=(1, 2, 3, 4))
            sh = list(self.t(x).shape)
            dt = DNAME[self.t(x).dtype]
            m = r.randint(1, len(sh)) if sh else 0
            ns = sh[len(sh) - m:]
            if r.random() < 0.03:
                ns = ns + [2] if r.random() < 0.5 else [s + 1 for s in ns]
            wsh = ns if r.random() < 0.97 else ns + [1]
            w = None if r.random() < 0.3 else self.new_input(self.dt_like(dt), wsh)
            if name == "rms_norm":
                return [x, ns, w, r.choice([None, None, 1e-6, 1e-5, 0.1])]
            b = None if r.random() < 0.4 else self.new_input(self.dt_like(dt), ns)
            return [x, ns, w, b, r.choice([1e-5, 1e-5, 1e-3, 0.1, 0.0])]
        if name == "group_norm":
            g = r.randint(1, 3)
            c = g * r.randint(1, 3)
            shape = [r.randint(1, 3) if r.random() > 0.04 else 0, c] + [r.randint(1, 4) for _ in range(r.randint(0, 2))]
            dt = self.nn_dtype()
            x = self.new_input(dt, shape)
            if r.random() < 0.04:
                g = r.choice([c + 1, 0, 2 * c])
            w = None if r.random() < 0.3 else self.new_input(self.dt_like(dt), [c if r.random() < 0.97 else c + 1])
            b = None if r.random() < 0.4 else self.new_input(self.dt_like(dt), [c])
            return [x, g, w, b, r.choice([1e-5, 1e-5, 1e-3, 0.1])]
        if name == "batch_norm":
            c = r.randint(1, 3)
            shape = [r.choice([1, 2, 2, 3, 4]), c] + [r.randint(1, 3) for _ in range(r.choice([0, 0, 1, 2]))]
            if r.random() < 0.03:
                shape = shape[1:]
            dt = self.nn_dtype()
            x = self.new_input(dt, shape)
            training = r.random() < 0.5
            sdt = dt if r.random() < 0.8 else "float32"
            csz = c if r.random() < 0.97 else c + 1
            if r.random() < 0.85 or not training:
                rm = self.new_input(sdt, [csz], views=False, rg=False) if r.random() < 0.97 else None
                rv = self.pos_input(sdt, [csz]) if r.random() < 0.97 else None
            else:
                rm = rv = None
            w = None if r.random() < 0.3 else self.new_input(self.dt_like(dt), [c])
            b = None if r.random() < 0.4 else self.new_input(self.dt_like(dt), [c])
            return [x, rm, rv, w, b, training, r.choice([0.1, 0.1, 0.5, 0.0, 1.0]), r.choice([1e-5, 1e-3, 0.1])]
        if name == "embedding":
            v, d = r.randint(1, 6), r.randint(1, 4)
            w = self.new_input(self.nn_dtype(), [v, d])
            ish = self.rand_shape(3)
            data = [r.randrange(v) if r.random() < 0.98 else r.choice([v, -1]) for _ in range(numel(ish))]
            idt = wchoice(r, [("int64", 20), ("int32", 3), ("float32", 1)])
            idx = self.new_input(idt, ish, views=False, rg=False, data=data)
            pidx = None if r.random() < 0.6 else (r.randint(-v, v - 1) if r.random() < 0.95 else v)
            max_norm = None if r.random() < 0.8 else r.choice([1.0, 0.5, 2.0])
            return [idx, w, pidx, max_norm, r.choice([2.0, 2.0, 1.0, 3.0]), r.random() < 0.2]
        if name in ("cross_entropy", "nll_loss"):
            c = r.randint(1, 5)
            n = r.randint(1, 4) if r.random() > 0.05 else 0
            form = r.choice(["2d", "2d", "1d", "kd"])
            if form == "1d":
                xs, ts = [c], []
            elif form == "2d":
                xs, ts = [n, c], [n]
            else:
                extra = [r.randint(1, 3) for _ in range(r.randint(1, 2))]
                xs, ts = [n, c] + extra, [n] + extra
            dt = self.nn_dtype()
            x = self.new_input(dt, xs)
            ignore = r.choice([-100, -100, -100, -1, r.randrange(c)])
            if name == "cross_entropy" and r.random() < 0.3:
                tgt = self.unit_input(self.dt_like(dt), xs if r.random() < 0.97 else ts)
            else:
                if r.random() < 0.03 and ts:
                    ts = [ts[0] + 1] + ts[1:]
                data = [r.randrange(c) if r.random() < 0.88 else
                        (ignore if r.random() < 0.8 else r.choice([c, -1, -5])) for _ in range(numel(ts))]
                tdt = wchoice(r, [("int64", 30), ("int32", 1), ("uint8", 1)])
                if tdt == "uint8":
                    data = [v % 256 for v in data]
                tgt = self.new_input(tdt, ts, views=False, rg=False, data=data)
            w = None if r.random() < 0.6 else self.pos_input(self.dt_like(dt), [c if r.random() < 0.97 else c + 1])
            red = r.choice(["none", "mean", "sum"])
            if name == "nll_loss":
                return [x, tgt, w, ignore, red]
            ls = r.choice([0.0, 0.0, 0.1, 0.5, 1.0]) if r.random() < 0.98 else r.choice([-0.1, 1.5])
            return [x, tgt, w, ignore, red, ls]
        if name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
            x = self.nn_x(self.rand_shape(3), ndims=(0, 1, 2, 3))
            dt = DNAME[self.t(x).dtype]
            k = r.random()
            if k < 0.85:
                y = self.new_input(self.dt_like(dt), list(self.t(x).shape))
            else:
                y = self.like(x, self.dt_like(dt))
            red = r.choice(["none", "mean", "sum"])
            if name == "smooth_l1_loss":
                return [x, y, red, r.choice([1.0, 1.0, 0.5, 0.0, 2.0]) if r.random() < 0.98 else -1.0]
            if name == "huber_loss":
                return [x, y, red, r.choice([1.0, 1.0, 0.5, 2.0]) if r.random() < 0.98 else r.choice([0.0, -1.0])]
            return [x, y, red]
        if name == "binary_cross_entropy":
            shape = self.rand_shape(3)
            dt = self.nn_dtype()
            data = [r.choice([0.0, 1.0]) if r.random() < 0.05 else 1 / (1 + math.exp(-r.gauss(0, 2)))
                    for _ in range(numel(shape))]
            if r.random() < 0.03 and data:
                data[0] = r.choice([1.5, -0.5])
            x = self.new_input(dt, shape, views=False, data=data)
            y = self.unit_input(self.dt_like(dt), shape if r.random() < 0.97 else shape + [2], 0.3, rg=False)
            w = None if r.random() < 0.6 else self.pos_input(self.dt_like(dt), [1 if r.random() < 0.3 else s
                                                                                for s in shape])
            return [x, y, w, r.choice(["none", "mean", "sum"])]
        if name == "bce_with_logits":
            shape = self.rand_shape(3)
            dt = self.nn_dtype()
            x = self.new_input(dt, shape)
            y = self.unit_input(self.dt_like(dt), shape if r.random() < 0.97 else shape + [2], 0.3)
            w = None if r.random() < 0.6 else self.pos_input(self.dt_like(dt), [1 if r.random() < 0.3 else s
                                                                                for s in shape])
            pw = None
            if r.random() < 0.4:
                pw = self.pos_input(self.dt_like(dt), shape[-1:] if r.random() < 0.8 else [1])
            return [x, y, w, pw, r.choice(["none", "mean", "sum"])]
        if name == "kl_div":
            shape = self.rand_shape(3)
            dt = self.nn_dtype()
            x = self.new_input(dt, shape, views=False, data=[-abs(r.gauss(0, 2)) for _ in range(numel(shape))])
            log_target = r.random() < 0.4
            ysh = shape if r.random() < 0.9 else [1 if r.random() < 0.5 else s for s in shape]
            if log_target:
                data = [-abs(r.gauss(0, 2)) for _ in range(numel(ysh))]
                y = self.new_input(self.dt_like(dt), ysh, views=False, data=data)
            else:
                y = self.unit_input(self.dt_like(dt), ysh, 0.2)
            return [x, y, r.choice(["none", "mean", "sum", "batchmean"]), log_target]
        if name == "sdpa":
            lead = [r.randint(1, 2) for _ in range(r.choice([0, 1, 1, 2]))]
            ll, s, e, ev = r.randint(1, 4), r.randint(1, 4), r.randint(1, 4), r.randint(1, 4)
            dt = self.nn_dtype()
            q = self.new_input(dt, lead + [ll, e])
            k = self.new_input(self.dt_like(dt), lead + [s, e if r.random() < 0.97 else e + 1])
            v = self.new_input(self.dt_like(dt), lead + [s, ev])
            mask = None
            if r.random() < 0.4:
                mask = self.new_input(r.choice(["bool", dt]), [ll, s], views=False, rg=False)
            causal = r.random() < 0.3 and (mask is None or r.random() < 0.1)
            return [q, k, v, mask, causal, r.choice([None, None, 0.5, 2.0])]
        if name in NN_ACT:
            x = self.pick(lambda t: t.is_floating_point()) if r.random() < 0.92 else self.pick()
            if name == "leaky_relu":
                return [x, r.choice([0.01, 0.2, -0.5, 0.0, 1.5])]
            if name == "elu":
                return [x, r.choice([1.0, 0.5, 2.0, 0.0, -1.0])]
            if name == "celu":
                return [x, r.choice([1.0, 0.5, 2.0, -1.0]) if r.random() < 0.97 else 0.0]
            if name in ("softshrink", "hardshrink"):
                return [x, r.choice([0.5, 0.5, 0.0, 1.0, 2.5]) if r.random() < 0.97 else -0.5]
            if name == "hardtanh":
                lo, hi = r.choice([(-1.0, 1.0), (-1.0, 1.0), (0.0, 6.0), (-0.5, 2.0), (1.0, 1.0)])
                if r.random() < 0.03:
                    lo, hi = hi + 1.0, lo
                return [x, lo, hi]
            return [x]
        return None

    def factor(self, n, parts=None):
        r = self.rng
        k = parts if parts is not None else r.randint(0, 3)
        if n == 0:
            return [0] + [r.randint(1, 3) for _ in range(max(k - 1, 0))] if k else [0]
        out = []
        for _ in range(max(k - 1, 0)):
            divs = [d for d in range(1, n + 1) if n % d == 0]
            d = r.choice(divs)
            out.append(d)
            n //= d
        out.append(n)
        if k == 0 and n == 1:
            return []
        return out


ALL_OPS = (list(UNARY) + UNARY_INPLACE + list(NOARG) + BINARY + BINARY_INPLACE + MATH + MATH_INPLACE + list(RLHS) + [
    "nan_to_num", "lerp", "clamp_t", "kthvalue", "median_dim", "nanmedian_dim", "mode", "median", "nanmedian",
    "nansum", "count_nonzero", "cummax", "cummin", "logcumsumexp", "nansum_dim", "aminmax", "diff", "unique",
    "unique_consecutive",
    "softplus", "where", "masked_fill", "masked_fill_", "clamp", "clamp_", "clamp_min", "clamp_max", "scalar_pow",
    "sum_dim", "sum_dtype", "prod_dim", "amax", "amin", "all_dim", "any_dim", "mean_dim", "max_dim", "min_dim",
    "argmax", "argmin", "cumsum", "cumprod", "var", "std", "var_dim", "std_dim", "logsumexp", "norm", "norm_dim",
    "softmax", "log_softmax", "mm", "bmm", "mv", "dot", "outer", "matmul", "view", "reshape", "permute",
    "transpose", "expand", "narrow", "slice", "select", "squeeze_dim", "squeeze_dims", "unsqueeze", "flatten",
    "unflatten", "split", "chunk", "unbind", "gather", "scatter", "scatter_", "scatter_add", "scatter_add_",
    "scatter_value", "index_select", "index", "index_put", "index_put_", "tril", "triu", "one_hot", "sort", "argsort", "topk", "cat",
    "stack", "to", "fill_", "copy_", "full_like"] + COV_SHAPE + COV_COUNT + COV_REDUCE + COV_LINALG + NN_OPS)
# Op groups for --ops (a group name stands for its ops).
OP_GROUPS = {
    "shape": COV_SHAPE + ["nonzero", "tril", "triu", "index_put", "index_put_"],
    "count": COV_COUNT,
    "reduce": COV_REDUCE + ["nansum", "nansum_dim", "count_nonzero", "aminmax", "kthvalue", "median", "median_dim",
                            "nanmedian", "nanmedian_dim", "mode", "cummax", "cummin", "logcumsumexp", "diff", "unique",
                            "unique_consecutive"],
    "linalg": COV_LINALG + ["norm", "norm_dim"],
    "nn": NN_OPS + ["softplus", "softmax", "log_softmax", "one_hot"],
}


def generate(seed, i, ops):
    rng = random.Random("%s:%d" % (seed, i))
    g = Gen(rng, ops, "%s:%d" % (seed, i))
    n_ops = rng.choice([1, 1, 2, 2, 3, 4])
    for _ in range(n_ops):
        name = rng.choice(ops)
        args = None
        for _ in range(3):
            try:
                args = g.gen_op(name)
            except Exception:  # noqa: BLE001 - a generator slip: try another op
                args = None
            if args is not None:
                break
            name = rng.choice(ops)
        if args is None:
            continue
        k = len(g.prog["ops"])
        op = {"op": name, "args": args}
        g.prog["ops"].append(op)
        outs = g.run.step(op, k)
        if outs is None:
            break
        g.outs.extend("r%d.%d" % (k, j) for j in range(len(outs)))
    if g.grad and g.run.status is None and g.prog["ops"]:
        k = len(g.prog["ops"]) - 1
        last = g.run.env.get("r%d.0" % k)
        if last is not None and last.requires_grad and last.is_floating_point():
            g.prog["backward"] = "r%d.0" % k
    return g.prog, g.run.result(g.prog.get("backward"))


# ---------------------------------------------------------------- the evaluator process


def evaluator_path():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "ferrotorch-fuzz-eval")


class Evaluator:
    """The ferrotorch side: one long-lived process, restarted after a crash."""

    def __init__(self, path, timeout=20.0):
        self.path, self.timeout, self.proc = path, timeout, None
        self.restarts = 0

    def start(self):
        env = dict(os.environ, RAYON_NUM_THREADS="1")
        self.proc = subprocess.Popen([self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, bufsize=0)
        self.buf = b""

    def kill(self):
        if self.proc:
            self.proc.kill()
            try:
                err = self.proc.communicate(timeout=5)[1].decode(errors="replace")
            except Exception:  # noqa: BLE001
                err = ""
            self.proc = None
            self.restarts += 1
            return err[-2000:]
        return ""

    def ask(self, prog, expect):
        """(response, None) or (None, (class, detail)) when the process died or hung."""
        if self.proc is None:
            self.start()
        line = json.dumps({"program": prog, "expect": expect}, allow_nan=False) + "\n"
        try:
            self.proc.stdin.write(line.encode())
        except BrokenPipeError:
            return None, ("crash", self.kill())
        deadline = time.time() + self.timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                return None, ("hang", self.kill())
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    rc = self.proc.poll()
                    return None, ("crash", "exit %s: %s" % (rc, self.kill()))
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line), None


def check(ev, prog, expect):
    """Findings (list of dicts) of one program, and the response."""
    resp, dead = ev.ask(prog, expect)
    if dead:
        return [{"class": dead[0], "op": prog["ops"][-1]["op"] if prog["ops"] else "input",
                 "detail": dead[1]}], {"result": None}
    return resp.get("findings", []), resp


# ---------------------------------------------------------------- minimization


def refs(v):
    if isinstance(v, str):
        return {v.split(".")[0]}
    if isinstance(v, list):
        return set().union(*[refs(x) for x in v]) if v else set()
    return set()


def minimize(ev, prog, key, budget=80):
    """A smaller program with the same primary finding (class, op)."""
    import copy

    def same(p):
        nonlocal budget
        budget -= 1
        e = run_torch(p)
        fs, _ = check(ev, p, e)
        return bool(fs) and (fs[0]["class"], fs[0]["op"]) == key

    prog = copy.deepcopy(prog)
    for k, op in enumerate(prog["ops"]):
        op.setdefault("out", "r%d" % k)
    changed = True
    while changed and budget > 0:
        changed = False
        # drop an op whose outputs nothing uses
        for k in range(len(prog["ops"]) - 1, -1, -1):
            used = set()
            for j, o in enumerate(prog["ops"]):
                if j != k:
                    used |= refs(o["args"])
            if prog["ops"][k]["out"] in used:
                continue
            cand = copy.deepcopy(prog)
            del cand["ops"][k]
            if cand.get("backward", "").split(".")[0] == prog["ops"][k]["out"]:
                cand.pop("backward")
            if cand["ops"] and budget > 0 and same(cand):
                prog, changed = cand, True
                break
        for k in range(len(prog["inputs"])):
            spec = prog["inputs"][k]
            for field in ("views", "rg"):
                if field in spec and budget > 0:
                    cand = copy.deepcopy(prog)
                    cand["inputs"][k].pop(field)
                    if field == "views":
                        cand["inputs"][k]["shape"] = list(run_torch_input_shape(spec))
                        cand["inputs"][k]["data"] = enc(make_input(spec)[1])["data"]
                    if same(cand):
                        prog, changed = cand, True
        if "backward" in prog and budget > 0 and not key[0].startswith(("grad", "bwd")):
            cand = copy.deepcopy(prog)
            cand.pop("backward")
            if same(cand):
                prog, changed = cand, True
    used = set()
    for o in prog["ops"]:
        used |= refs(o["args"])
    prog["inputs"] = [s for s in prog["inputs"] if s["name"] in used]
    return prog


def run_torch_input_shape(spec):
    return make_input(spec)[1].shape


# ---------------------------------------------------------------- main


def load_cases(which):
    path = which if os.path.exists(which) else os.path.join(CASES, which + ".jsonl")
    if not os.path.exists(path):
        return path, []
    with open(path) as f:
        return path, [json.loads(line) for line in f if line.strip()]


def replay(ev, which, promote, rerecord=False):
    path, cases = load_cases(which)
    still, passing = [], []
    for c in cases:
        if rerecord:
            c["expect"] = run_torch(c["program"])
        fs, _ = check(ev, c["program"], c["expect"])
        (still if fs else passing).append(c)
        status = "FAILS  " + fs[0]["class"] + ": " + fs[0]["detail"][:100] if fs else "passes"
        print("%-10s %-14s %s" % (c["program"].get("id", "?"), c.get("op", "?"), status))
    print("%s: %d cases, %d still differ, %d agree" % (path, len(cases), len(still), len(passing)))
    if (promote or rerecord) and os.path.basename(path) == "open.jsonl":
        if not promote:
            still = still + passing
            passing = []
        with open(path, "w") as f:
            for c in still:
                f.write(json.dumps(c, allow_nan=False) + "\n")
        with open(os.path.join(CASES, "fixed.jsonl"), "a") as f:
            for c in passing:
                f.write(json.dumps(c, allow_nan=False) + "\n")
        print("moved %d agreeing cases to fixed.jsonl" % len(passing))
    return 1 if (still and which != "open") else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", default="0")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0, help="index of the first program")
    ap.add_argument("--quick", action="store_true", help="300 programs")
    ap.add_argument("--out", default=None, help="folder for findings.jsonl and summary.md")
    ap.add_argument("--ops", default=None,
                    help="comma-separated op names or groups (%s; default: all)" % ", ".join(OP_GROUPS))
    ap.add_argument("--eval", default=None, help="path of ferrotorch-fuzz-eval")
    ap.add_argument("--replay", default=None, help="open, fixed or a JSONL file of cases")
    ap.add_argument("--promote", action="store_true", help="with --replay open: move agreeing cases to fixed")
    ap.add_argument("--rerecord", action="store_true",
                    help="with --replay open: run PyTorch again and store its results (after a driver fix)")
    ap.add_argument("--save-cases", action="store_true",
                    help="minimize one program per new (op, class) and append it to fuzz/cases/open.jsonl")
    ap.add_argument("--keep-passing", action="store_true",
                    help="append one agreeing program per op not yet in fuzz/cases/fixed.jsonl")
    ap.add_argument("--print-program", action="store_true", help="print the generated programs and exit")
    args = ap.parse_args()
    path = args.eval or evaluator_path()
    if not os.path.exists(path):
        sys.exit("%s missing: build it with `cargo build --release -p ferrotorch-fuzz`" % path)
    ev = Evaluator(path)
    if args.replay:
        sys.exit(replay(ev, args.replay, args.promote, args.rerecord))
    ops = [o for g in args.ops.split(",") for o in OP_GROUPS.get(g, [g])] if args.ops else ALL_OPS
    bad = [o for o in ops if o not in ALL_OPS]
    if bad:
        sys.exit("unknown ops: " + ", ".join(bad))
    count = 300 if args.quick else args.count
    out = args.out or os.path.join(ROOT, "fuzz", "out", "seed-%s" % args.seed)
    os.makedirs(out, exist_ok=True)
    fin = open(os.path.join(out, "findings.jsonl"), "w")
    summary = collections.Counter()
    all_classes = collections.Counter()
    per_op = collections.Counter()
    grad_fns = collections.Counter()
    first = {}
    passing = {}
    exact = close = n_find = driver_errors = 0
    t0 = last = time.time()
    for i in range(args.start, args.start + count):
        try:
            prog, expect = generate(args.seed, i, ops)
        except Exception as e:  # noqa: BLE001 - a driver bug must not end a long run
            print("driver error in program %s:%d: %r" % (args.seed, i, e), flush=True)
            driver_errors += 1
            continue
        if args.print_program:
            print(json.dumps({"program": prog, "expect": expect}))
            continue
        fs, resp = check(ev, prog, expect)
        exact += resp.get("exact", 0)
        close += resp.get("close", 0)
        for o in prog["ops"]:
            per_op[o["op"]] += 1
        if fs:
            n_find += 1
            key = (fs[0]["class"], fs[0]["op"])
            summary[key] += 1
            for f in fs:
                all_classes[f["class"]] += 1
                if f["class"] == "grad_fn":
                    grad_fns[(f["op"], f["detail"].split("grad_fn ", 1)[-1])] += 1
            first.setdefault(key, (prog, expect))
            fin.write(json.dumps({"id": prog["id"], "class": key[0], "op": key[1], "findings": fs,
                                  "program": prog, "torch": expect, "ours": resp.get("result")},
                                 allow_nan=False) + "\n")
        elif prog["ops"] and len(prog["ops"]) == 1:
            passing.setdefault(prog["ops"][0]["op"], (prog, expect))
        done = i - args.start + 1
        if time.time() - last > 10 or done == count:
            last = time.time()
            print("%d/%d programs, %.0f/s, %d differing, %d evaluator restarts" %
                  (done, count, done / (last - t0), n_find, ev.restarts), flush=True)
    fin.close()
    if args.print_program:
        return
    elapsed = time.time() - t0
    lines = ["# Fuzz summary: seed %s, programs %d..%d" % (args.seed, args.start, args.start + count - 1), "",
             "%d programs in %.0f s (%.0f/s); %d differ from PyTorch; evaluator restarts: %d; driver errors: %d." %
             (count, elapsed, count / max(elapsed, 1e-9), n_find, ev.restarts, driver_errors),
             "Float results compared: %d bitwise identical, %d within tolerance only." % (exact, close), "",
             "| op | class | programs |", "|---|---|---|"]
    for (cls, op), n in sorted(summary.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append("| %s | %s | %d |" % (op, cls, n))
    lines += ["", "All findings by class: " + ", ".join("%s %d" % kv for kv in all_classes.most_common())]
    lines += ["", "grad_fn names that differ (op: torch vs ours, findings):", ""]
    lines += ["- %s: %s (%d)" % (op, d, n) for (op, d), n in sorted(grad_fns.items(), key=lambda kv: -kv[1])]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    if args.save_cases:
        _, open_cases = load_cases("open")
        known = {(c["class"], c["op"]) for c in open_cases}
        os.makedirs(CASES, exist_ok=True)
        with open(os.path.join(CASES, "open.jsonl"), "a") as f:
            for key, (prog, _) in sorted(first.items()):
                if key in known or key[0] in ("crash", "hang"):
                    continue
                small = minimize(ev, prog, key)
                exp = run_torch(small)
                fs, _ = check(ev, small, exp)
                if not fs:
                    continue
                f.write(json.dumps({"class": fs[0]["class"], "op": fs[0]["op"], "detail": fs[0]["detail"],
                                    "program": small, "expect": exp}, allow_nan=False) + "\n")
                print("saved open case", key)
    if args.keep_passing:
        _, fixed = load_cases("fixed")
        have = {c["op"] for c in fixed}
        with open(os.path.join(CASES, "fixed.jsonl"), "a") as f:
            for op, (prog, exp) in sorted(passing.items()):
                if op not in have:
                    f.write(json.dumps({"class": "agree", "op": op, "program": prog, "expect": exp},
                                       allow_nan=False) + "\n")


if __name__ == "__main__":
    main()
