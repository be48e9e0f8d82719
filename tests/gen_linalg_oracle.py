"""Writes tests/oracle_extra/linalg.json: PyTorch reference values (forward
outputs, gradients, graph node names, errors) for the linear-algebra ops of
the op-coverage work: the addmm family, einsum, tensordot, cross, kron,
vector / matrix norms and linalg.norm, and the torch.linalg
decompositions (inv, solve, det, slogdet, cholesky, qr, eigh, eigvalsh,
svd, svdvals).

Eigenvectors and singular vectors are unique only up to sign: their cases
carry `post` (see tests/oracle_extra/README.md), which scales each column
(or row) by the sign of its largest-magnitude component on both sides. The
sign is a constant of the loss, so `sum(W * post(V))` is gauge invariant
and its gradient well defined; every such case asserts that the largest
component is well separated from the next (no tie for the two sides to
break differently).

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_linalg_oracle.py
"""

import os

from oracle_common import *  # noqa: F401,F403
from oracle_common import CASES, add_case, enc, enc_out, error_case, gi, resolve

torch.set_num_threads(1)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle_extra", "linalg.json")

T = torch.tensor
f32 = torch.float32
f64 = torch.float64
f16 = torch.float16
bf16 = torch.bfloat16
i32 = torch.int32
i64 = torch.int64
u8 = torch.uint8


def g(seed, *shape, dtype=torch.float32, scale=1.0):
    """Standard normal values from a fresh generator (any shape, 0-d too)."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def signfix(t, axis):
    """t times the sign of each vector's largest-|.| component; vectors run
    along `axis` (-2: columns, -1: rows). The sign is a constant."""
    d = t.detach()
    a = d.abs()
    idx = a.argmax(dim=axis, keepdim=True)
    # The largest component must stand out, or the two sides could pick different ones.
    top = a.topk(2, dim=axis).values if a.shape[axis] > 1 else None
    if top is not None:
        first, second = top.narrow(axis, 0, 1), top.narrow(axis, 1, 1)
        tol = 1e-3 if d.dtype == torch.float32 else 1e-6
        assert bool(((first - second) > tol * first.clamp_min(1e-30)).all()), "ambiguous sign component"
    s = torch.gather(d, axis, idx).sign()
    return t * s


POSTS = {"sign_cols": lambda t: signfix(t, -2), "sign_rows": lambda t: signfix(t, -1)}


def apply_post(outs, post):
    if post is None:
        return outs
    return [o if p is None else POSTS[p](o) for o, p in zip(outs, post)]


# The functions whose matrix argument PyTorch names `input` (the others name it `A`).
INPUT_NAME = {f"torch.linalg.{f}": "input" for f in ["matrix_norm", "norm", "cholesky", "eigh", "eigvalsh"]}


def named(op, inputs):
    """`inputs` with the matrix argument `A` under PyTorch's name for it."""
    return {(INPUT_NAME.get(op, "A") if k == "A" else k): v for k, v in inputs.items()}


def rec(name, op, inputs, kwargs=None, grad=(), post=None, node=True, input_list=None, note=None):
    """op(**inputs, **kwargs) (or op(*inputs, **kwargs) with `input_list`),
    with gradients of sum(post(out) * W) for the inputs named in `grad` and,
    when `node`, the name of the outputs' graph node (`grad_fn`)."""
    kwargs = kwargs or {}
    inputs, grad = named(op, inputs), [INPUT_NAME.get(op, "A") if k == "A" else k for k in grad]
    inputs = {k: v.detach().clone().requires_grad_(k in grad) for k, v in inputs.items()}
    f = resolve(op)
    if input_list:
        r = f(kwargs["equation"], *inputs.values()) if op == "torch.einsum" else f(*inputs.values(), **kwargs)
    else:
        r = f(**inputs, **kwargs)
    outs = [r] if isinstance(r, torch.Tensor) else list(r)
    outs = apply_post(outs, post)
    names = list(inputs.keys()) if not input_list else [input_list] * len(inputs)
    add_case(name, op, list(inputs.values()), enc_out(outs[0] if isinstance(r, torch.Tensor) else outs), kwargs,
             names, note, **({"input_list": input_list} if input_list else {}))
    c = CASES[-1]
    if post is not None:
        c["post"] = list(post)
    if grad:
        gen = torch.Generator().manual_seed(len(CASES))
        weights = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)
                   if o.dtype.is_floating_point and o.requires_grad else None for o in outs]
        loss = sum((o * w).sum() for o, w in zip(outs, weights) if w is not None)
        diff = [v for k, v in inputs.items() if k in grad]
        gs = torch.autograd.grad(loss, diff, allow_unused=True)
        it = iter(gs)
        grads = []
        for k, v in inputs.items():
            if k in grad:
                gk = next(it)
                grads.append(enc(gk if gk is not None else torch.zeros_like(v)))
            else:
                grads.append(None)
        c["grads"] = grads
        c["grad_weight"] = enc(weights[0]) if len(weights) == 1 else [None if w is None else enc(w) for w in weights]
        if node:
            fn = (r if isinstance(r, torch.Tensor) else r[0]).grad_fn
            c["grad_fn"] = type(fn).__name__


def double(name, op, inputs, kwargs=None, grad=(), note=None):
    """Kind "double_backward" (the shared oracle's format): with L =
    sum(out * W) and first derivatives G_j = dL/dx_j taken with
    create_graph=True, `grad_grads` holds d/dx_j of sum_i sum(G_i * U_i)."""
    kwargs = kwargs or {}
    inputs, grad = named(op, inputs), [INPUT_NAME.get(op, "A") if k == "A" else k for k in grad]
    inputs = {k: v.detach().clone().requires_grad_(k in grad) for k, v in inputs.items()}
    r = resolve(op)(**inputs, **kwargs)
    outs = [r] if isinstance(r, torch.Tensor) else list(r)
    gen = torch.Generator().manual_seed(len(CASES))
    weights = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)
               if o.dtype.is_floating_point and o.requires_grad else None for o in outs]
    loss = sum((o * w).sum() for o, w in zip(outs, weights) if w is not None)
    diff = [v for k, v in inputs.items() if k in grad]
    first = torch.autograd.grad(loss, diff, create_graph=True)
    us = [torch.randn(v.shape, generator=gen, dtype=torch.float64).to(v.dtype) for v in diff]
    ssum = sum((f * u).sum() for f, u in zip(first, us))
    second = torch.autograd.grad(ssum, diff, allow_unused=True)
    add_case(name, op, list(inputs.values()), enc_out(r), kwargs, list(inputs.keys()), note, kind="double_backward")
    c = CASES[-1]
    c["grad_weight"] = enc(weights[0]) if len(weights) == 1 else [None if w is None else enc(w) for w in weights]
    it_f, it_u, it_s = iter(first), iter(us), iter(second)
    c["grads"], c["grad_grad_weights"], c["grad_grads"] = [], [], []
    for k, v in inputs.items():
        if k in grad:
            sk = next(it_s)
            c["grads"].append(enc(next(it_f)))
            c["grad_grad_weights"].append(enc(next(it_u)))
            c["grad_grads"].append(enc(sk if sk is not None else torch.zeros_like(v)))
        else:
            c["grads"].append(None)
            c["grad_grad_weights"].append(None)
            c["grad_grads"].append(None)


def chain(name, x, steps, others=None, post=None, note=None):
    """Applies `steps` one after the other to x: (op, kwargs) or (op, kwargs,
    names of `others` bound by keyword). An op is a `torch.Tensor` method
    or any torch function (`torch.linalg.inv`), which takes the running
    value as its first argument."""
    others = others or {}
    r = x
    full = []
    for step in steps:
        op, kw = step[0], step[1]
        names = list(step[2]) if len(step) > 2 else []
        if op == "__getitem__":
            items = tuple(slice(*it["slice"]) if isinstance(it, dict) else (Ellipsis if it == "..." else it)
                          for it in kw["index"])
            r = r[items]
            full.append(("torch.Tensor.__getitem__", kw, ["self"] + names))
            continue
        if op == "torch.einsum":
            r = torch.einsum(kw["equation"], r, *[others[n] for n in names])
            full.append((op, kw, ["self"] + names))
        elif op.startswith("torch."):
            r = resolve(op)(r, **{n: others[n] for n in names}, **kw)
            full.append((op, kw, ["self"] + names))
        else:
            r = getattr(torch.Tensor, op)(r, **{n: others[n] for n in names}, **kw)
            full.append(("torch.Tensor." + op, kw, ["self"] + names))
    outs = [r] if isinstance(r, torch.Tensor) else list(r)
    outs = apply_post(outs, post)
    add_case(name, "chain", [x] + list(others.values()), enc_out(outs[0] if isinstance(r, torch.Tensor) else outs),
             {}, ["self"] + list(others.keys()), note, kind="chain", steps=full)
    if post is not None:
        CASES[-1]["post"] = list(post)


def err(name, op, inputs, **kwargs):
    error_case(name, op, named(op, inputs), **kwargs)


def err_list(name, op, tensors, **kwargs):
    """An error of an op taking a tensor list (einsum's operands)."""
    try:
        if op == "torch.einsum":
            resolve(op)(kwargs["equation"], *tensors)
        else:
            resolve(op)(*tensors, **kwargs)
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0]
    else:
        raise AssertionError(f"{name}: PyTorch accepted the call")
    add_case(name, op, tensors, None, kwargs, ["operands"] * len(tensors), None, kind="error", error=msg,
             input_list="operands")


def spd(seed, n, *batch, dtype=f64):
    a = g(seed, *batch, n, n, dtype=f64)
    return (a @ a.mT + n * torch.eye(n, dtype=f64)).to(dtype)


def well(seed, n, *batch, dtype=f64):
    """A well-conditioned square matrix (random plus a multiple of I)."""
    return (g(seed, *batch, n, n, dtype=f64) + 3 * torch.eye(n, dtype=f64)).to(dtype)


def sym(seed, n, *batch, dtype=f64):
    """A random symmetric matrix with well-separated eigenvalues."""
    a = g(seed, *batch, n, n, dtype=f64)
    return ((a + a.mT) / 2).to(dtype)


FLOATS = [(f32, "f32"), (f64, "f64")]

# ------------------------------------------------------------ addmm family
for dt, s in FLOATS:
    rec(f"addmm_{s}", "torch.addmm", {"input": g(1, 3, 5, dtype=dt), "mat1": g(2, 3, 4, dtype=dt),
                                      "mat2": g(3, 4, 5, dtype=dt)}, grad=["input", "mat1", "mat2"])
    rec(f"addmm_{s}_beta_alpha", "torch.addmm", {"input": g(4, 3, 5, dtype=dt), "mat1": g(5, 3, 4, dtype=dt),
                                                 "mat2": g(6, 4, 5, dtype=dt)},
        {"beta": 0.5, "alpha": -2.0}, grad=["input", "mat1", "mat2"])
    rec(f"addmm_{s}_bcast_row", "torch.addmm", {"input": g(7, 5, dtype=dt), "mat1": g(8, 3, 4, dtype=dt),
                                                "mat2": g(9, 4, 5, dtype=dt)},
        {"beta": 1.5}, grad=["input", "mat1", "mat2"])
    rec(f"addmm_{s}_bcast_col", "torch.addmm", {"input": g(10, 3, 1, dtype=dt), "mat1": g(11, 3, 4, dtype=dt),
                                                "mat2": g(12, 4, 5, dtype=dt)},
        {"alpha": 0.25}, grad=["input", "mat1", "mat2"])
    rec(f"addmm_{s}_scalar_input", "torch.addmm", {"input": g(13, dtype=dt), "mat1": g(14, 2, 3, dtype=dt),
                                                   "mat2": g(15, 3, 2, dtype=dt)},
        {"beta": 2.0, "alpha": 3.0}, grad=["input", "mat1", "mat2"])
    rec(f"addmm_{s}_beta0_nan", "torch.addmm", {"input": T([[NAN, INF], [-INF, 1.0]], dtype=dt),
                                                "mat1": g(16, 2, 3, dtype=dt), "mat2": g(17, 3, 2, dtype=dt)},
        {"beta": 0.0}, grad=["input", "mat1", "mat2"])
    rec(f"addmm_{s}_alpha0", "torch.addmm", {"input": g(18, 2, 2, dtype=dt), "mat1": g(19, 2, 3, dtype=dt),
                                             "mat2": g(20, 3, 2, dtype=dt)},
        {"alpha": 0.0}, grad=["input", "mat1", "mat2"])
    rec(f"addmm_{s}_empty_k", "torch.addmm", {"input": g(21, 2, 3, dtype=dt), "mat1": g(22, 2, 0, dtype=dt),
                                              "mat2": g(23, 0, 3, dtype=dt)}, {"beta": 2.0}, grad=["input"])
    rec(f"addmv_{s}", "torch.addmv", {"input": g(24, 3, dtype=dt), "mat": g(25, 3, 4, dtype=dt),
                                      "vec": g(26, 4, dtype=dt)}, {"beta": 0.5, "alpha": 2.0},
        grad=["input", "mat", "vec"])
    rec(f"addmv_{s}_bcast", "torch.addmv", {"input": g(27, 1, dtype=dt), "mat": g(28, 5, 4, dtype=dt),
                                            "vec": g(29, 4, dtype=dt)}, grad=["input", "mat", "vec"])
    rec(f"addmv_{s}_beta0_nan", "torch.addmv", {"input": T([NAN, INF, 1.0], dtype=dt), "mat": g(30, 3, 2, dtype=dt),
                                                "vec": g(31, 2, dtype=dt)}, {"beta": 0}, grad=["input", "mat", "vec"])
    rec(f"addbmm_{s}", "torch.addbmm", {"input": g(32, 3, 5, dtype=dt), "batch1": g(33, 4, 3, 2, dtype=dt),
                                        "batch2": g(34, 4, 2, 5, dtype=dt)}, {"beta": -1.0, "alpha": 0.5},
        grad=["input", "batch1", "batch2"])
    rec(f"addbmm_{s}_bcast", "torch.addbmm", {"input": g(35, 5, dtype=dt), "batch1": g(36, 2, 3, 4, dtype=dt),
                                              "batch2": g(37, 2, 4, 5, dtype=dt)}, grad=["input", "batch1", "batch2"])
    rec(f"addbmm_{s}_beta0_nan", "torch.addbmm", {"input": T([[NAN, 1.0], [2.0, INF]], dtype=dt),
                                                  "batch1": g(38, 3, 2, 2, dtype=dt),
                                                  "batch2": g(39, 3, 2, 2, dtype=dt)}, {"beta": 0.0},
        grad=["input", "batch1", "batch2"])
    rec(f"baddbmm_{s}", "torch.baddbmm", {"input": g(40, 4, 3, 5, dtype=dt), "batch1": g(41, 4, 3, 2, dtype=dt),
                                          "batch2": g(42, 4, 2, 5, dtype=dt)}, {"beta": 2.0, "alpha": -0.5},
        grad=["input", "batch1", "batch2"])
    rec(f"baddbmm_{s}_bcast", "torch.baddbmm", {"input": g(43, 3, 1, dtype=dt), "batch1": g(44, 2, 3, 4, dtype=dt),
                                                "batch2": g(45, 2, 4, 5, dtype=dt)}, grad=["input", "batch1", "batch2"])
    rec(f"baddbmm_{s}_beta0_nan", "torch.baddbmm", {"input": torch.full((2, 2, 2), NAN, dtype=dt),
                                                    "batch1": g(46, 2, 2, 3, dtype=dt),
                                                    "batch2": g(47, 2, 3, 2, dtype=dt)}, {"beta": 0},
        grad=["input", "batch1", "batch2"])
rec("addmm_f64_big", "torch.addmm", {"input": g(48, 70, dtype=f64), "mat1": g(49, 33, 70, dtype=f64),
                                     "mat2": g(50, 70, 70, dtype=f64)}, {"beta": 0.5, "alpha": 1.5},
    grad=["input", "mat1", "mat2"])
for dt, s in [(i64, "int64"), (i32, "int32"), (u8, "uint8")]:
    rec(f"addmm_{s}", "torch.addmm", {"input": gi(51, 0, 9, 2, 3, dtype=dt), "mat1": gi(52, 0, 9, 2, 4, dtype=dt),
                                      "mat2": gi(53, 0, 9, 4, 3, dtype=dt)}, {"beta": 2, "alpha": 3})
    rec(f"addmv_{s}", "torch.addmv", {"input": gi(54, 0, 9, 2, dtype=dt), "mat": gi(55, 0, 9, 2, 4, dtype=dt),
                                      "vec": gi(56, 0, 9, 4, dtype=dt)}, {"beta": 0})
    rec(f"addbmm_{s}", "torch.addbmm", {"input": gi(57, 0, 9, 2, 3, dtype=dt),
                                        "batch1": gi(58, 0, 9, 3, 2, 4, dtype=dt),
                                        "batch2": gi(59, 0, 9, 3, 4, 3, dtype=dt)}, {"alpha": 2})
    rec(f"baddbmm_{s}", "torch.baddbmm", {"input": gi(60, 0, 9, 3, 2, 3, dtype=dt),
                                          "batch1": gi(61, 0, 9, 3, 2, 4, dtype=dt),
                                          "batch2": gi(62, 0, 9, 3, 4, 3, dtype=dt)}, {"beta": 3})
rec("addmm_int64_float_scalars", "torch.addmm", {"input": gi(63, -9, 9, 2, 2), "mat1": gi(64, -9, 9, 2, 3),
                                                 "mat2": gi(65, -9, 9, 3, 2)}, {"beta": 2.5, "alpha": -1.5},
    note="integer tensors take the scalars truncated to integers")
rec("addmm_f16", "torch.addmm", {"input": g(66, 3, 4, dtype=f16), "mat1": g(67, 3, 5, dtype=f16),
                                 "mat2": g(68, 5, 4, dtype=f16)}, {"beta": 0.5, "alpha": 2.0})
rec("addmm_bf16", "torch.addmm", {"input": g(69, 3, 4, dtype=bf16), "mat1": g(70, 3, 5, dtype=bf16),
                                  "mat2": g(71, 5, 4, dtype=bf16)})
# Non-contiguous operands: transposed and sliced views.
chain("addmm_chain_transposed", g(72, 5, 3), [("t", {}), ("addmm", {"alpha": 2.0}, ["mat1", "mat2"])],
      others={"mat1": g(73, 4, 3).t(), "mat2": g(74, 10, 4)[::2].t()})
chain("addmv_chain_strided", g(75, 8), [("__getitem__", {"index": [{"slice": [None, None, 2]}]}),
                                         ("addmv", {"beta": 0.5}, ["mat", "vec"])],
      others={"mat": g(76, 3, 4).t(), "vec": g(77, 6)[::2]})
chain("baddbmm_chain_expanded", g(78, 1, 3), [("expand", {"size": [2, 4, 3]}),
                                               ("baddbmm", {}, ["batch1", "batch2"])],
      others={"batch1": g(79, 2, 5, 4).mT, "batch2": g(80, 2, 3, 7)[:, :, :5].mT})
chain("addbmm_chain_permuted", g(81, 3, 4), [("t", {}), ("addbmm", {}, ["batch1", "batch2"])],
      others={"batch1": g(82, 4, 2, 3).permute(1, 0, 2), "batch2": g(83, 3, 2, 3).permute(1, 0, 2)})
err("err_addmm_shapes", "torch.addmm", {"input": g(1, 2, 2), "mat1": g(2, 2, 3), "mat2": g(3, 2, 3)})
err("err_addmm_input_shape", "torch.addmm", {"input": g(1, 3, 2), "mat1": g(2, 2, 3), "mat2": g(3, 3, 2)})
err("err_addmm_1d", "torch.addmm", {"input": g(1, 2, 2), "mat1": g(2, 2), "mat2": g(3, 3, 2)})
err("err_addmm_dtype", "torch.addmm", {"input": g(1, 2, 2), "mat1": g(2, 2, 3, dtype=f64), "mat2": g(3, 3, 2)})
err("err_addmm_input_dtype", "torch.addmm", {"input": g(1, 2, 2, dtype=f64), "mat1": g(2, 2, 3),
                                             "mat2": g(3, 3, 2)})
err("err_addmm_bool", "torch.addmm", {"input": T([[True]]), "mat1": T([[True]]), "mat2": T([[True]])})
err("err_addmv_shapes", "torch.addmv", {"input": g(1, 2), "mat": g(2, 2, 3), "vec": g(3, 4)})
err("err_addmv_input", "torch.addmv", {"input": g(1, 3), "mat": g(2, 2, 3), "vec": g(3, 3)})
err("err_addmv_vec_2d", "torch.addmv", {"input": g(1, 2), "mat": g(2, 2, 3), "vec": g(3, 3, 1)})
err("err_addbmm_batches", "torch.addbmm", {"input": g(1, 2, 2), "batch1": g(2, 2, 2, 3), "batch2": g(3, 3, 3, 2)})
err("err_addbmm_inner", "torch.addbmm", {"input": g(1, 2, 2), "batch1": g(2, 4, 2, 3), "batch2": g(3, 4, 4, 2)})
err("err_addbmm_input", "torch.addbmm", {"input": g(1, 3, 2), "batch1": g(2, 4, 2, 3), "batch2": g(3, 4, 3, 2)})
err("err_baddbmm_batch2", "torch.baddbmm", {"input": g(1, 2, 2, 2), "batch1": g(2, 2, 2, 3),
                                            "batch2": g(3, 3, 3, 2)})
err("err_baddbmm_input", "torch.baddbmm", {"input": g(1, 3, 2, 2), "batch1": g(2, 4, 2, 3),
                                           "batch2": g(3, 4, 3, 2)})

err("err_addmm_mat2_1d", "torch.addmm", {"input": g(1, 2, 2), "mat1": g(2, 2, 3), "mat2": g(3, 3)})
err("err_addmm_self_mat1_dtype", "torch.addmm", {"input": g(1, 2, 2, dtype=f64), "mat1": g(2, 2, 3, dtype=f64),
                                                 "mat2": g(3, 3, 2)})
err("err_addmv_dtype", "torch.addmv", {"input": g(1, 2), "mat": g(2, 2, 3, dtype=f64), "vec": g(3, 3)})
err("err_addmv_bool", "torch.addmv", {"input": T([True]), "mat": T([[True]]), "vec": T([True])})
err("err_addmv_input_2d", "torch.addmv", {"input": g(1, 2, 1), "mat": g(2, 2, 3), "vec": g(3, 3)})
err("err_addbmm_dtype", "torch.addbmm", {"input": g(1, 2, 2), "batch1": g(2, 1, 2, 3), "batch2": g(3, 1, 3, 2, dtype=f64)})
err("err_baddbmm_dtype", "torch.baddbmm", {"input": g(1, 1, 2, 2), "batch1": g(2, 1, 2, 3, dtype=f64),
                                           "batch2": g(3, 1, 3, 2)})
err("err_baddbmm_dtype_batch2", "torch.baddbmm", {"input": g(1, 1, 2, 2), "batch1": g(2, 1, 2, 3),
                                                  "batch2": g(3, 1, 3, 2, dtype=f64)})
err("err_baddbmm_bool", "torch.baddbmm", {"input": T([[[True]]]), "batch1": T([[[True]]]), "batch2": T([[[True]]])})
double("addmm_double", "torch.addmm", {"input": g(84, 2, 3, dtype=f64), "mat1": g(85, 2, 4, dtype=f64),
                                       "mat2": g(86, 4, 3, dtype=f64)}, {"beta": 0.5, "alpha": 2.0},
       grad=["input", "mat1", "mat2"])
double("baddbmm_double", "torch.baddbmm", {"input": g(87, 3, 1, dtype=f64), "batch1": g(88, 2, 3, 4, dtype=f64),
                                           "batch2": g(89, 2, 4, 2, dtype=f64)}, {"alpha": -1.5},
       grad=["input", "batch1", "batch2"])

# ------------------------------------------------------------ einsum
EINSUM = [
    ("matmul", "ij,jk->ik", [(2, 3), (3, 4)]),
    ("implicit", "ij,jk", [(2, 3), (3, 4)]),
    ("transpose", "ij->ji", [(2, 3)]),
    ("trace", "ii", [(4, 4)]),
    ("diag", "ii->i", [(4, 4)]),
    ("diag_3", "iii->i", [(3, 3, 3)]),
    ("diag_keep", "iij->ij", [(3, 3, 2)]),
    ("diag_two_ops", "ii,ij->j", [(3, 3), (3, 4)]),
    ("sum_all", "ij->", [(3, 4)]),
    ("sum_rows", "ij->j", [(3, 4)]),
    ("outer", "i,j->ij", [(3,), (4,)]),
    ("outer_3", "i,j,k->ijk", [(2,), (3,), (4,)]),
    ("dot", "i,i->", [(5,), (5,)]),
    ("hadamard", "ij,ij->ij", [(3, 4), (3, 4)]),
    ("bmm", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("attention", "bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)]),
    ("attention_out", "bhqk,bhkd->bqhd", [(2, 3, 5, 6), (2, 3, 6, 4)]),
    ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("ellipsis_bcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ellipsis_implicit", "...ij,...jk", [(3, 2, 3), (3, 3, 4)]),
    ("ellipsis_mid", "i...j,j...->...i", [(2, 3, 4), (4, 3)]),
    ("ellipsis_sum", "...ij->ij", [(4, 2, 3)]),
    ("ellipsis_out_front", "ij...->...ij", [(2, 3, 4, 5)]),
    ("ellipsis_empty", "...i,...i->...", [(3,), (3,)]),
    ("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("four", "ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 2), (2, 3)]),
    ("three_shared", "ij,ik,il->jkl", [(3, 2), (3, 4), (3, 2)]),
    ("bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("sum_out_operand", "ij,k->k", [(3, 4), (5,)]),
    ("sum_out_both", "ij,kl->jl", [(3, 4), (2, 5)]),
    ("bcast_label", "ij,ij->ij", [(3, 1), (3, 4)]),
    ("bcast_label_contract", "ij,jk->ik", [(3, 1), (4, 5)]),
    ("uppercase", "Ab,bC->CA", [(2, 3), (3, 4)]),
    ("spaces", " i j , j k -> k i ", [(2, 3), (3, 4)]),
    ("repeat_out_order", "ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
    ("batch_diag", "bii->bi", [(2, 3, 3)]),
    ("scalar_operand", ",ij->ij", [(), (2, 3)]),
    ("empty_dim", "ij,jk->ik", [(2, 0), (0, 3)]),
    ("tensor_contract", "pqrs,tuqvr->pstuv", [(2, 3, 4, 2), (2, 2, 3, 2, 4)]),
]
for k, (nm, eq, shapes) in enumerate(EINSUM):
    ops_ = {f"op{j}": g(300 + 7 * k + j, *sh) for j, sh in enumerate(shapes)}
    rec(f"einsum_{nm}", "torch.einsum", ops_, {"equation": eq}, grad=list(ops_.keys()), node=False,
        input_list="operands")
for k, (nm, eq, shapes) in enumerate(EINSUM[:20:3]):
    ops_ = {f"op{j}": g(600 + 7 * k + j, *sh, dtype=f64) for j, sh in enumerate(shapes)}
    rec(f"einsum_f64_{nm}", "torch.einsum", ops_, {"equation": eq}, grad=list(ops_.keys()), node=False,
        input_list="operands")
rec("einsum_int64", "torch.einsum", {"op0": gi(700, -5, 5, 2, 3), "op1": gi(701, -5, 5, 3, 4)},
    {"equation": "ij,jk->ik"}, input_list="operands")
rec("einsum_int64_trace", "torch.einsum", {"op0": gi(702, -5, 5, 3, 3)}, {"equation": "ii"}, input_list="operands")
rec("einsum_diag_inf", "torch.einsum", {"op0": T([[1.0, INF], [NAN, 2.0]])}, {"equation": "ii->i"},
    input_list="operands", note="a diagonal reads only the diagonal: inf/NaN off it do not leak")
rec("einsum_big_attention", "torch.einsum", {"op0": g(703, 2, 2, 9, 33), "op1": g(704, 2, 2, 11, 33)},
    {"equation": "bhqd,bhkd->bhqk"}, grad=["op0", "op1"], node=False, input_list="operands")
for nm, eq, shapes in [
    ("too_few", "ij,jk", [(2, 3)]),
    ("too_many", "i", [(2,), (2,)]),
    ("bad_char", "ij1", [(2, 3)]),
    ("bad_arrow", "ij->ij->", [(2, 3)]),
    ("lone_dot", "i.j", [(2, 3)]),
    ("two_dots", "..i", [(2,)]),
    ("ellipsis_twice", "...i...", [(2, 3)]),
    ("rank", "ijk", [(2, 3)]),
    ("rank_ellipsis", "...ijk", [(2, 3)]),
    ("size_mismatch", "ij,jk", [(2, 3), (4, 5)]),
    ("out_missing", "ij->ik", [(2, 3)]),
    ("out_twice", "ij->ii", [(2, 3)]),
    ("repeat_size", "ii", [(2, 3)]),
    ("ellipsis_bcast", "...ij,...jk", [(2, 2, 3), (3, 3, 4)]),
    ("out_ellipsis_twice", "...i->......", [(2, 3)]),
    ("out_dot", "i->.i", [(2,)]),
    ("out_bad_char", "ij,jk->i$", [(2, 3), (3, 4)]),
]:
    err_list(f"err_einsum_{nm}", "torch.einsum", [g(1, *sh) for sh in shapes], equation=eq)
err_list("err_einsum_dtype", "torch.einsum", [gi(1, 0, 3, 2, 3), g(2, 3, 4)], equation="ij,jk")
chain("einsum_chain_transposed", g(705, 4, 3), [("t", {}), ("torch.einsum", {"equation": "ij,jk->ik"}, ["op1"])],
      others={"op1": g(706, 5, 4)[::2].t()}, note="chain step: torch.einsum(equation, self, op1)")

# ------------------------------------------------------------ tensordot, cross, kron
for dt, s in FLOATS:
    rec(f"tensordot_{s}_int", "torch.tensordot", {"a": g(800, 2, 3, 4, dtype=dt), "b": g(801, 3, 4, 5, dtype=dt)},
        {"dims": 2}, grad=["a", "b"], node=False)
    rec(f"tensordot_{s}_lists", "torch.tensordot", {"a": g(802, 2, 3, 4, dtype=dt), "b": g(803, 4, 2, 5, dtype=dt)},
        {"dims": [[0, 2], [1, 0]]}, grad=["a", "b"], node=False)
    rec(f"cross_{s}", "torch.linalg.cross", {"input": g(804, 4, 3, dtype=dt), "other": g(805, 4, 3, dtype=dt)},
        grad=["input", "other"])
    rec(f"cross_{s}_dim0", "torch.linalg.cross", {"input": g(806, 3, 2, dtype=dt), "other": g(807, 3, 2, dtype=dt)},
        {"dim": 0}, grad=["input", "other"])
    rec(f"cross_{s}_bcast", "torch.linalg.cross", {"input": g(808, 2, 1, 3, dtype=dt),
                                                   "other": g(809, 1, 4, 3, dtype=dt)}, grad=["input", "other"])
    rec(f"torch_cross_{s}", "torch.cross", {"input": g(810, 2, 3, 4, dtype=dt), "other": g(811, 2, 3, 4, dtype=dt)},
        {"dim": 1}, grad=["input", "other"])
    rec(f"kron_{s}", "torch.kron", {"input": g(812, 2, 3, dtype=dt), "other": g(813, 3, 2, dtype=dt)},
        grad=["input", "other"], node=False)
    rec(f"kron_{s}_ranks", "torch.kron", {"input": g(814, 2, 2, 3, dtype=dt), "other": g(815, 4, dtype=dt)},
        grad=["input", "other"], node=False)
rec("tensordot_zero", "torch.tensordot", {"a": g(816, 2, 3), "b": g(817, 4)}, {"dims": 0}, grad=["a", "b"],
    node=False)
rec("tensordot_int", "torch.tensordot", {"a": gi(818, -4, 4, 2, 3), "b": gi(819, -4, 4, 3, 2)}, {"dims": 1})
rec("cross_int64", "torch.linalg.cross", {"input": gi(820, -4, 4, 2, 3), "other": gi(821, -4, 4, 2, 3)})
rec("torch_cross_default_dim", "torch.cross", {"input": g(822, 2, 3, 3), "other": g(823, 2, 3, 3)},
    grad=["input", "other"], note="no dim: the first dim of size 3 (deprecated default)")
rec("kron_int64", "torch.kron", {"input": gi(824, -4, 4, 2, 2), "other": gi(825, -4, 4, 2, 3)})
rec("kron_mixed_dtype", "torch.kron", {"input": gi(826, -4, 4, 2, 2), "other": g(827, 3)})
rec("kron_scalar", "torch.kron", {"input": g(828), "other": g(829, 2, 3)}, grad=["input", "other"], node=False)
chain("cross_chain_transposed", g(830, 3, 4), [("t", {}), ("torch.linalg.cross", {}, ["other"])],
      others={"other": g(831, 4, 6)[:, ::2]})
chain("kron_chain_strided", g(832, 4, 6), [("__getitem__", {"index": [{"slice": [None, None, 2]},
                                                                       {"slice": [1, None, 2]}]}),
                                           ("kron", {}, ["other"])], others={"other": g(833, 3, 4)[:, ::2]},
      note="PyTorch 2.15 fails on a transposed operand (its view); strided ones work")
err("err_tensordot_sizes", "torch.tensordot", {"a": g(1, 2, 3), "b": g(2, 4, 5)}, dims=[[1], [0]])
err("err_tensordot_dtype", "torch.tensordot", {"a": gi(1, 0, 3, 2, 3), "b": g(2, 3, 2)}, dims=1)
err("err_cross_len", "torch.linalg.cross", {"input": g(1, 2, 3), "other": g(2, 2, 4)})
err("err_cross_ndim", "torch.linalg.cross", {"input": g(1, 2, 3), "other": g(2, 3)})
err("err_cross_dtype", "torch.linalg.cross", {"input": g(1, 2, 3), "other": g(2, 2, 3, dtype=f64)})
err("err_torch_cross_no_dim3", "torch.cross", {"input": g(1, 2, 4), "other": g(2, 2, 4)})

# ------------------------------------------------------------ norms
vx = g(900, 3, 4)
vx_tie = T([[3.0, -3.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [-2.0, 2.0, 2.0, -1.0]])
for dt, s in FLOATS:
    x = vx.to(dt)
    for ord_ in [2, 1, 0, INF, -INF, 3.5, 0.5, -1, -2.5]:
        on = str(ord_).replace(".", "p").replace("-", "m")
        rec(f"vector_norm_{s}_ord{on}", "torch.linalg.vector_norm", {"x": x}, {"ord": ord_}, grad=["x"])
        rec(f"vector_norm_{s}_ord{on}_dim1", "torch.linalg.vector_norm", {"x": x}, {"ord": ord_, "dim": 1},
            grad=["x"])
    rec(f"vector_norm_{s}_dims_keep", "torch.linalg.vector_norm", {"x": g(901, 2, 3, 4, dtype=dt)},
        {"ord": 3, "dim": [0, 2], "keepdim": True}, grad=["x"])
    rec(f"vector_norm_{s}_neg_dim", "torch.linalg.vector_norm", {"x": g(902, 2, 3, 4, dtype=dt)},
        {"dim": -2}, grad=["x"])
    rec(f"vector_norm_{s}_zeros", "torch.linalg.vector_norm", {"x": vx_tie.to(dt)}, {"dim": 1}, grad=["x"],
        note="a zero row: PyTorch's masked gradient")
    rec(f"vector_norm_{s}_inf_ties", "torch.linalg.vector_norm", {"x": vx_tie.to(dt)}, {"ord": INF, "dim": 1},
        grad=["x"])
rec("vector_norm_dtype_f64", "torch.linalg.vector_norm", {"x": vx}, {"ord": 2, "dtype": f64}, grad=["x"])
rec("vector_norm_dtype_f64_dim", "torch.linalg.vector_norm", {"x": vx}, {"ord": 1, "dim": 0, "dtype": f64},
    grad=["x"])
rec("vector_norm_f16", "torch.linalg.vector_norm", {"x": vx.half()}, {"ord": 2})
rec("vector_norm_bf16_dim", "torch.linalg.vector_norm", {"x": vx.bfloat16()}, {"ord": 3, "dim": 1})
rec("vector_norm_empty_dim", "torch.linalg.vector_norm", {"x": torch.zeros(0, 3)}, {"ord": INF, "dim": 1})
rec("vector_norm_empty_sum", "torch.linalg.vector_norm", {"x": torch.zeros(0, 3)}, {"ord": 2})
chain("vector_norm_chain_transposed", g(903, 4, 5), [("t", {}), ("torch.linalg.vector_norm", {"ord": 3, "dim": 0})])
err("err_vector_norm_int", "torch.linalg.vector_norm", {"x": T([1, 2])})
err("err_vector_norm_dtype_narrow", "torch.linalg.vector_norm", {"x": vx.double()}, dtype=f32)
err("err_vector_norm_dtype_int", "torch.linalg.vector_norm", {"x": vx}, dtype=i64)
err("err_vector_norm_empty_inf", "torch.linalg.vector_norm", {"x": torch.zeros(0, 3)}, ord=INF)
err("err_vector_norm_empty_inf_dim", "torch.linalg.vector_norm", {"x": torch.zeros(0, 3)}, ord=-INF, dim=0)

MORDS = [("fro", "fro"), ("nuc", "nuc"), (1, "1"), (-1, "m1"), (2, "2"), (-2, "m2"), (INF, "inf"), (-INF, "minf")]
for dt, s in FLOATS:
    for ord_, on in MORDS:
        rec(f"matrix_norm_{s}_{on}", "torch.linalg.matrix_norm", {"A": g(910, 3, 4, dtype=dt)}, {"ord": ord_},
            grad=["A"])
        rec(f"matrix_norm_{s}_{on}_batched_keep", "torch.linalg.matrix_norm", {"A": g(911, 2, 4, 3, dtype=dt)},
            {"ord": ord_, "keepdim": True}, grad=["A"])
    rec(f"matrix_norm_{s}_dims", "torch.linalg.matrix_norm", {"A": g(912, 2, 3, 4, dtype=dt)},
        {"ord": "fro", "dim": [0, 2]}, grad=["A"])
    rec(f"matrix_norm_{s}_nuc_dims", "torch.linalg.matrix_norm", {"A": g(913, 2, 3, 4, dtype=dt)},
        {"ord": "nuc", "dim": [2, 0]}, grad=["A"])
    rec(f"matrix_norm_{s}_2_dims_keep", "torch.linalg.matrix_norm", {"A": g(914, 2, 3, 4, dtype=dt)},
        {"ord": 2, "dim": [2, 0], "keepdim": True}, grad=["A"])
    rec(f"matrix_norm_{s}_1_dims", "torch.linalg.matrix_norm", {"A": g(915, 2, 3, 4, dtype=dt)},
        {"ord": 1, "dim": [-1, 0]}, grad=["A"])
    rec(f"matrix_norm_{s}_minf_dims_keep", "torch.linalg.matrix_norm", {"A": g(916, 2, 3, 4, dtype=dt)},
        {"ord": -INF, "dim": [0, 1], "keepdim": True}, grad=["A"])
rec("matrix_norm_dtype_f64", "torch.linalg.matrix_norm", {"A": g(917, 3, 3)}, {"ord": "nuc", "dtype": f64},
    grad=["A"])
rec("matrix_norm_empty_1", "torch.linalg.matrix_norm", {"A": torch.zeros(0, 3)}, {"ord": 1})
rec("matrix_norm_empty_2", "torch.linalg.matrix_norm", {"A": torch.zeros(0, 3)}, {"ord": 2})
rec("matrix_norm_empty_fro", "torch.linalg.matrix_norm", {"A": torch.zeros(2, 0, 3)})
chain("matrix_norm_chain_transposed", g(918, 4, 2, 3), [("transpose", {"dim0": 0, "dim1": 2}),
                                                        ("torch.linalg.matrix_norm", {"ord": "nuc"})])
err("err_matrix_norm_1d", "torch.linalg.matrix_norm", {"A": g(1, 3)})
err("err_matrix_norm_ord", "torch.linalg.matrix_norm", {"A": g(1, 3, 3)}, ord=3)
err("err_matrix_norm_ord_str", "torch.linalg.matrix_norm", {"A": g(1, 3, 3)}, ord="abc")
err("err_matrix_norm_same_dims", "torch.linalg.matrix_norm", {"A": g(1, 2, 3, 3)}, dim=[1, 1])
err("err_matrix_norm_int", "torch.linalg.matrix_norm", {"A": T([[1, 2]])})
err("err_matrix_norm_dim_len", "torch.linalg.matrix_norm", {"A": g(1, 2, 3, 3)}, dim=[1])
# linalg.norm: vector or matrix norm by ord and dim, as PyTorch dispatches.
for dt, s in FLOATS:
    rec(f"norm_{s}_default_2d", "torch.linalg.norm", {"A": g(920, 3, 4, dtype=dt)}, grad=["A"])
    rec(f"norm_{s}_default_3d", "torch.linalg.norm", {"A": g(921, 2, 3, 4, dtype=dt)}, grad=["A"])
    rec(f"norm_{s}_vector_ord", "torch.linalg.norm", {"A": g(922, 5, dtype=dt)}, {"ord": 3}, grad=["A"])
    rec(f"norm_{s}_matrix_ord", "torch.linalg.norm", {"A": g(923, 3, 4, dtype=dt)}, {"ord": 2}, grad=["A"])
    rec(f"norm_{s}_matrix_nuc", "torch.linalg.norm", {"A": g(924, 3, 4, dtype=dt)}, {"ord": "nuc"}, grad=["A"])
    rec(f"norm_{s}_dim_int", "torch.linalg.norm", {"A": g(925, 2, 3, 4, dtype=dt)}, {"ord": 3, "dim": 1},
        grad=["A"])
    rec(f"norm_{s}_dim_pair", "torch.linalg.norm", {"A": g(926, 2, 3, 4, dtype=dt)},
        {"ord": -INF, "dim": [2, 0], "keepdim": True}, grad=["A"])
    rec(f"norm_{s}_dim_pair_default", "torch.linalg.norm", {"A": g(927, 2, 3, 4, dtype=dt)}, {"dim": [0, 1]},
        grad=["A"])
    rec(f"norm_{s}_dim_one_default", "torch.linalg.norm", {"A": g(928, 2, 3, 4, dtype=dt)},
        {"dim": [-1], "keepdim": True}, grad=["A"])
rec("norm_dtype", "torch.linalg.norm", {"A": g(929, 3, 3)}, {"ord": 1, "dtype": f64}, grad=["A"])
err("err_norm_3d_ord", "torch.linalg.norm", {"A": g(1, 2, 3, 4)}, ord=2)
err("err_norm_str_1d", "torch.linalg.norm", {"A": g(1, 4)}, ord="fro")
err("err_norm_fro_dim1", "torch.linalg.norm", {"A": g(1, 2, 3, 4)}, ord="fro", dim=1)
err("err_norm_dim3", "torch.linalg.norm", {"A": g(1, 2, 3, 4)}, dim=[0, 1, 2])
err("err_norm_int", "torch.linalg.norm", {"A": T([1, 2])})

# ------------------------------------------------------------ inv, solve, det, slogdet
for dt, s in FLOATS:
    rec(f"inv_{s}", "torch.linalg.inv", {"A": well(1000, 4, dtype=dt)}, grad=["A"])
    rec(f"inv_{s}_batched", "torch.linalg.inv", {"A": well(1001, 3, 2, 2, dtype=dt)}, grad=["A"])
    rec(f"det_{s}", "torch.linalg.det", {"A": g(1002, 4, 4, dtype=dt)}, grad=["A"])
    rec(f"det_{s}_batched", "torch.linalg.det", {"A": g(1003, 3, 3, 3, dtype=dt)}, grad=["A"])
    rec(f"slogdet_{s}", "torch.linalg.slogdet", {"A": g(1004, 4, 4, dtype=dt)}, grad=["A"])
    rec(f"slogdet_{s}_batched", "torch.linalg.slogdet", {"A": g(1005, 2, 3, 3, dtype=dt)}, grad=["A"])
    rec(f"solve_{s}", "torch.linalg.solve", {"A": well(1006, 4, dtype=dt), "B": g(1007, 4, 2, dtype=dt)},
        grad=["A", "B"])
    rec(f"solve_{s}_vector", "torch.linalg.solve", {"A": well(1008, 4, dtype=dt), "B": g(1009, 4, dtype=dt)},
        grad=["A", "B"])
    rec(f"solve_{s}_batched", "torch.linalg.solve", {"A": well(1010, 3, 2, dtype=dt),
                                                     "B": g(1011, 2, 3, 4, dtype=dt)}, grad=["A", "B"])
    rec(f"solve_{s}_batched_vector", "torch.linalg.solve", {"A": well(1012, 3, 2, dtype=dt),
                                                            "B": g(1013, 2, 3, dtype=dt)}, grad=["A", "B"])
    rec(f"solve_{s}_bcast_A", "torch.linalg.solve", {"A": well(1014, 3, dtype=dt), "B": g(1015, 2, 5, 3, 2, dtype=dt)},
        grad=["A", "B"])
    rec(f"solve_{s}_bcast_both", "torch.linalg.solve", {"A": well(1016, 3, 2, 1, dtype=dt),
                                                        "B": g(1017, 4, 3, 2, dtype=dt)}, grad=["A", "B"])
    rec(f"solve_{s}_vector_bcast", "torch.linalg.solve", {"A": well(1018, 3, 2, dtype=dt), "B": g(1019, 3, dtype=dt)},
        grad=["A", "B"])
rec("inv_f64_big", "torch.linalg.inv", {"A": well(1020, 52)}, grad=["A"], note="past the LU block size (48)")
rec("solve_f64_big", "torch.linalg.solve", {"A": g(1021, 60, 60, dtype=f64), "B": g(1022, 60, 3, dtype=f64)}, grad=["A", "B"],
    note="partial pivoting across blocks")
rec("det_f64_big", "torch.linalg.det", {"A": g(1023, 50, 50, dtype=f64, scale=0.5)}, grad=["A"])
rec("slogdet_f64_big", "torch.linalg.slogdet", {"A": g(1024, 56, 56, dtype=f64)}, grad=["A"])
rec("det_pivots", "torch.linalg.det", {"A": T([[0.0, 2.0, 1.0], [3.0, 1.0, 0.0], [1.0, 1.0, 5.0]], dtype=f64)},
    grad=["A"])
rec("det_singular", "torch.linalg.det", {"A": T([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype=f64)},
    grad=["A"], note="rank n-1: the gradient is the adjugate, not NaN")
rec("det_singular_rank1", "torch.linalg.det", {"A": T([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]],
                                                      dtype=f64)}, grad=["A"], note="rank 1: zero gradient")
rec("det_singular_zero_row", "torch.linalg.det", {"A": T([[1.0, 2.0], [0.0, 0.0]], dtype=f64)}, grad=["A"])
rec("det_singular_batched", "torch.linalg.det",
    {"A": torch.stack([well(1025, 3), T([[1.0, 2.0, 0.5], [2.0, 4.0, 1.0], [0.0, 1.0, 3.0]], dtype=f64)])},
    grad=["A"], note="one singular batch element")
rec("det_singular_f32", "torch.linalg.det", {"A": T([[2.0, 1.0], [4.0, 2.0]])}, grad=["A"])
rec("slogdet_singular", "torch.linalg.slogdet", {"A": torch.zeros(2, 2, dtype=f64)})
rec("slogdet_negative", "torch.linalg.slogdet", {"A": T([[0.0, 1.0], [1.0, 0.0]], dtype=f64)}, grad=["A"])
rec("det_empty", "torch.linalg.det", {"A": torch.zeros(0, 0)})
rec("det_empty_batch", "torch.linalg.det", {"A": torch.zeros(0, 3, 3)})
rec("inv_empty", "torch.linalg.inv", {"A": torch.zeros(2, 0, 0)})
chain("inv_chain_transposed", well(1026, 3), [("t", {}), ("torch.linalg.inv", {})])
chain("solve_chain_strided", well(1027, 3, 2), [("transpose", {"dim0": -2, "dim1": -1}),
                                                ("torch.linalg.solve", {}, ["B"])],
      others={"B": g(1028, 2, 6, 3, dtype=f64)[:, ::2].mT})
chain("det_chain_expanded", g(1029, 1, 3, 3), [("expand", {"size": [2, 3, 3]}), ("torch.linalg.det", {})])
chain("slogdet_chain_sliced", g(1030, 5, 5), [("__getitem__", {"index": [{"slice": [None, None, 2]},
                                                                         {"slice": [1, 4, None]}]}),
                                              ("torch.linalg.slogdet", {})])
sing = T([[1.0, 2.0], [2.0, 4.0]])
err("err_inv_singular", "torch.linalg.inv", {"A": sing})
err("err_inv_singular_3", "torch.linalg.inv", {"A": T([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]])})
err("err_inv_singular_batched", "torch.linalg.inv", {"A": torch.stack([torch.eye(2), sing])})
err("err_inv_nonsquare", "torch.linalg.inv", {"A": g(1, 2, 3)})
err("err_inv_int", "torch.linalg.inv", {"A": T([[1, 2], [3, 4]])})
err("err_inv_f16", "torch.linalg.inv", {"A": torch.eye(2, dtype=f16)})
err("err_inv_1d", "torch.linalg.inv", {"A": g(1, 3)})
err("err_solve_singular", "torch.linalg.solve", {"A": sing, "B": g(1, 2)})
err("err_solve_singular_batched", "torch.linalg.solve", {"A": torch.stack([torch.eye(2), sing]), "B": g(1, 2, 2)})
err("err_solve_shape", "torch.linalg.solve", {"A": torch.eye(3), "B": g(1, 4)})
err("err_solve_shape_matrix", "torch.linalg.solve", {"A": torch.eye(3), "B": g(1, 4, 2)})
err("err_solve_batch_shape", "torch.linalg.solve", {"A": torch.eye(3).expand(2, 3, 3), "B": g(1, 5, 3)})
err("err_solve_batch_bcast", "torch.linalg.solve", {"A": torch.eye(3).expand(2, 3, 3), "B": g(1, 4, 3, 2)})
err("err_solve_dtype", "torch.linalg.solve", {"A": torch.eye(3), "B": g(1, 3, dtype=f64)})
err("err_solve_int", "torch.linalg.solve", {"A": T([[1, 0], [0, 1]]), "B": T([1, 2])})
err("err_solve_nonsquare", "torch.linalg.solve", {"A": g(1, 2, 3), "B": g(2, 2)})
err("err_solve_1d", "torch.linalg.solve", {"A": g(1, 3), "B": g(2, 3)})
err("err_solve_0d_b", "torch.linalg.solve", {"A": torch.eye(3), "B": T(1.0)})
err("err_det_nonsquare", "torch.linalg.det", {"A": g(1, 2, 3)})
err("err_det_int", "torch.linalg.det", {"A": T([[1, 2], [3, 4]])})
err("err_det_1d", "torch.linalg.det", {"A": g(1, 3)})
err("err_slogdet_nonsquare", "torch.linalg.slogdet", {"A": g(1, 3, 2)})
err("err_slogdet_int", "torch.linalg.slogdet", {"A": T([[1, 2], [3, 4]])})

double("det_double", "torch.linalg.det", {"A": g(1031, 3, 3, dtype=f64)}, grad=["A"])
# With create_graph PyTorch takes singular matrices through the SVD (the
# adjugate, checked in tests/linalg_ops.rs); its second derivative there
# depends on the rounding of the zero singular value (PyTorch's own differs
# from the exact one by O(1)), so none is compared here.
double("det_double_batched", "torch.linalg.det", {"A": torch.stack([well(1032, 3), g(1039, 3, 3, dtype=f64)])},
       grad=["A"])
double("inv_double", "torch.linalg.inv", {"A": well(1033, 3)}, grad=["A"])
double("solve_double", "torch.linalg.solve", {"A": well(1034, 3), "B": g(1035, 3, 2, dtype=f64)}, grad=["A", "B"])
double("solve_double_vector_bcast", "torch.linalg.solve", {"A": well(1036, 3, 2), "B": g(1037, 3, dtype=f64)},
       grad=["A", "B"])
double("slogdet_double", "torch.linalg.slogdet", {"A": well(1038, 3)}, grad=["A"])

# ------------------------------------------------------------ cholesky, qr
for dt, s in FLOATS:
    rec(f"cholesky_{s}", "torch.linalg.cholesky", {"A": spd(1100, 4, dtype=dt)}, grad=["A"])
    rec(f"cholesky_{s}_upper", "torch.linalg.cholesky", {"A": spd(1101, 4, dtype=dt)}, {"upper": True}, grad=["A"])
    rec(f"cholesky_{s}_batched", "torch.linalg.cholesky", {"A": spd(1102, 3, 2, dtype=dt)}, grad=["A"])
    for mode in ["reduced", "complete", "r"]:
        for shp, sn in [((5, 3), "tall"), ((3, 5), "wide"), ((4, 4), "square"), ((2, 4, 3), "batched")]:
            differentiable = mode == "reduced" or (mode == "complete" and shp[-2] <= shp[-1])
            rec(f"qr_{s}_{mode}_{sn}", "torch.linalg.qr", {"A": g(1103 + len(CASES), *shp, dtype=dt)},
                {"mode": mode}, grad=["A"] if differentiable else [])
rec("cholesky_f64_big", "torch.linalg.cholesky", {"A": spd(1104, 40)}, grad=["A"])
rec("cholesky_reads_lower", "torch.linalg.cholesky", {"A": spd(1105, 3) + torch.triu(torch.ones(3, 3, dtype=f64), 1)},
    note="only the lower triangle is read")
rec("cholesky_upper_reads_lower", "torch.linalg.cholesky",
    {"A": spd(1106, 3) + torch.triu(torch.ones(3, 3, dtype=f64), 1)}, {"upper": True})
rec("qr_f64_big_tall", "torch.linalg.qr", {"A": g(1107, 30, 20, dtype=f64)}, grad=["A"])
rec("qr_f64_big_wide", "torch.linalg.qr", {"A": g(1108, 20, 33, dtype=f64)}, grad=["A"])
rec("qr_rank_deficient_col", "torch.linalg.qr", {"A": T([[1.0, 0.0, 2.0], [2.0, 0.0, 1.0], [3.0, 0.0, 1.0]],
                                                       dtype=f64)}, note="a zero column: geqrf's tau = 0")
rec("qr_empty", "torch.linalg.qr", {"A": torch.zeros(0, 3, dtype=f64)})
chain("cholesky_chain_transposed", spd(1109, 3), [("t", {}), ("torch.linalg.cholesky", {"upper": True})])
chain("qr_chain_strided", g(1110, 6, 8), [("__getitem__", {"index": [{"slice": [None, None, 2]},
                                                                     {"slice": [1, None, 2]}]}),
                                          ("torch.linalg.qr", {})])
double("cholesky_double", "torch.linalg.cholesky", {"A": spd(1111, 3)}, grad=["A"])
double("qr_double_tall", "torch.linalg.qr", {"A": g(1112, 4, 3, dtype=f64)}, grad=["A"])
double("qr_double_wide", "torch.linalg.qr", {"A": g(1113, 3, 5, dtype=f64)}, grad=["A"])
err("err_cholesky_not_pd", "torch.linalg.cholesky", {"A": T([[1.0, 2.0], [2.0, 1.0]])})
err("err_cholesky_not_pd_batched", "torch.linalg.cholesky", {"A": torch.stack([torch.eye(2),
                                                                             T([[1.0, 2.0], [2.0, 1.0]])])})
err("err_cholesky_not_pd_3", "torch.linalg.cholesky", {"A": T([[4.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]])})
err("err_cholesky_nonsquare", "torch.linalg.cholesky", {"A": g(1, 2, 3)})
err("err_cholesky_int", "torch.linalg.cholesky", {"A": T([[1, 0], [0, 1]])})
err("err_qr_int", "torch.linalg.qr", {"A": T([[1, 2], [3, 4]])})
err("err_qr_1d", "torch.linalg.qr", {"A": g(1, 3)})
err("err_qr_mode", "torch.linalg.qr", {"A": g(1, 2, 2)}, mode="x")

# ------------------------------------------------------------ eigh, eigvalsh, svd, svdvals
for dt, s in FLOATS:
    for uplo in ["L", "U"]:
        noise = g(1201, 4, 4, dtype=dt)
        other = torch.triu(noise, 1) if uplo == "L" else torch.tril(noise, -1)
        rec(f"eigh_{s}_{uplo}", "torch.linalg.eigh", {"A": sym(1200, 4, dtype=dt) + other},
            {"UPLO": uplo}, grad=["A"], post=[None, "sign_cols"],
            note="the other triangle holds different values: only UPLO's is read")
    rec(f"eigh_{s}_batched", "torch.linalg.eigh", {"A": sym(1202, 3, 2, dtype=dt)}, grad=["A"],
        post=[None, "sign_cols"])
    rec(f"eigvalsh_{s}", "torch.linalg.eigvalsh", {"A": sym(1203, 5, dtype=dt)}, grad=["A"])
    rec(f"eigvalsh_{s}_upper_batched", "torch.linalg.eigvalsh", {"A": sym(1204, 4, 3, dtype=dt)}, {"UPLO": "U"},
        grad=["A"])
    for full in [False, True]:
        fn = "full" if full else "reduced"
        for shp, sn in [((4, 3), "tall"), ((3, 4), "wide"), ((4, 4), "square"), ((2, 4, 3), "batched_tall"),
                        ((2, 3, 4), "batched_wide")]:
            rec(f"svd_{s}_{fn}_{sn}", "torch.linalg.svd", {"A": g(1205 + len(CASES), *shp, dtype=dt)},
                {"full_matrices": full}, grad=["A"], post=["sign_cols", None, "sign_rows"])
    rec(f"svdvals_{s}", "torch.linalg.svdvals", {"A": g(1206, 5, 3, dtype=dt)}, grad=["A"])
    rec(f"svdvals_{s}_batched_wide", "torch.linalg.svdvals", {"A": g(1207, 2, 3, 6, dtype=dt)}, grad=["A"])
rec("eigh_f64_big", "torch.linalg.eigh", {"A": sym(1208, 30)}, grad=["A"], post=[None, "sign_cols"])
rec("eigvalsh_f64_big", "torch.linalg.eigvalsh", {"A": sym(1209, 50)}, grad=["A"])
rec("svd_f64_big_tall", "torch.linalg.svd", {"A": g(1210, 30, 20, dtype=f64)}, {"full_matrices": False},
    grad=["A"], post=["sign_cols", None, "sign_rows"])
rec("svd_f64_big_wide", "torch.linalg.svd", {"A": g(1211, 20, 31, dtype=f64)}, {"full_matrices": False},
    grad=["A"], post=["sign_cols", None, "sign_rows"])
rec("svdvals_f64_big", "torch.linalg.svdvals", {"A": g(1212, 45, 35, dtype=f64)}, grad=["A"])
rec("svdvals_rank_deficient", "torch.linalg.svdvals", {"A": T([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]], dtype=f64)})
rec("eigvalsh_diagonal", "torch.linalg.eigvalsh", {"A": torch.diag(T([3.0, -1.0, 2.0], dtype=f64))}, grad=["A"])
rec("eigh_empty", "torch.linalg.eigh", {"A": torch.zeros(0, 0, dtype=f64)})
rec("svd_empty", "torch.linalg.svd", {"A": torch.zeros(0, 3, dtype=f64)}, {"full_matrices": False})
chain("eigh_chain_transposed", sym(1213, 3) + torch.triu(g(1214, 3, 3, dtype=f64), 1),
      [("t", {}), ("torch.linalg.eigh", {})], post=[None, "sign_cols"])
chain("svd_chain_strided", g(1215, 6, 8), [("__getitem__", {"index": [{"slice": [None, None, 2]},
                                                                      {"slice": [1, None, 2]}]}),
                                           ("torch.linalg.svd", {"full_matrices": False})],
      post=["sign_cols", None, "sign_rows"])
chain("svdvals_chain_transposed", g(1216, 3, 5), [("t", {}), ("torch.linalg.svdvals", {})])
double("eigvalsh_double", "torch.linalg.eigvalsh", {"A": sym(1217, 4)}, grad=["A"])
double("svdvals_double", "torch.linalg.svdvals", {"A": g(1218, 4, 3, dtype=f64)}, grad=["A"])
double("svdvals_double_wide", "torch.linalg.svdvals", {"A": g(1219, 2, 5, dtype=f64)}, grad=["A"])
double("matrix_norm_nuc_double", "torch.linalg.matrix_norm", {"A": g(1220, 3, 4, dtype=f64)}, {"ord": "nuc"},
       grad=["A"])
err("err_eigh_nonsquare", "torch.linalg.eigh", {"A": g(1, 2, 3)})
err("err_eigh_int", "torch.linalg.eigh", {"A": T([[1, 0], [0, 1]])})
err("err_eigh_uplo", "torch.linalg.eigh", {"A": g(1, 2, 2)}, UPLO="X")
err("err_eigvalsh_int", "torch.linalg.eigvalsh", {"A": T([[1, 0], [0, 1]])})
rec("eigh_nan", "torch.linalg.eigh", {"A": T([[1.0, NAN], [NAN, 1.0]], dtype=f64)}, note="NaN eigenpairs, no error")
rec("eigvalsh_inf_batched", "torch.linalg.eigvalsh", {"A": torch.stack([sym(1221, 2), T([[INF, 0.0], [0.0, 1.0]],
                                                                                          dtype=f64)])})
err("err_svd_nan", "torch.linalg.svd", {"A": T([[1.0, NAN], [0.0, 1.0]])})
rec("svdvals_inf_batched", "torch.linalg.svdvals", {"A": torch.stack([torch.eye(2), T([[INF, 0.0], [0.0, 1.0]])])},
    note="inf gives NaN singular values (NaN is an error)")
err("err_svdvals_nan_batched", "torch.linalg.svdvals", {"A": torch.stack([torch.eye(2), T([[NAN, 0.0], [0.0, 1.0]])])})
err("err_svd_int", "torch.linalg.svd", {"A": T([[1, 2], [3, 4]])})
err("err_svd_1d", "torch.linalg.svd", {"A": g(1, 3)})
err("err_svdvals_int", "torch.linalg.svdvals", {"A": T([[1, 2], [3, 4]])})

write(OUT, "linalg")
