"""Writes tests/nn_data/group_a.json: what PyTorch gives for the pieces of
`torch.nn` that `tests/nn_group_a.rs` checks: every `torch.nn.functional`
wrapper with non-default keyword arguments (stride / padding / dilation /
groups, ceil_mode, count_include_pad, divisor_override, return_indices,
reductions, class weights, ignore_index, label_smoothing, pos_weight,
log_target, batchmean), `F.dropout`'s mask, its identity cases (which draw
nothing from the generator) and its errors, `F.group_norm`'s "more than 1
value per channel" check, the 1-d input error of `F.adaptive_avg_pool2d`
with a single size, the `nn.init` fillers (`uniform_`, `normal_`,
`zeros_`, kaiming / xavier with other modes and nonlinearities,
`trunc_normal_` on both sides of its 30%-of-the-mass switch, `orthogonal_`
of a square matrix, of empty tensors and its 1-d error), Python's repr of
floats in `LeakyReLU(negative_slope=...)`, a nested `Sequential`'s repr,
and `OrderedDict` / `load_state_dict` key handling and messages.

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_nn_group_a.py
"""

import json
import math
import os
import struct
import warnings
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
# kl_div's reduction='mean' warns that it is not the mathematical KL divergence.
warnings.filterwarnings("ignore", message="reduction: 'mean' divides")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_data", "group_a.json")


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
    """The message of the exception `f` raises: its first line, and all of it."""
    try:
        f()
    except Exception as e:  # noqa: BLE001 - any PyTorch error is the reference
        return {"type": type(e).__name__, "message": str(e).splitlines()[0], "full": str(e)}
    raise AssertionError("expected an error")


out = {"torch": torch.__version__}

# ------------------------------------------------------------ functional
torch.manual_seed(0)


def rn(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


cases = []


def case(name, inputs, fn):
    res = fn(*inputs)
    outs = list(res) if isinstance(res, tuple) else [res]
    cases.append({"name": name, "inputs": [summary(t) for t in inputs], "outputs": [summary(o) for o in outs]})


x2 = rn(3, 4)
w = rn(5, 4)
b = rn(5)
case("linear", [x2, w, b], lambda x, w, b: F.linear(x, w, b))
case("linear_nobias", [rn(2, 3, 4), w], lambda x, w: F.linear(x, w))
case("bilinear", [rn(3, 2), rn(3, 4), rn(5, 2, 4), rn(5)], lambda a, c, w, b: F.bilinear(a, c, w, b))
case("bilinear_nobias", [rn(3, 2), rn(3, 4), rn(5, 2, 4)], lambda a, c, w: F.bilinear(a, c, w))
act = rn(4, 5) * 3
case("relu", [act], F.relu)
case("leaky_relu", [act], lambda x: F.leaky_relu(x, 0.2))
case("gelu", [act], F.gelu)
case("gelu_tanh", [act], lambda x: F.gelu(x, approximate="tanh"))
case("gelu_none", [act], lambda x: F.gelu(x, approximate="none"))
case("silu", [act], F.silu)
case("softmax", [act], lambda x: F.softmax(x, 0))
case("log_softmax", [act], lambda x: F.log_softmax(x, -1))
case("softmax_dtype", [act], lambda x: F.softmax(x, 1, dtype=torch.float64))
case("log_softmax_dtype", [act], lambda x: F.log_softmax(x, 0, dtype=torch.float64))
case("elu", [act], lambda x: F.elu(x, 0.7))
case("celu", [act], lambda x: F.celu(x, 1.3))
case("selu", [act], F.selu)
case("hardtanh", [act], lambda x: F.hardtanh(x, -0.5, 2.0))
case("relu6", [act * 3], F.relu6)
case("mish", [act], F.mish)
case("hardswish", [act], F.hardswish)
case("hardsigmoid", [act], F.hardsigmoid)
case("logsigmoid", [act], F.logsigmoid)
case("softplus", [act], lambda x: F.softplus(x, 2.0, 3.0))
case("softshrink", [act], lambda x: F.softshrink(x, 0.8))
case("hardshrink", [act], lambda x: F.hardshrink(x, 0.8))

x1d = rn(2, 4, 11)
case("conv1d", [x1d, rn(6, 2, 3), rn(6)],
     lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2))
x2d = rn(2, 3, 9, 8)
case("conv2d", [x2d, rn(4, 3, 3, 2), rn(4)],
     lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2)))
case("conv2d_nobias", [x2d, rn(2, 3, 2, 2)], lambda x, w: F.conv2d(x, w))
case("conv_transpose1d", [rn(2, 4, 5), rn(4, 3, 3), rn(3)],
     lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1, dilation=1))
case("conv_transpose2d", [rn(1, 4, 4, 3), rn(4, 1, 3, 2), rn(2)],
     lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2))
case("max_pool1d", [x1d], lambda x: F.max_pool1d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True))
case("max_pool2d", [x2d], lambda x: F.max_pool2d(x, (3, 2), stride=(2, 3), padding=1, ceil_mode=True))
case("max_pool2d_with_indices", [x2d],
     lambda x: F.max_pool2d(x, 2, stride=1, dilation=(2, 1), return_indices=True))
case("avg_pool1d", [x1d], lambda x: F.avg_pool1d(x, 4, stride=3, padding=2, ceil_mode=True, count_include_pad=False))
case("avg_pool2d", [x2d], lambda x: F.avg_pool2d(x, (3, 2), stride=2, padding=1, count_include_pad=False))
case("avg_pool2d_divisor", [x2d], lambda x: F.avg_pool2d(x, 3, stride=(2, 3), padding=1, ceil_mode=True,
                                                          divisor_override=5))
case("adaptive_avg_pool1d", [x1d], lambda x: F.adaptive_avg_pool1d(x, 4))
case("adaptive_avg_pool2d", [x2d], lambda x: F.adaptive_avg_pool2d(x, (4, 3)))
case("adaptive_max_pool1d", [x1d], lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True))
case("adaptive_max_pool2d", [x2d], lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True))
idx = torch.tensor([[0, 3], [2, 1]])
case("one_hot", [idx], F.one_hot)
case("one_hot_with", [idx], lambda i: F.one_hot(i, 6))

xn = rn(3, 4, 5)
case("layer_norm", [xn, rn(4, 5), rn(4, 5)], lambda x, w, b: F.layer_norm(x, (4, 5), w, b, eps=0.5))
case("layer_norm_plain", [xn], lambda x: F.layer_norm(x, (5,)))
case("rms_norm", [xn, rn(5)], lambda x, w: F.rms_norm(x, (5,), w, eps=0.25))
case("rms_norm_default_eps", [xn], lambda x: F.rms_norm(x, (4, 5)))
case("group_norm", [rn(2, 6, 3), rn(6), rn(6)], lambda x, w, b: F.group_norm(x, 3, w, b, eps=0.1))
# N*C/G = 3 rows of 3 values: valid (3 * 3 != 1).
case("group_norm_3x3", [rn(3, 2, 3)], lambda x: F.group_norm(x, 2))
rm, rv = rn(3), rn(3).abs() + 0.5
bn_in = [rn(4, 3, 2), rm.clone(), rv.clone(), rn(3), rn(3)]


def bn_train(x, m, v, w, b):
    m, v = m.clone(), v.clone()
    y = F.batch_norm(x, m, v, w, b, training=True, momentum=0.3, eps=0.01)
    return y, m, v


case("batch_norm_train", bn_in, bn_train)
case("batch_norm_eval", bn_in, lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, eps=0.2))
ew = rn(6, 3) * 2
ids = torch.tensor([[1, 4], [4, 0]])


def emb(i, wt):
    wt = wt.clone()
    y = F.embedding(i, wt, padding_idx=0, max_norm=1.5, norm_type=1.0)
    return y, wt


case("embedding_max_norm", [ids, ew], emb)
case("embedding", [ids, ew], lambda i, wt: F.embedding(i, wt))

logits = rn(5, 4)
tgt = torch.tensor([1, 0, 3, 3, 2])
cw = rn(4).abs() + 0.3
case("cross_entropy", [logits, tgt], F.cross_entropy)
case("cross_entropy_opts", [logits, tgt, cw],
     lambda x, t, wt: F.cross_entropy(x, t, weight=wt, ignore_index=3, reduction="sum", label_smoothing=0.2))
case("cross_entropy_none", [logits, tgt], lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.1))
lp = F.log_softmax(logits, 1)
case("nll_loss", [lp, tgt], F.nll_loss)
case("nll_loss_opts", [lp, tgt, cw], lambda x, t, wt: F.nll_loss(x, t, weight=wt, ignore_index=0, reduction="mean"))
case("nll_loss_none", [lp, tgt], lambda x, t: F.nll_loss(x, t, reduction="none"))
ra, rb = rn(3, 4), rn(3, 4)
case("mse_loss", [ra, rb], lambda a, c: F.mse_loss(a, c, reduction="sum"))
case("l1_loss", [ra, rb], lambda a, c: F.l1_loss(a, c, reduction="none"))
case("smooth_l1_loss", [ra, rb], lambda a, c: F.smooth_l1_loss(a, c, reduction="none", beta=0.7))
case("huber_loss", [ra, rb], lambda a, c: F.huber_loss(a, c, reduction="sum", delta=0.6))
prob = torch.sigmoid(rn(3, 4))
case("binary_cross_entropy", [prob, torch.rand(3, 4), rn(3, 4).abs()],
     lambda p, t, wt: F.binary_cross_entropy(p, t, weight=wt, reduction="sum"))
case("bce_with_logits", [ra, torch.rand(3, 4), rn(4).abs(), rn(3, 1).abs()],
     lambda x, t, pw, wt: F.binary_cross_entropy_with_logits(x, t, weight=wt, pos_weight=pw, reduction="none"))
lq = F.log_softmax(rn(3, 4), 1)
lt = F.log_softmax(rn(3, 4), 1)
for red in ["none", "batchmean", "sum", "mean"]:
    case(f"kl_div_{red}", [lq, lt.exp()], lambda a, t, red=red: F.kl_div(a, t, reduction=red))
case("kl_div_batchmean_log_target", [lq, lt], lambda a, t: F.kl_div(a, t, reduction="batchmean", log_target=True))
# A 0-d input: batchmean is the sum (nothing to divide by).
case("kl_div_batchmean_0d", [torch.tensor(-0.7), torch.tensor(0.4)],
     lambda a, t: F.kl_div(a, t, reduction="batchmean"))
out["functional"] = cases

out["kl_div_reduction_error"] = error_of(lambda: F.kl_div(lq, lt, reduction="batch"))
out["gelu_approximate"] = [nn.GELU(approximate=a).approximate for a in ["none", "tanh"]]

# group_norm: one value per group and instance is an error.
gn_in = rn(1, 2)
out["group_norm_one_value"] = {"input": summary(gn_in), "error": error_of(lambda: F.group_norm(gn_in, 2))}
out["group_norm_one_value_3d"] = error_of(lambda: F.group_norm(rn(1, 3, 1), 3))
# No groups, and an input of one dim: errors too (Python's own here).
out["group_norm_zero_groups"] = error_of(lambda: F.group_norm(rn(2, 4), 0))
out["group_norm_1d"] = error_of(lambda: F.group_norm(rn(4), 2))
# A single output size on a 1-d input: the operator's error, not the
# "Input dimension" check of a pair.
out["adaptive_avg_pool2d_1d"] = error_of(lambda: F.adaptive_avg_pool2d(rn(5), 1))
out["adaptive_max_pool2d_1d"] = error_of(lambda: F.adaptive_max_pool2d(rn(5), 1))

# ---------------------------------------------------------------- dropout
dx = rn(4, 6) + 2
torch.manual_seed(5)
d = {"x": summary(dx), "seed": 5}
d["p03"] = summary(F.dropout(dx, 0.3, training=True))
d["p03_next"] = summary(torch.rand(3))
torch.manual_seed(5)
d["p1"] = summary(F.dropout(dx, 1.0, training=True))
d["p1_next"] = summary(torch.rand(3))
torch.manual_seed(5)
d["p0"] = summary(F.dropout(dx, 0.0, training=True))
assert F.dropout(dx, 0.0, training=True) is dx
d["p0_next"] = summary(torch.rand(3))
torch.manual_seed(5)
d["eval"] = summary(F.dropout(dx, 0.4, training=False))
assert F.dropout(dx, 0.4, training=False) is dx
d["eval_next"] = summary(torch.rand(3))
torch.manual_seed(5)
d["empty"] = summary(F.dropout(torch.ones(0, 3), 0.4, training=True))
d["empty_next"] = summary(torch.rand(3))
d["errors"] = [{"p": p, "error": error_of(lambda p=p: F.dropout(dx, p))} for p in [-0.1, 1.5]]
out["dropout"] = d

# ------------------------------------------------------------------- init


def init_case(name, seed, shape, fn, dtype=torch.float32):
    torch.manual_seed(seed)
    t = torch.empty(shape, dtype=dtype)
    fn(t)
    return {"name": name, "seed": seed, "shape": list(shape), "output": summary(t),
            "next": summary(torch.rand(2))}


inits = [
    init_case("uniform", 40, (3, 4), lambda t: nn.init.uniform_(t, -0.5, 2.0)),
    init_case("normal", 41, (3, 4), lambda t: nn.init.normal_(t, 1.5, 0.25)),
    init_case("zeros", 42, (2, 3), nn.init.zeros_),
    init_case("xavier_uniform_gain", 43, (4, 3, 2), lambda t: nn.init.xavier_uniform_(t, gain=0.5)),
    init_case("xavier_normal_4d", 44, (5, 2, 3, 2), lambda t: nn.init.xavier_normal_(t, gain=2.0)),
    init_case("kaiming_uniform_fan_out_tanh", 45, (6, 4, 3),
              lambda t: nn.init.kaiming_uniform_(t, mode="fan_out", nonlinearity="tanh")),
    init_case("kaiming_normal_fan_in_selu", 46, (7, 5, 2),
              lambda t: nn.init.kaiming_normal_(t, mode="fan_in", nonlinearity="selu")),
    init_case("kaiming_normal_leaky_default", 47, (4, 9),
              lambda t: nn.init.kaiming_normal_(t, a=0.0, nonlinearity="leaky_relu")),
    init_case("orthogonal_square", 48, (5, 5), lambda t: nn.init.orthogonal_(t, gain=0.5)),
    init_case("orthogonal_empty_rows", 49, (0, 3), nn.init.orthogonal_),
    init_case("orthogonal_empty_cols", 50, (3, 0), nn.init.orthogonal_),
]
out["orthogonal_1d_error"] = error_of(lambda: nn.init.orthogonal_(torch.empty(4)))


# trunc_normal_: where the mass inside [a, b] is near the 30% switch
# between its two samplers, so that any change to how the mass is
# computed picks the other sampler; and a far tail with a mean and std
# that are not 0 and 1.
def trunc_p(mean, std, a, b):
    cdf = lambda x: (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0  # noqa: E731
    return cdf((b - mean) / std) - cdf((a - mean) / std)


TRUNC = [
    (0.0, 1.7, -0.6, 0.6),
    (-0.7, 0.5, -2.0, -0.6),
    (-0.7, 0.5, -0.6, -0.3),
    (0.5, 1.5, 3.0, 5.0),
    # The mass exactly 0.3 (math.erf here, libm's erf there agree): the
    # uniform sampler, as the switch is `p > 0.3`.
    (0.0, 1.0, -9.0, -0.5244005127080409),
]
for i, (mean, std, a, bb) in enumerate(TRUNC):
    c = init_case(f"trunc_normal_{i}", 60 + i, (8, 9), lambda t: nn.init.trunc_normal_(t, mean, std, a, bb))
    # The arguments' bits too: the mass is compared with 0.3 exactly.
    bits = [struct.unpack("<Q", struct.pack("<d", v))[0] for v in (mean, std, a, bb)]
    c.update({"mean": mean, "std": std, "a": a, "b": bb, "bits": [str(v) for v in bits],
              "mass": trunc_p(mean, std, a, bb)})
    inits.append(c)
out["init"] = inits

# ------------------------------------------------------------------ reprs
floats = [0.01, 0.1, 1.0, 2.5, 0.0, -0.0, 100.0, 1e-05, 0.0001, 9.99e-05, -3e-05, 1.5e-07, 1e+20, 1e16,
          1e15, 123456789.0, 2.0 ** 60, math.inf, -math.inf, math.nan]
out["leaky_relu_reprs"] = [{"slope": num(v), "repr": repr(nn.LeakyReLU(v))} for v in floats]
torch.manual_seed(0)
nested = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.LeakyReLU(1e-05), nn.LayerNorm(3)),
                       nn.Linear(3, 1, bias=False))
out["nested_repr"] = repr(nested)

# An Embedding made in float64 (the weight drawn in that dtype).
torch.manual_seed(70)
out["embedding_f64_weight"] = summary(nn.Embedding(4, 3, dtype=torch.float64).weight)
# `param.data = t` with a tensor that cannot require grad.


def set_int_data():
    nn.Parameter(torch.zeros(2)).data = torch.zeros(2, dtype=torch.long)


out["set_data_int_error"] = error_of(set_int_data)

# ------------------------------------------------------------- state dicts
# OrderedDict semantics of a state dict: re-inserting keeps the position,
# removing shifts the later keys.
od = OrderedDict((k, torch.full((1,), float(i))) for i, k in enumerate(["a", "b", "c", "d", "e"]))
od["b"] = torch.full((1,), 10.0)
del od["b"]
od["f"] = torch.full((1,), 5.0)
del od["a"]
out["ordered_dict"] = {"keys": list(od.keys()), "values": [float(v.item()) for v in od.values()]}
pre = OrderedDict([("module.0.weight", torch.zeros(1)), ("head.bias", torch.zeros(1)),
                   ("module.module.x", torch.zeros(1))])
nn.modules.utils.consume_prefix_in_state_dict_if_present(pre, "module.")
out["strip_prefix"] = list(pre.keys())
# Collisions: a stripped name already present keeps its place (its value
# replaced); a stripped key that is itself prefixed is popped at its turn.
strip_cases = []
for keys, prefix in [(["module.a", "a", "b"], "module."), (["aab", "ab", "c"], "a"),
                     (["ab", "aab", "x"], "a"), (["p.q", "r"], "")]:
    d = OrderedDict((k, torch.tensor(float(i))) for i, k in enumerate(keys))
    nn.modules.utils.consume_prefix_in_state_dict_if_present(d, prefix)
    strip_cases.append({"keys": keys, "prefix": prefix,
                        "out": [[k, float(v)] for k, v in d.items()]})
out["strip_prefix_cases"] = strip_cases

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2))
sd = net.state_dict()
missing = OrderedDict((k, v) for k, v in sd.items() if k not in ("0.bias", "2.weight"))
missing["x.y"] = torch.zeros(1)
missing["z"] = torch.zeros(2)
loads = {}
loads["strict_error"] = error_of(lambda: net.load_state_dict(missing, strict=True))
r = net.load_state_dict(missing, strict=False)
loads["non_strict"] = {"missing": list(r.missing_keys), "unexpected": list(r.unexpected_keys)}
only_missing = OrderedDict((k, v) for k, v in sd.items() if k != "2.bias")
loads["only_missing"] = error_of(lambda: net.load_state_dict(only_missing))
only_unexpected = OrderedDict(sd)
only_unexpected["extra"] = torch.zeros(1)
loads["only_unexpected"] = error_of(lambda: net.load_state_dict(only_unexpected))
bad = OrderedDict(sd)
bad["0.bias"] = torch.zeros(4)
bad["2.weight"] = torch.zeros(3, 2)
bad["extra"] = torch.zeros(1)
loads["size_mismatch_non_strict"] = error_of(lambda: net.load_state_dict(bad, strict=False))
out["load_state_dict"] = loads

with open(OUT, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print("wrote", OUT)
