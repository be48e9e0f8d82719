"""Helpers shared by the extra-oracle generators (`gen_extra_oracle.py`,
`gen_ops_oracle.py`): encoding tensors in the oracle's JSON form and
recording cases. The format is the shared oracle's
(tests/oracle/README.md), with the extensions described in
tests/oracle_extra/README.md."""

import json
import math
import os
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore", message=r"var\(\): degrees of freedom")


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
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}

NAN = float("nan")
INF = float("inf")


class Raw(str):
    """A JSON number literal written verbatim."""


def fnum(v, dtype):
    """One float element as the shortest literal that gives back its exact value."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if dtype == torch.float32:
        return Raw(str(np.float32(v)))
    # float64, and float16/bfloat16 written as their exact value (exact in f64).
    return Raw(repr(float(v)))


def enc(t):
    """A tensor in the oracle's JSON form."""
    t = t.detach().cpu().contiguous()
    name = DTYPE_NAMES[t.dtype]
    if t.dtype.is_floating_point:
        data = [fnum(v, t.dtype) for v in t.to(torch.float64).flatten().tolist()]
    elif t.dtype == torch.bool:
        data = [bool(v) for v in t.flatten().tolist()]
    else:
        data = [int(v) for v in t.flatten().tolist()]
    return {"shape": list(t.shape), "dtype": name, "data": data}


def enc_kw(v):
    """A kwarg value: non-finite floats as strings, dtypes by name, tuples as lists."""
    if isinstance(v, torch.dtype):
        return DTYPE_NAMES[v]
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (list, tuple)):
        return [enc_kw(x) for x in v]
    if isinstance(v, dict):
        return {k: enc_kw(x) for k, x in v.items()}
    return v


def dump(v):
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + dump(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(dump(x) for x in v) + "]"
    if isinstance(v, float):
        assert math.isfinite(v), v
        return repr(v)
    return json.dumps(v)


def resolve(op):
    obj = torch
    for part in op.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


CASES = []
NAMES = set()


def add_case(name, op, inputs, output, kwargs=None, input_names=None, note=None, **extra):
    assert name not in NAMES, name
    NAMES.add(name)
    c = {"name": name}
    c.update({k: v for k, v in extra.items() if k in ("kind",)})
    c["op"] = op
    c["input_names"] = input_names if input_names is not None else []
    if "input_list" in extra:
        c["input_list"] = extra["input_list"]
    c["kwargs"] = enc_kw(kwargs or {})
    c["inputs"] = [enc(t) for t in inputs]
    if "steps" in extra:
        c["steps"] = [
            {"op": s[0], "kwargs": enc_kw(s[1]), **({"input_names": s[2]} if len(s) > 2 and s[2] != ["self"] else {})}
            for s in extra["steps"]
        ]
    if "error" in extra:
        c["error"] = extra["error"]
    c["output"] = output
    if note:
        c["note"] = note
    CASES.append(c)


def enc_out(r):
    if isinstance(r, torch.Tensor):
        return enc(r)
    return [enc(t) for t in r]


def case(name, op, inputs=None, note=None, **kwargs):
    """op(**inputs, **kwargs), exactly; `inputs` is a dict name -> tensor."""
    inputs = inputs or {}
    if op.startswith("torch.Tensor."):
        # A method: the first input is `self`, passed positionally.
        rest = dict(inputs)
        r = resolve(op)(rest.pop("self"), **rest, **kwargs)
    else:
        r = resolve(op)(**inputs, **kwargs)
    add_case(name, op, list(inputs.values()), enc_out(r), kwargs, list(inputs.keys()), note)


def list_case(name, op, tensors, note=None, **kwargs):
    """op(tensors=[...], **kwargs) (cat / stack)."""
    r = resolve(op)(tensors=tensors, **kwargs)
    add_case(name, op, tensors, enc_out(r), kwargs, ["tensors"] * len(tensors), note, input_list="tensors")


def seeded(name, op, seed, note=None, input=None, **kwargs):
    """torch.manual_seed(seed); op(**kwargs) (with `input` when given)."""
    torch.manual_seed(seed)
    ins = {} if input is None else {"input": input}
    r = resolve(op)(**ins, **kwargs)
    add_case(name, op, list(ins.values()), enc_out(r), dict(kwargs, seed=seed), list(ins.keys()), note)


def getitem(name, x, index, note=None):
    """x[index]; tensor items become {"tensor": k} referring to inputs[k]."""
    inputs = [x]
    items = []
    py = []
    for it in index:
        if isinstance(it, torch.Tensor):
            items.append({"tensor": len(inputs)})
            inputs.append(it)
            py.append(it)
        elif isinstance(it, slice):
            items.append({"slice": [it.start, it.stop, it.step]})
            py.append(it)
        elif it is Ellipsis:
            items.append("...")
            py.append(it)
        else:
            items.append(it)
            py.append(it)
    r = x[tuple(py)]
    names = ["self"] + [f"index{i}" for i in range(1, len(inputs))]
    add_case(name, "torch.Tensor.__getitem__", inputs, enc_out(r), {"index": items}, names, note)


def chain(name, x, steps, note=None, others=None):
    """Applies `steps` one after the other to x: (method name, kwargs) or
    (method name, kwargs, names of `others` the step binds by keyword).
    In a `__getitem__` step, {"tensor": k} is the step's k-th input
    (0: the running value, then the named others)."""
    others = others or {}
    r = x
    full = []
    for step in steps:
        op, kw = step[0], step[1]
        names = list(step[2]) if len(step) > 2 else []
        step_inputs = [r] + [others[n] for n in names]
        if op == "__getitem__":
            items = []
            for it in kw["index"]:
                if isinstance(it, dict) and "slice" in it:
                    items.append(slice(*it["slice"]))
                elif isinstance(it, dict):
                    items.append(step_inputs[it["tensor"]])
                elif it == "...":
                    items.append(Ellipsis)
                else:
                    items.append(it)
            r = r[tuple(items)]
        else:
            r = getattr(torch.Tensor, op)(r, **{n: others[n] for n in names}, **kw)
        full.append(("torch.Tensor." + op, kw, ["self"] + names))
    add_case(name, "chain", [x] + list(others.values()), enc_out(r), {}, ["self"] + list(others.keys()), note,
             kind="chain", steps=full)


def error_case(name, op, inputs, note=None, **kwargs):
    """A call PyTorch rejects: `error` holds its message, `output` is null."""
    tensors = list(inputs.get("tensors", []))
    try:
        if op.startswith("torch.Tensor."):
            rest = dict(inputs)
            resolve(op)(rest.pop("self"), **rest, **kwargs)
        else:
            resolve(op)(**inputs, **kwargs)
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0]
    else:
        raise AssertionError(f"{name}: PyTorch accepted the call")
    if tensors:
        add_case(name, op, tensors, None, kwargs, ["tensors"] * len(tensors), note, kind="error", error=msg,
                 input_list="tensors")
    else:
        add_case(name, op, list(inputs.values()), None, kwargs, list(inputs.keys()), note, kind="error", error=msg)


def chain_error(name, x, steps, note=None):
    """Like `chain`, for a chain whose last step PyTorch rejects."""
    r = x
    try:
        for op, kw in steps:
            r = getattr(torch.Tensor, op)(r, **kw)
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0]
    else:
        raise AssertionError(f"{name}: PyTorch accepted the call")
    full = [("torch.Tensor." + op, kw) for op, kw in steps]
    add_case(name, "chain", [x], None, {}, ["self"], note, kind="error", steps=full, error=msg)


def g(seed, *shape, dtype=torch.float32, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def gi(seed, low, high, *shape, dtype=torch.int64):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=gen).to(dtype)




def grad_case(name, op, inputs, grad_inputs, note=None, **kwargs):
    """Like `case`, plus `grads`: d/d(input) of sum(output * W) for the inputs
    named in `grad_inputs`, with a fixed random weight W per output."""
    inputs = {k: (v.detach().clone().requires_grad_(k in grad_inputs)) for k, v in inputs.items()}
    if op.startswith("torch.Tensor."):
        rest = dict(inputs)
        r = resolve(op)(rest.pop("self"), **rest, **kwargs)
    else:
        r = resolve(op)(**inputs, **kwargs)
    outs = [r] if isinstance(r, torch.Tensor) else list(r)
    gen = torch.Generator().manual_seed(len(CASES))
    weights = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) if o.dtype.is_floating_point else None
               for o in outs]
    loss = sum((o * w).sum() for o, w in zip(outs, weights) if w is not None and o.requires_grad)
    diff = [v for k, v in inputs.items() if k in grad_inputs]
    gs = torch.autograd.grad(loss, diff, allow_unused=True)
    grads = []
    it = iter(gs)
    for k, v in inputs.items():
        if k in grad_inputs:
            gk = next(it)
            grads.append(enc(gk if gk is not None else torch.zeros_like(v)))
        else:
            grads.append(None)
    add_case(name, op, list(inputs.values()), enc_out(r), kwargs, list(inputs.keys()), note)
    CASES[-1]["grads"] = grads
    CASES[-1]["grad_weight"] = enc(weights[0]) if len(weights) == 1 else [None if w is None else enc(w) for w in weights]


def write(path, family):
    """Writes the recorded cases to `path` (a file of the oracle's format)."""
    doc = {"family": family, "torch_version": torch.__version__.split("+")[0], "cases": CASES}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = (
        "{" + f'"family":{json.dumps(doc["family"])},"torch_version":{json.dumps(doc["torch_version"])},"cases":[\n'
        + ",\n".join(dump(c) for c in CASES)
        + "\n]}"
    )
    json.loads(text)  # the output must be valid JSON
    with open(path, "w") as f:
        f.write(text)
        f.write("\n")
    print(f"{path}: {len(CASES)} cases, {len(text)} bytes")
