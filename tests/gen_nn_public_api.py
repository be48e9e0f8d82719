"""Writes tests/nn_data/public_api.json: what PyTorch gives for the small
public pieces of `torch.nn` that `tests/nn_public_api.rs` checks one by
one: `nn.init.calculate_gain` for every nonlinearity name (and its error),
`constant_` / `ones_` / `eye_` (and eye_'s error), `nn.utils.get_total_norm`
and `clip_grads_with_norm_` over several gradients (norm types 2, 1, inf,
-inf, 0, 3, 0.5; mixed dtypes; the non-finite error), `Embedding`'s and
`Linear`'s sizes and `LayerNorm.eps`, the `_flat_weights_names` of LSTM and
GRU, max pooling with `return_indices=True`, `F.gelu` (both
`approximate`s), `F.log_softmax(dtype=...)`, `F.one_hot` (and its errors),
`param.data = t`, `module.training = False` on one module, a module called
between forward pre-, forward and full backward hooks, `forward` (no hooks)
against `__call__` (hooks) for LSTM, GRU, MultiheadAttention and the
transformer layers, and `nn.Sequential(OrderedDict(...))` with appended
layers.

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_nn_public_api.py
"""

import json
import math
import os
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_data", "public_api.json")


def num(v):
    # JSON has no infinities: non-finite values as Python spells them.
    return v if math.isfinite(v) else repr(v)


def summary(t):
    if t is None:
        return None
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).replace("torch.", ""),
        "data": [num(v) for v in t.detach().to(torch.float64).flatten().tolist()],
    }


def error_of(f):
    """The message of the exception `f` raises (its first line)."""
    try:
        f()
    except Exception as e:  # noqa: BLE001 - any PyTorch error is the reference
        return {"type": type(e).__name__, "message": str(e).splitlines()[0]}
    raise AssertionError("expected an error")


out = {"torch": torch.__version__}

# ------------------------------------------------------------ calculate_gain
gains = []
for name in ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d", "sigmoid", "tanh", "relu", "selu"]:
    gains.append({"name": name, "param": None, "gain": float(nn.init.calculate_gain(name))})
# The param is ignored by every nonlinearity but leaky_relu.
for name, param in [("tanh", 0.5), ("relu", 3.0), ("selu", 0.1), ("sigmoid", 2.0), ("linear", 0.7)]:
    gains.append({"name": name, "param": param, "gain": float(nn.init.calculate_gain(name, param))})
for param in [None, 0.2, 0.0, 1.0, -0.3, math.sqrt(5.0), 100.0]:
    gains.append({"name": "leaky_relu", "param": param, "gain": float(nn.init.calculate_gain("leaky_relu", param))})
out["calculate_gain"] = gains
out["calculate_gain_errors"] = [
    {"name": n, "error": error_of(lambda n=n: nn.init.calculate_gain(n))}
    for n in ["gelu", "Linear", "leaky-relu", "", "silu"]
]

# ----------------------------------------------------------- init functions
init = []
for shape, dtype, value in [((2, 3), torch.float32, 0.3), ((4,), torch.float64, -1.7), ((2, 2, 2), torch.float32, 1e-8),
                            ((3,), torch.int64, -2.7)]:
    t = torch.full(shape, 9.0, dtype=dtype)
    r = nn.init.constant_(t, value)
    assert r is t
    init.append({"fn": "constant_", "value": value, "result": summary(t)})
for shape, dtype in [((2, 3), torch.float32), ((3,), torch.float64)]:
    t = torch.full(shape, 9.0, dtype=dtype)
    nn.init.ones_(t)
    init.append({"fn": "ones_", "result": summary(t)})
for shape, dtype in [((3, 5), torch.float32), ((4, 2), torch.float64), ((3, 3), torch.float32), ((0, 3), torch.float32)]:
    t = torch.full(shape, 9.0, dtype=dtype)
    nn.init.eye_(t)
    init.append({"fn": "eye_", "result": summary(t)})
out["init"] = init
out["eye_errors"] = [
    {"shape": list(s), "error": error_of(lambda s=s: nn.init.eye_(torch.empty(s)))} for s in [(3,), (2, 2, 2), ()]
]
# Initialising a parameter leaves it a leaf that requires grad.
p = nn.Parameter(torch.full((2, 3), 9.0))
nn.init.eye_(p)
out["init_parameter"] = {"result": summary(p), "requires_grad": p.requires_grad, "is_leaf": p.is_leaf}


# ------------------------------------------------------------------ clipping
def grads_case(name, seed, specs, norm_types, max_norms):
    """Parameters of `specs` ((shape, dtype, scale) or (shape, dtype, None)
    for one without a gradient) with randn gradients * scale after
    manual_seed(seed)."""
    torch.manual_seed(seed)
    grads = []
    for shape, dtype, scale in specs:
        grads.append(None if scale is None else (torch.randn(shape, dtype=torch.float64) * scale).to(dtype))
    case = {"name": name, "params": [], "norms": []}
    for (shape, dtype, _), g in zip(specs, grads):
        case["params"].append({"shape": list(shape), "dtype": str(dtype).replace("torch.", ""), "grad": summary(g)})
    for nt in norm_types:
        with_grads = [g for g in grads if g is not None]
        total = nn.utils.get_total_norm(with_grads, nt, foreach=False)
        assert torch.equal(total, nn.utils.get_total_norm(with_grads, nt, foreach=True))
        entry = {"norm_type": num(nt), "total": summary(total), "clipped": []}
        for mn in max_norms:
            params = []
            for (shape, dtype, _), g in zip(specs, grads):
                p = nn.Parameter(torch.zeros(shape, dtype=dtype))
                if g is not None:
                    p.grad = g.clone()
                params.append(p)
            nn.utils.clip_grads_with_norm_(params, mn, total)
            entry["clipped"].append({"max_norm": mn, "grads": [summary(p.grad) for p in params]})
        case["norms"].append(entry)
    return case


F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
ALL_NORMS = [2.0, 1.0, math.inf, -math.inf, 0.0, 3.0, 0.5]
clip = [
    grads_case("f32_three_one_without_grad", 11, [((3, 4), F32, 0.3), ((5,), F32, None), ((2, 2, 3), F32, 0.2),
                                                  ((7,), F32, 0.1)], ALL_NORMS, [0.5, 1.0, 1e3]),
    # Total norm close to max_norm: the 1e-6 of the coefficient shows.
    grads_case("f32_near_one", 12, [((4,), F32, 0.25), ((3,), F32, 0.25)], [2.0], [0.5, 0.9, 1.0]),
    grads_case("f32_f64_mixed", 13, [((3,), F32, 1.0), ((2, 3), F64, 2.0), ((4,), F32, 0.5)], [2.0, 1.0, math.inf],
               [0.7]),
    grads_case("f64_first", 14, [((3,), F64, 1.0), ((4,), F32, 1.5)], [2.0, math.inf], [0.3]),
    grads_case("f16_bf16", 15, [((5,), F16, 1.0), ((4,), BF16, 2.0)], [2.0, 1.0], [0.4]),
    grads_case("f16_f32", 16, [((5,), F16, 1.0), ((3,), F32, 1.0)], [2.0], [0.4]),
    grads_case("bf16_f64", 17, [((5,), BF16, 1.0), ((3,), F64, 1.0)], [2.0], [0.4]),
]
out["clip"] = clip

# A total norm given by the caller (not the gradients' own), f32 and f64.
torch.manual_seed(18)
g1, g2 = torch.randn(3), torch.randn(2, 2, dtype=torch.float64)
given = []
for total in [torch.tensor(4.0), torch.tensor(0.25), torch.tensor(3.0, dtype=torch.float64), torch.tensor(math.inf)]:
    p1, p2 = nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    p1.grad, p2.grad = g1.clone(), g2.clone()
    nn.utils.clip_grads_with_norm_([p1, p2], 1.5, total)
    given.append({"total": summary(total), "grads": [summary(p1.grad), summary(p2.grad)]})
out["clip_given_total"] = {"grads": [summary(g1), summary(g2)], "max_norm": 1.5, "cases": given}
out["total_norm_empty"] = summary(nn.utils.get_total_norm([]))

# Non-finite totals: the error with error_if_nonfinite, the value without.
nonfinite = []
for name, grads, nt in [
    ("nan", [torch.tensor([1.0, float("nan")]), torch.tensor([2.0])], 2.0),
    ("inf_grad", [torch.tensor([1.0]), torch.tensor([math.inf, 2.0])], 1.0),
    ("overflow", [torch.tensor([1e30, 1e30])], 2.0),
    ("overflow_norm3", [torch.tensor([1e20, 3.0])], 3.0),
    ("nan_inf_norm", [torch.tensor([float("nan"), 1.0])], math.inf),
]:
    nonfinite.append({
        "name": name, "norm_type": num(nt), "grads": [summary(g) for g in grads],
        "total": summary(nn.utils.get_total_norm(grads, nt)),
        "error": error_of(lambda: nn.utils.get_total_norm(grads, nt, error_if_nonfinite=True)),
    })
out["total_norm_nonfinite"] = nonfinite
# Large but finite: no error.
big = [torch.tensor([1e19, 1e19])]
out["total_norm_finite_large"] = {"grads": [summary(g) for g in big],
                                  "total": summary(nn.utils.get_total_norm(big, 2.0, error_if_nonfinite=True))}

# ------------------------------------------------------ sizes and attributes
e = nn.Embedding(10, 3)
e2 = nn.Embedding(7, 4, padding_idx=-2)
e3 = nn.Embedding.from_pretrained(torch.zeros(4, 5))
lin = [nn.Linear(5, 3), nn.Linear(2, 7, bias=False)]
ln = [nn.LayerNorm(4), nn.LayerNorm((2, 3), eps=1e-3), nn.LayerNorm(5, eps=0.25, elementwise_affine=False)]
out["sizes"] = {
    "embedding": [[m.num_embeddings, m.embedding_dim] for m in (e, e2, e3)],
    "linear": [[m.in_features, m.out_features] for m in lin],
    "layer_norm_eps": [m.eps for m in ln],
}

# ------------------------------------------------------- flat weights names
rnns = [
    ("lstm", nn.LSTM(3, 4)),
    ("lstm_2_bi", nn.LSTM(3, 4, num_layers=2, bidirectional=True)),
    ("lstm_3_nobias", nn.LSTM(3, 4, num_layers=3, bias=False)),
    ("gru", nn.GRU(2, 5)),
    ("gru_2_bi_nobias", nn.GRU(2, 5, num_layers=2, bidirectional=True, bias=False)),
]
out["flat_weights_names"] = [
    {"name": n, "names": list(m._flat_weights_names), "named_parameters": [k for k, _ in m.named_parameters()]}
    for n, m in rnns
]

# ----------------------------------------------------- max pool with indices
pools = []


def pool_case(name, m, x):
    y, i = m(x)
    pools.append({"name": name, "input": summary(x), "output": summary(y), "indices": summary(i)})


torch.manual_seed(20)
# Small integers: many ties (the first maximum wins).
x1 = torch.randint(0, 4, (2, 3, 11)).float()
pool_case("pool1d_k3", nn.MaxPool1d(3, return_indices=True), x1)
pool_case("pool1d_k3_s2_p1_d2_ceil", nn.MaxPool1d(3, stride=2, padding=1, dilation=2, ceil_mode=True,
                                                  return_indices=True), x1)
x2 = torch.randint(0, 5, (2, 2, 6, 7)).float()
pool_case("pool2d_k2", nn.MaxPool2d(2, return_indices=True), x2)
pool_case("pool2d_k23_s12_p1_ceil", nn.MaxPool2d((2, 3), stride=(1, 2), padding=1, ceil_mode=True,
                                                 return_indices=True), x2)
pool_case("pool2d_k3_s2_p1_d2", nn.MaxPool2d(3, stride=2, padding=1, dilation=2, return_indices=True), x2)
x3 = torch.randn(3, 5, 5, dtype=torch.float64)
pool_case("pool2d_unbatched_f64", nn.MaxPool2d(2, stride=1, return_indices=True), x3)
x4 = torch.randn(1, 2, 5, 7)
pool_case("adaptive_pool2d_2x3", nn.AdaptiveMaxPool2d((2, 3), return_indices=True), x4)
pool_case("adaptive_pool2d_4", nn.AdaptiveMaxPool2d(4, return_indices=True), x4)
out["max_pool"] = pools

# ---------------------------------------------------------------------- gelu
torch.manual_seed(21)
specials = [0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 10.0, -10.0, 20.0, -20.0, 1e-3, -1e-3, math.inf, -math.inf]
gelu = []
for dtype in [torch.float32, torch.float64]:
    x = torch.cat([torch.randn(40, dtype=dtype) * 3, torch.tensor(specials, dtype=dtype)])
    for approx in ["none", "tanh"]:
        gelu.append({"dtype": str(dtype).replace("torch.", ""), "approximate": approx, "input": summary(x),
                     "output": summary(F.gelu(x, approximate=approx))})
out["gelu"] = gelu

# ------------------------------------------------------- log_softmax(dtype)
torch.manual_seed(22)
ls = []
for in_dtype, dim, dtype in [(torch.float32, 1, torch.float64), (torch.float32, -2, torch.float64),
                             (torch.float64, 0, torch.float32), (torch.float32, -1, torch.float32)]:
    x = (torch.randn(3, 5, dtype=torch.float64) * 4).to(in_dtype)
    ls.append({"dim": dim, "dtype": str(dtype).replace("torch.", ""), "input": summary(x),
               "output": summary(F.log_softmax(x, dim, dtype=dtype))})
out["log_softmax_dtype"] = ls

# ------------------------------------------------------------------ one_hot
idx = torch.tensor([[0, 2, 1], [3, 0, 2]])
empty = torch.zeros(0, dtype=torch.int64)
out["one_hot"] = {
    "input": summary(idx),
    "cases": [{"num_classes": n, "output": summary(F.one_hot(idx, n))} for n in [5, 4, -1]],
    "empty": {"num_classes": 3, "output": summary(F.one_hot(empty, 3))},
    "errors": [
        {"input": summary(idx), "num_classes": 3, "error": error_of(lambda: F.one_hot(idx, 3))},
        {"input": summary(idx), "num_classes": -2, "error": error_of(lambda: F.one_hot(idx, -2))},
        {"input": summary(torch.tensor([1, -1])), "num_classes": 4,
         "error": error_of(lambda: F.one_hot(torch.tensor([1, -1]), 4))},
        {"input": summary(empty), "num_classes": -1, "error": error_of(lambda: F.one_hot(empty, -1))},
        {"input": summary(empty), "num_classes": 0, "error": error_of(lambda: F.one_hot(empty, 0))},
    ],
    "float_error": error_of(lambda: F.one_hot(torch.tensor([1.0, 2.0]), 3)),
}

# ------------------------------------------------------ param.data = tensor
p = nn.Parameter(torch.ones(2, 3))
alias = p
x = torch.arange(6.0).reshape(3, 2).requires_grad_()
y = x * 2 + 1  # not a leaf
p.data = y
set_data = {"values": summary(alias), "requires_grad": alias.requires_grad, "is_leaf": alias.is_leaf,
            "dtype": str(alias.dtype).replace("torch.", "")}
with torch.no_grad():
    y.add_(10)  # p shares y's storage
set_data["after_source_add"] = summary(alias)
frozen = nn.Parameter(torch.ones(2), requires_grad=False)
frozen.data = torch.tensor([3.0, 4.0], dtype=torch.float64)
set_data["frozen"] = {"values": summary(frozen), "requires_grad": frozen.requires_grad,
                      "dtype": str(frozen.dtype).replace("torch.", "")}


def set_int():
    q = nn.Parameter(torch.ones(2))
    q.data = torch.tensor([1, 2])


set_data["int_error"] = error_of(set_int)
out["set_data"] = set_data

# -------------------------------------------------------- module.training
torch.manual_seed(23)
seq = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Sequential(nn.Dropout(0.5)))
steps = []
seq.training = False
steps.append([m.training for _, m in seq.named_modules()])
seq[1].training = False
steps.append([m.training for _, m in seq.named_modules()])
seq.train()
steps.append([m.training for _, m in seq.named_modules()])
seq[2].training = False
steps.append([m.training for _, m in seq.named_modules()])
out["training_flags"] = {"modules": [k for k, _ in seq.named_modules()], "steps": steps}


# ------------------------------------------------------------- hooked call
class PosNeg(nn.Module):
    def forward(self, x):
        return x.relu(), x.neg().relu()


def hooked_call():
    m = PosNeg()
    torch.manual_seed(24)
    x0 = torch.randn(2, 3)
    r0, r1 = torch.randn(2, 3), torch.randn(2, 3)
    seen = {}

    def pre(mod, args):
        return (args[0] * 2,)

    def post(mod, args, o):
        seen["post_args"] = summary(args[0])
        return (o[1], o[0] + args[0])

    def bw(mod, gin, gout):
        seen.setdefault("grad_input", []).append([summary(g) for g in gin])
        seen.setdefault("grad_output", []).append([summary(g) for g in gout])
        return (gin[0] * 3,)

    hp = m.register_forward_pre_hook(pre)
    m.register_forward_hook(post)
    m.register_full_backward_hook(bw)
    x = x0.clone().requires_grad_()
    a, b = m(x)
    ((a * r0).sum() + (b * r1).sum()).backward()
    case = {"x": summary(x0), "r": [summary(r0), summary(r1)], "outputs": [summary(a), summary(b)],
            "x_grad": summary(x.grad), "post_args": seen["post_args"], "grad_input": seen["grad_input"][0],
            "grad_output": seen["grad_output"][0]}
    # The pre-hook removed: the forward hook and backward hook stay.
    hp.remove()
    seen.clear()
    x = x0.clone().requires_grad_()
    a, b = m(x)
    ((a * r0).sum() + (b * r1).sum()).backward()
    case["removed_pre"] = {"outputs": [summary(a), summary(b)], "x_grad": summary(x.grad),
                           "grad_input": seen["grad_input"][0], "grad_output": seen["grad_output"][0]}
    # forward() skips every hook.
    a, b = m.forward(x0)
    case["forward"] = [summary(a), summary(b)]
    return case


out["hooked_call"] = hooked_call()

# ------------------------------------------------- forward vs __call__ hooks
fw = []


def double_first(o):
    return (o[0] * 2,) + tuple(o[1:]) if isinstance(o, tuple) else o * 2


def fw_case(name, seed, build, shapes, call):
    torch.manual_seed(seed)
    m = build()
    m.eval()
    torch.manual_seed(seed + 100)
    ins = [torch.randn(s) for s in shapes]
    plain = call(m.forward, *ins)
    m.register_forward_hook(lambda mod, args, o: double_first(o))
    hooked = call(m, *ins)
    again = call(m.forward, *ins)

    def flat(o):
        if isinstance(o, tuple):
            return [t for x in o for t in flat(x)]
        return [summary(o)]

    assert flat(plain) == flat(again)
    fw.append({"name": name, "seed": seed, "inputs": [summary(t) for t in ins], "forward": flat(plain),
               "call": flat(hooked)})


causal = nn.Transformer.generate_square_subsequent_mask
fw_case("lstm", 30, lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True), [(5, 2, 3), (4, 2, 4), (4, 2, 4)],
        lambda f, x, h, c: f(x, (h, c)))
fw_case("gru", 31, lambda: nn.GRU(3, 4, num_layers=2, batch_first=True), [(2, 5, 3), (2, 2, 4)],
        lambda f, x, h: f(x, h))
fw_case("mha", 32, lambda: nn.MultiheadAttention(8, 2), [(3, 2, 8), (4, 2, 8), (4, 2, 8)],
        lambda f, q, k, v: f(q, k, v, attn_mask=torch.tensor([[False, True, False, False]] * 3),
                             average_attn_weights=False))
fw_case("encoder_layer", 33, lambda: nn.TransformerEncoderLayer(16, 4, dim_feedforward=32), [(5, 2, 16)],
        lambda f, x: f(x, src_mask=causal(5), is_causal=True))
fw_case("decoder_layer", 34, lambda: nn.TransformerDecoderLayer(16, 4, dim_feedforward=32), [(4, 2, 16), (5, 2, 16)],
        lambda f, t, mem: f(t, mem, tgt_mask=causal(4)))
fw_case("encoder", 35, lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, dim_feedforward=32), 2,
                                                     norm=nn.LayerNorm(16), enable_nested_tensor=False),
        [(5, 2, 16)], lambda f, x: f(x, mask=causal(5)))
fw_case("decoder", 36, lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, dim_feedforward=32), 2),
        [(4, 2, 16), (5, 2, 16)], lambda f, t, mem: f(t, mem, tgt_mask=causal(4)))
fw_case("transformer", 37, lambda: nn.Transformer(16, 4, num_encoder_layers=1, num_decoder_layers=1,
                                                  dim_feedforward=32),
        [(5, 2, 16), (4, 2, 16)], lambda f, s, t: f(s, t, tgt_mask=causal(4)))
out["forward_vs_call"] = fw

# ------------------------------------------------- Sequential(OrderedDict)
torch.manual_seed(40)
seq = nn.Sequential(OrderedDict([("fc1", nn.Linear(3, 4)), ("act", nn.ReLU())]))
seq.append(nn.Linear(4, 5))  # named "2"
seq.add_module("out", nn.Linear(5, 2))
seq.append(nn.Tanh())  # named "4"
torch.manual_seed(41)
x = torch.randn(6, 3)
out["sequential_named"] = {
    "seed": 40,
    "repr": repr(seq),
    "named_parameters": [k for k, _ in seq.named_parameters()],
    "state_dict": [[k, summary(v)] for k, v in seq.state_dict().items()],
    "named_modules": [k for k, _ in seq.named_modules()],
    "input": summary(x),
    "output": summary(seq(x)),
}
torch.manual_seed(42)
boxed = nn.Sequential()
boxed.append(nn.Linear(2, 3))
boxed.append(nn.ReLU())
boxed.append(nn.Linear(3, 1))
torch.manual_seed(43)
x = torch.randn(4, 2)
out["sequential_boxed"] = {
    "seed": 42,
    "repr": repr(boxed),
    "state_dict": [[k, summary(v)] for k, v in boxed.state_dict().items()],
    "input": summary(x),
    "output": summary(boxed(x)),
}
# Adding a module under a name already taken replaces it in place.
torch.manual_seed(44)
dup = nn.Sequential(OrderedDict([("a", nn.Linear(2, 3)), ("b", nn.ReLU())]))
dup.add_module("a", nn.Linear(2, 2))
# `append` names the layer str(len(self)): here "1", taken, so replaced.
dup2 = nn.Sequential(OrderedDict([("1", nn.Linear(2, 2))]))
dup2.append(nn.Linear(2, 3))
out["sequential_duplicate"] = {
    "seed": 44,
    "repr": repr(dup),
    "state_dict": [[k, summary(v)] for k, v in dup.state_dict().items()],
    "appended": {"repr": repr(dup2), "state_dict": [[k, summary(v)] for k, v in dup2.state_dict().items()]},
}

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    json.dump(out, f, indent=None, separators=(",", ":"))
print(f"wrote {OUT}")
