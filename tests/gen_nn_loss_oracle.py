"""Writes tests/oracle_extra/nn_loss.json: PyTorch reference values
(forward outputs, gradients, second derivatives, running statistics,
errors) for the normalisations, embedding, activations and losses of
torch.nn.functional: float64 and odd shapes, ignore_index combinations,
class weights, probability targets with smoothing, K-dim inputs, batch
norm in evaluation and with momentum None (as BatchNorm computes it),
embedding padding_idx / scale_grad_by_freq / max_norm, error cases.

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_nn_loss_oracle.py
"""

import os
import warnings

from oracle_common import *  # noqa: F401,F403

warnings.filterwarnings("ignore")
torch.set_num_threads(1)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle_extra", "nn_loss.json")

T = torch.tensor
f64 = torch.float64
f16 = torch.float16
bf16 = torch.bfloat16
i32 = torch.int32
u8 = torch.uint8
F = "torch.nn.functional."


def dd_case(name, op, inputs, grad_inputs, note=None, **kwargs):
    """Kind "double_backward" (tests/oracle/README.md): first derivatives
    of sum(out * W), then d/dx_j of sum_i sum(grads_i * U_i)."""
    ins = {k: v.detach().clone().requires_grad_(k in grad_inputs) for k, v in inputs.items()}
    out = resolve(op)(**ins, **kwargs)
    gen = torch.Generator().manual_seed(1000 + len(CASES))
    w = torch.randn(out.shape, generator=gen, dtype=f64).to(out.dtype)
    diff = [v for k, v in ins.items() if k in grad_inputs]
    gs = torch.autograd.grad((out * w).sum(), diff, create_graph=True, allow_unused=True)
    us = [torch.randn(v.shape, generator=gen, dtype=f64).to(v.dtype) for v in diff]
    s = sum((gi * u).sum() for gi, u in zip(gs, us) if gi is not None)
    if s.requires_grad:
        ggs = torch.autograd.grad(s, diff, allow_unused=True)
    else:  # first derivatives that do not depend on the inputs
        ggs = [None] * len(diff)
    grads, uu, gg = [], [], []
    it = iter(zip(gs, us, ggs))
    for k, v in ins.items():
        if k in grad_inputs:
            gi, u, ggi = next(it)
            grads.append(enc(gi if gi is not None else torch.zeros_like(v)))
            uu.append(enc(u))
            gg.append(enc(ggi if ggi is not None else torch.zeros_like(v)))
        else:
            grads.append(None)
            uu.append(None)
            gg.append(None)
    add_case(name, op, list(ins.values()), enc(out), kwargs, list(ins.keys()), note, kind="double_backward")
    CASES[-1]["grad_weight"] = enc(w)
    CASES[-1]["grads"] = grads
    CASES[-1]["grad_grad_weights"] = uu
    CASES[-1]["grad_grads"] = gg


def mutated_case(name, op, inputs, grad_inputs, mutated, note=None, **kwargs):
    """A grad_case whose call updates the inputs named in `mutated` in
    place; records their values after one call (on copies)."""
    before = [enc(v) for v in inputs.values()]
    copies = {k: v.detach().clone() for k, v in inputs.items()}
    resolve(op)(**copies, **kwargs)
    grad_case(name, op, inputs, grad_inputs, note, **kwargs)
    # grad_case encodes the inputs after its call: the values before it go in.
    CASES[-1]["inputs"] = before
    CASES[-1]["mutated"] = {k: enc(copies[k]) for k in mutated}


# ------------------------------------------------------------------ layer_norm
LN = F + "layer_norm"
x = g(1, 4, 5, 7)
grad_case("ln_f32_last", LN, {"input": x, "weight": g(2, 7), "bias": g(3, 7)}, ["input", "weight", "bias"],
          normalized_shape=[7])
grad_case("ln_f32_last2", LN, {"input": x, "weight": g(4, 5, 7), "bias": g(5, 5, 7)}, ["input", "weight", "bias"],
          normalized_shape=[5, 7])
grad_case("ln_f32_all_dims", LN, {"input": g(6, 3, 4), "weight": g(7, 3, 4)}, ["input", "weight"],
          normalized_shape=[3, 4])
grad_case("ln_weight_only", LN, {"input": g(8, 6, 9), "weight": g(9, 9)}, ["input", "weight"], normalized_shape=[9])
grad_case("ln_bias_only", LN, {"input": g(10, 6, 9), "bias": g(11, 9)}, ["input", "bias"], normalized_shape=[9])
grad_case("ln_no_affine_odd", LN, {"input": g(12, 3, 1, 33)}, ["input"], normalized_shape=[33])
grad_case("ln_f64", LN, {"input": g(13, 5, 11, dtype=f64), "weight": g(14, 11, dtype=f64), "bias": g(15, 11, dtype=f64)},
          ["input", "weight", "bias"], normalized_shape=[11], eps=1e-3)
# A large mean (in f64: PyTorch's f32 kernel, Welford's update, is 1e-5 off here).
grad_case("ln_offset_mean_f64", LN, {"input": g(16, 4, 64, dtype=f64) + 1e4, "weight": g(17, 64, dtype=f64),
                                     "bias": g(18, 64, dtype=f64)}, ["input", "weight", "bias"], normalized_shape=[64])
grad_case("ln_wide_rows", LN, {"input": g(19, 40, 200), "weight": g(20, 200), "bias": g(21, 200)},
          ["input", "weight", "bias"], normalized_shape=[200])
case("ln_f16", LN, {"input": g(22, 3, 8, dtype=f16), "weight": g(23, 8, dtype=f16), "bias": g(24, 8, dtype=f16)},
     normalized_shape=[8])
case("ln_bf16", LN, {"input": g(25, 3, 8, dtype=bf16)}, normalized_shape=[8])
# One element per row: x - mean is 0 (PyTorch's weight gradient carries
# its rounding noise there, 1e-5), so forward only.
case("ln_one_element_rows", LN, {"input": g(26, 5, 1), "weight": g(27, 1), "bias": g(28, 1)}, normalized_shape=[1])
error_case("err_ln_shape", LN, {"input": g(1, 3, 5)}, normalized_shape=[4])
error_case("err_ln_weight_shape", LN, {"input": g(1, 3, 5), "weight": g(2, 4)}, normalized_shape=[5])
error_case("err_ln_int", LN, {"input": T([[1, 2]])}, normalized_shape=[2])
dd_case("ln_dd_affine", LN, {"input": g(30, 3, 6), "weight": g(31, 6), "bias": g(32, 6)},
        ["input", "weight", "bias"], normalized_shape=[6])
dd_case("ln_dd_no_affine_f64", LN, {"input": g(33, 2, 3, 4, dtype=f64)}, ["input"], normalized_shape=[3, 4])

# ------------------------------------------------------------------ rms_norm
RMS = F + "rms_norm"
grad_case("rms_weight", RMS, {"input": g(40, 3, 2, 6), "weight": g(41, 6)}, ["input", "weight"],
          normalized_shape=[6], eps=1e-6)
grad_case("rms_eps_none", RMS, {"input": g(42, 4, 10)}, ["input"], normalized_shape=[10])
grad_case("rms_two_dims_f64", RMS, {"input": g(43, 3, 4, 5, dtype=f64), "weight": g(44, 4, 5, dtype=f64)},
          ["input", "weight"], normalized_shape=[4, 5])
case("rms_f16", RMS, {"input": g(45, 3, 8, dtype=f16), "weight": g(46, 8, dtype=f16)}, normalized_shape=[8])
error_case("err_rms_shape", RMS, {"input": g(1, 3, 5)}, normalized_shape=[4])
dd_case("rms_dd", RMS, {"input": g(47, 3, 5), "weight": g(48, 5)}, ["input", "weight"], normalized_shape=[5])

# ------------------------------------------------------------------ group_norm
GN = F + "group_norm"
grad_case("gn_4d", GN, {"input": g(50, 2, 6, 3, 3), "weight": g(51, 6), "bias": g(52, 6)},
          ["input", "weight", "bias"], num_groups=3)
grad_case("gn_one_group", GN, {"input": g(53, 3, 4, 5), "weight": g(54, 4), "bias": g(55, 4)},
          ["input", "weight", "bias"], num_groups=1)
grad_case("gn_instance", GN, {"input": g(56, 2, 4, 7), "weight": g(57, 4), "bias": g(58, 4)},
          ["input", "weight", "bias"], num_groups=4)
grad_case("gn_2d_input", GN, {"input": g(59, 5, 6)}, ["input"], num_groups=2)
grad_case("gn_f64_eps", GN, {"input": g(60, 2, 6, 2, 2, dtype=f64), "weight": g(61, 6, dtype=f64),
                             "bias": g(62, 6, dtype=f64)}, ["input", "weight", "bias"], num_groups=2, eps=1e-2)
grad_case("gn_weight_only", GN, {"input": g(63, 2, 4, 3), "weight": g(64, 4)}, ["input", "weight"], num_groups=2)
error_case("err_gn_divisible", GN, {"input": g(1, 2, 6, 3)}, num_groups=4)
error_case("err_gn_weight", GN, {"input": g(1, 2, 6, 3), "weight": g(2, 5)}, num_groups=3)
error_case("err_gn_1d", GN, {"input": g(1, 6)}, num_groups=3)
dd_case("gn_dd", GN, {"input": g(65, 2, 4, 3), "weight": g(66, 4), "bias": g(67, 4)}, ["input", "weight", "bias"],
        num_groups=2)

# ------------------------------------------------------------------ batch_norm
BN = F + "batch_norm"
ALL = ["input", "weight", "bias"]


def bn_inputs(seed, shape, dtype=torch.float32, affine=True, stats=True):
    c = shape[1]
    d = {"input": g(seed, *shape, dtype=dtype)}
    if stats:
        d["running_mean"] = g(seed + 1, c, dtype=dtype) * 0.1
        d["running_var"] = (g(seed + 2, c, dtype=dtype).abs() + 0.5)
    if affine:
        d["weight"] = g(seed + 3, c, dtype=dtype)
        d["bias"] = g(seed + 4, c, dtype=dtype)
    return d


RS = ["running_mean", "running_var"]
mutated_case("bn_train_2d", BN, bn_inputs(70, (6, 3)), ALL, RS, training=True, momentum=0.1, eps=1e-5)
mutated_case("bn_train_3d", BN, bn_inputs(75, (4, 3, 5)), ALL, RS, training=True, momentum=0.2, eps=1e-5)
mutated_case("bn_train_4d_f64", BN, bn_inputs(80, (3, 2, 4, 3), dtype=f64), ALL, RS, training=True, momentum=0.3,
             eps=1e-3)
mutated_case("bn_train_momentum_0", BN, bn_inputs(85, (5, 4)), ALL, RS, training=True, momentum=0.0, eps=1e-5)
mutated_case("bn_train_momentum_1", BN, bn_inputs(90, (5, 4)), ALL, RS, training=True, momentum=1.0, eps=1e-5)
grad_case("bn_train_no_stats", BN, {"input": g(95, 4, 3, 2), "weight": g(96, 3), "bias": g(97, 3)}, ALL,
          training=True, running_mean=None, running_var=None)
grad_case("bn_train_no_affine_no_stats", BN, {"input": g(98, 7, 2)}, ["input"], training=True, running_mean=None,
          running_var=None)
grad_case("bn_eval_2d", BN, bn_inputs(100, (6, 3)), ALL, training=False)
grad_case("bn_eval_4d_no_affine", BN, bn_inputs(105, (2, 3, 2, 2), affine=False), ["input"], training=False)
grad_case("bn_eval_f64", BN, bn_inputs(110, (3, 4, 5), dtype=f64), ALL, training=False, eps=1e-2)
# BatchNorm1d(momentum=None): a cumulative average, momentum 1 / num_batches_tracked.
bn = torch.nn.BatchNorm1d(3, momentum=None)
rm0, rv0 = bn.running_mean.clone(), bn.running_var.clone()
b1, b2 = g(115, 5, 3), g(116, 6, 3)
bn(b1)
rm1, rv1 = bn.running_mean.clone(), bn.running_var.clone()
bn(b2)
mutated_case("bn_momentum_none_step1", BN, {"input": b1, "running_mean": rm0, "running_var": rv0,
                                            "weight": bn.weight.detach(), "bias": bn.bias.detach()},
             ["input"], RS, note="BatchNorm1d(momentum=None), first batch: momentum 1/1", training=True, momentum=1.0)
mutated_case("bn_momentum_none_step2", BN, {"input": b2, "running_mean": rm1, "running_var": rv1,
                                            "weight": bn.weight.detach(), "bias": bn.bias.detach()},
             ["input"], RS, note="BatchNorm1d(momentum=None), second batch: momentum 1/2", training=True,
             momentum=0.5)
error_case("err_bn_one_value", BN, {"input": g(1, 1, 4), "running_mean": torch.zeros(4), "running_var": torch.ones(4)},
           training=True)
error_case("err_bn_stats_shape", BN, {"input": g(1, 3, 4), "running_mean": torch.zeros(3),
                                      "running_var": torch.ones(4)}, training=True)
error_case("err_bn_weight_shape", BN, {"input": g(1, 3, 4), "running_mean": torch.zeros(4),
                                       "running_var": torch.ones(4), "weight": torch.ones(3)}, training=True)
error_case("err_bn_eval_no_stats", BN, {"input": g(1, 3, 4)}, training=False, running_mean=None, running_var=None)
dd_case("bn_dd_train", BN, {"input": g(120, 4, 3), "weight": g(121, 3), "bias": g(122, 3)}, ALL, training=True,
        running_mean=None, running_var=None)
dd_case("bn_dd_eval", BN, bn_inputs(125, (4, 3, 2)), ALL, training=False)

# ------------------------------------------------------------------ embedding
EMB = F + "embedding"
idx = T([[1, 3, 3], [0, 9, 1]])
grad_case("emb_basic", EMB, {"input": idx, "weight": g(130, 10, 4)}, ["weight"])
grad_case("emb_padding", EMB, {"input": idx, "weight": g(131, 10, 4)}, ["weight"], padding_idx=3)
grad_case("emb_padding_negative", EMB, {"input": idx, "weight": g(132, 10, 4)}, ["weight"], padding_idx=-1)
grad_case("emb_scale_freq", EMB, {"input": T([1, 3, 3, 3, 0, 1]), "weight": g(133, 5, 3)}, ["weight"],
          scale_grad_by_freq=True)
grad_case("emb_scale_freq_padding", EMB, {"input": T([[1, 3], [3, 0]]), "weight": g(134, 5, 3)}, ["weight"],
          scale_grad_by_freq=True, padding_idx=0)
grad_case("emb_int32_f64", EMB, {"input": T([4, 0, 2], dtype=i32), "weight": g(135, 5, 6, dtype=f64)}, ["weight"])
grad_case("emb_scalar_index", EMB, {"input": T(2), "weight": g(136, 5, 3)}, ["weight"])
mutated_case("emb_max_norm", EMB, {"input": T([[0, 2], [2, 4]]), "weight": g(137, 6, 3, scale=2.0)}, ["weight"],
             ["weight"], max_norm=1.0)
mutated_case("emb_max_norm_l1", EMB, {"input": T([1, 5, 1]), "weight": g(138, 6, 3, scale=2.0)}, ["weight"],
             ["weight"], max_norm=1.5, norm_type=1.0)
error_case("err_emb_oor", EMB, {"input": T([1, 10]), "weight": g(1, 10, 3)})
error_case("err_emb_negative", EMB, {"input": T([1, -1]), "weight": g(1, 10, 3)})
error_case("err_emb_float_indices", EMB, {"input": T([1.0, 2.0]), "weight": g(1, 10, 3)})
error_case("err_emb_1d_weight", EMB, {"input": T([1, 2]), "weight": g(1, 10)})
error_case("err_emb_padding_oor", EMB, {"input": T([1, 2]), "weight": g(1, 10, 3)}, padding_idx=10)

# ------------------------------------------------------------------ activations
act_x = g(140, 4, 9, scale=3.0)
act_special = T([0.0, -0.0, 1e-8, -1e-8, 3.0, -3.0, 6.0, -6.0, 50.0, -50.0, INF, -INF, NAN, 0.5, -0.5, 1.0, -1.0])
ACTS = [
    ("leaky_relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("elu", {}),
    ("elu", {"alpha": 0.5}),
    ("celu", {}),
    ("celu", {"alpha": 2.0}),
    ("selu", {}),
    ("hardtanh", {}),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}),
    ("relu6", {}),
    ("mish", {}),
    ("hardswish", {}),
    ("hardsigmoid", {}),
    ("logsigmoid", {}),
    ("softshrink", {}),
    ("softshrink", {"lambd": 1.5}),
    ("hardshrink", {}),
    ("hardshrink", {"lambd": 1.5}),
]
for k, (op, kw) in enumerate(ACTS):
    tag = op + "".join(f"_{a}{b}" for a, b in kw.items())
    grad_case(f"{tag}_f32", F + op, {"input": act_x}, ["input"], **kw)
    grad_case(f"{tag}_f64", F + op, {"input": g(141 + k, 3, 5, dtype=f64, scale=3.0)}, ["input"], **kw)
    case(f"{tag}_special", F + op, {"input": act_special}, **kw)
    case(f"{tag}_f16", F + op, {"input": g(160 + k, 7, dtype=f16, scale=3.0)}, **kw)
    case(f"{tag}_bf16", F + op, {"input": g(180 + k, 7, dtype=bf16, scale=3.0)}, **kw)
# hardsigmoid_backward has no derivative in PyTorch ("not implemented"); ours is 0.
for op in ["leaky_relu", "elu", "celu", "selu", "mish", "hardswish", "logsigmoid", "hardtanh", "softshrink"]:
    dd_case(f"{op}_dd", F + op, {"input": g(200, 3, 5, scale=2.5)}, ["input"])
dd_case("gelu_dd_f64", F + "gelu", {"input": g(201, 3, 5, dtype=f64, scale=2.5)}, ["input"])
dd_case("gelu_tanh_dd_f64", F + "gelu", {"input": g(202, 3, 5, dtype=f64, scale=2.5)}, ["input"], approximate="tanh")
grad_case("gelu_grad_f32", F + "gelu", {"input": g(203, 6, 7, scale=3.0)}, ["input"])
grad_case("gelu_tanh_grad_f32", F + "gelu", {"input": g(204, 6, 7, scale=3.0)}, ["input"], approximate="tanh")
error_case("err_leaky_relu_int", F + "leaky_relu", {"input": T([1, -2])})
error_case("err_elu_int", F + "elu", {"input": T([1, -2])})
error_case("err_mish_int", F + "mish", {"input": T([1, -2])})
error_case("err_hardtanh_min_gt_max", F + "hardtanh", {"input": g(1, 3)}, min_val=1.0, max_val=-1.0)
error_case("err_celu_alpha0", F + "celu", {"input": g(1, 3)}, alpha=0.0)
case("hardtanh_int", F + "hardtanh", {"input": T([-3, 0, 2])})

# ------------------------------------------------------------------ cross_entropy
CE = F + "cross_entropy"
logits = g(210, 8, 5)
tgt = T([0, 4, 2, 2, -100, 1, 3, 2])
tgt2 = T([0, 4, 2, 2, 3, 1, 3, 2])
w5 = g(211, 5).abs() + 0.2
for red in ["mean", "sum", "none"]:
    grad_case(f"ce_ignore_default_{red}", CE, {"input": logits, "target": tgt}, ["input"], reduction=red)
    grad_case(f"ce_weight_ignore2_{red}", CE, {"input": logits, "target": tgt2, "weight": w5}, ["input"],
              reduction=red, ignore_index=2)
    grad_case(f"ce_smooth_weight_{red}", CE, {"input": logits, "target": tgt, "weight": w5}, ["input"],
              reduction=red, label_smoothing=0.3)
    grad_case(f"ce_smooth_ignore2_{red}", CE, {"input": logits, "target": tgt2}, ["input"], reduction=red,
              label_smoothing=0.1, ignore_index=2)
    grad_case(f"ce_kdim3_{red}", CE, {"input": g(212, 3, 5, 4), "target": gi(213, 0, 5, 3, 4)}, ["input"],
              reduction=red)
    grad_case(f"ce_kdim4_weight_{red}", CE, {"input": g(214, 2, 5, 3, 2), "target": gi(215, 0, 5, 2, 3, 2),
                                             "weight": w5}, ["input"], reduction=red)
    grad_case(f"ce_kdim5_smooth_{red}", CE, {"input": g(216, 2, 5, 2, 2, 2), "target": gi(217, 0, 5, 2, 2, 2, 2)},
              ["input"], reduction=red, label_smoothing=0.2)
    probs = torch.softmax(g(218, 8, 5), 1)
    grad_case(f"ce_probs_{red}", CE, {"input": logits, "target": probs}, ["input", "target"], reduction=red)
    grad_case(f"ce_probs_smooth_weight_{red}", CE, {"input": logits, "target": probs, "weight": w5},
              ["input", "target"], reduction=red, label_smoothing=0.25)
    grad_case(f"ce_probs_kdim_{red}", CE, {"input": g(219, 2, 5, 3), "target": torch.softmax(g(220, 2, 5, 3), 1)},
              ["input"], reduction=red)
grad_case("ce_f64", CE, {"input": g(221, 6, 7, dtype=f64), "target": gi(222, 0, 7, 6), "weight": g(223, 7, dtype=f64).abs()},
          ["input"])
grad_case("ce_unbatched", CE, {"input": g(224, 6), "target": T(4)}, ["input"])
grad_case("ce_uint8_target", CE, {"input": g(225, 4, 6), "target": T([1, 5, 0, 2], dtype=u8)}, ["input"])
grad_case("ce_large_logits", CE, {"input": g(226, 4, 6, scale=80.0), "target": T([1, 5, 0, 2])}, ["input"])
grad_case("ce_all_ignored", CE, {"input": g(227, 3, 4), "target": T([-100, -100, -100])}, ["input"])
grad_case("ce_all_ignored_weight_smooth", CE, {"input": g(228, 3, 4), "target": T([1, 1, 1]), "weight": g(229, 4).abs()},
          ["input"], ignore_index=1, label_smoothing=0.1)
grad_case("ce_wide_1024x65", CE, {"input": g(230, 64, 65), "target": gi(231, 0, 65, 64)}, ["input"])
error_case("err_ce_batch", CE, {"input": g(1, 3, 5), "target": T([0, 1, 2, 3])})
error_case("err_ce_target_oor", CE, {"input": g(1, 3, 5), "target": T([0, 7, 2])})
error_case("err_ce_target_negative", CE, {"input": g(1, 3, 5), "target": T([0, -1, 2])})
error_case("err_ce_target_int32", CE, {"input": g(1, 3, 5), "target": T([0, 1, 2], dtype=i32)})
error_case("err_ce_target_float_shape", CE, {"input": g(1, 3, 5), "target": T([0.0, 1.0, 2.0])})
error_case("err_ce_probs_int", CE, {"input": g(1, 3, 5), "target": gi(2, 0, 2, 3, 5)})
error_case("err_ce_probs_ignore", CE, {"input": g(1, 3, 5), "target": torch.rand(3, 5)}, ignore_index=1)
error_case("err_ce_smoothing", CE, {"input": g(1, 3, 5), "target": T([0, 1, 2])}, label_smoothing=1.5)
error_case("err_ce_weight_shape", CE, {"input": g(1, 3, 5), "target": T([0, 1, 2]), "weight": torch.ones(4)})
error_case("err_ce_kdim_target", CE, {"input": g(1, 2, 3, 4), "target": gi(2, 0, 3, 2, 5)})
error_case("err_ce_int_input", CE, {"input": T([[1, 2], [3, 4]]), "target": T([0, 1])})
error_case("err_ce_reduction", CE, {"input": g(1, 3, 5), "target": T([0, 1, 2])}, reduction="avg")
dd_case("ce_dd_weight_smooth", CE, {"input": g(232, 4, 5), "target": T([0, 3, 4, 1]), "weight": w5}, ["input"],
        label_smoothing=0.2)
dd_case("ce_dd_probs", CE, {"input": g(233, 4, 5), "target": torch.softmax(g(234, 4, 5), 1)}, ["input", "target"])
dd_case("ce_dd_kdim_none", CE, {"input": g(235, 2, 5, 3), "target": gi(236, 0, 5, 2, 3)}, ["input"], reduction="none")

# ------------------------------------------------------------------ nll_loss
NLL = F + "nll_loss"
lp = torch.log_softmax(g(240, 6, 4), 1)
nt = T([0, 3, 1, -100, 2, 3])
for red in ["mean", "sum", "none"]:
    grad_case(f"nll_{red}", NLL, {"input": lp, "target": nt}, ["input"], reduction=red)
    grad_case(f"nll_weight_ignore3_{red}", NLL, {"input": lp, "target": T([0, 3, 1, 0, 2, 3]), "weight": g(241, 4).abs()}, ["input"],
              reduction=red, ignore_index=3)
    grad_case(f"nll_2d_weight_{red}", NLL, {"input": g(242, 2, 4, 3, 5), "target": gi(243, 0, 4, 2, 3, 5),
                                            "weight": g(244, 4).abs()}, ["input"], reduction=red)
    grad_case(f"nll_unbatched_{red}", NLL, {"input": g(245, 5), "target": T(3)}, ["input"], reduction=red)
grad_case("nll_ignored_unbatched", NLL, {"input": g(246, 5), "target": T(-100)}, ["input"])
grad_case("nll_f64_uint8", NLL, {"input": g(247, 5, 3, dtype=f64), "target": T([0, 2, 1, 1, 0], dtype=u8)}, ["input"])
grad_case("nll_empty_batch_mean", NLL, {"input": g(248, 0, 3), "target": T([], dtype=torch.int64)}, ["input"])
grad_case("nll_empty_batch_sum", NLL, {"input": g(249, 0, 3), "target": T([], dtype=torch.int64)}, ["input"],
          reduction="sum")
grad_case("nll_long_cascade", NLL, {"input": g(250, 300, 3), "target": gi(251, 0, 3, 300)}, ["input"])
error_case("err_nll_oor", NLL, {"input": g(1, 3, 5), "target": T([0, 5, 2])})
error_case("err_nll_batch", NLL, {"input": g(1, 3, 5), "target": T([0, 1])})
error_case("err_nll_2d_oor", NLL, {"input": g(1, 2, 3, 4), "target": T([[0, 1, 2, 9], [0, 0, 0, 0]])})
error_case("err_nll_4d_batch", NLL, {"input": g(1, 2, 3, 4, 4), "target": torch.zeros(3, 4, 4, dtype=torch.long)})
error_case("err_nll_4d_shape", NLL, {"input": g(1, 2, 3, 4, 4), "target": torch.zeros(2, 4, 5, dtype=torch.long)})
error_case("err_nll_target_2d", NLL, {"input": g(1, 3, 5), "target": torch.zeros(3, 2, dtype=torch.long)})
dd_case("nll_dd_weight", NLL, {"input": lp, "target": T([0, 3, 1, 1, 2, 3]), "weight": g(252, 4).abs()}, ["input"])

# ------------------------------------------------------------------ regression losses
a, b = g(260, 4, 7), g(261, 4, 7)
for red in ["mean", "sum", "none"]:
    grad_case(f"mse_{red}", F + "mse_loss", {"input": a, "target": b}, ["input", "target"], reduction=red)
    grad_case(f"l1_{red}", F + "l1_loss", {"input": a, "target": b}, ["input", "target"], reduction=red)
    grad_case(f"smooth_l1_{red}", F + "smooth_l1_loss", {"input": a, "target": b}, ["input", "target"], reduction=red)
    grad_case(f"smooth_l1_beta05_{red}", F + "smooth_l1_loss", {"input": a, "target": b}, ["input", "target"],
              reduction=red, beta=0.5)
    grad_case(f"smooth_l1_beta0_{red}", F + "smooth_l1_loss", {"input": a, "target": b}, ["input", "target"],
              reduction=red, beta=0.0)
    grad_case(f"huber_{red}", F + "huber_loss", {"input": a, "target": b}, ["input", "target"], reduction=red)
    grad_case(f"huber_delta2_{red}", F + "huber_loss", {"input": a * 3, "target": b}, ["input", "target"],
              reduction=red, delta=2.0)
grad_case("mse_broadcast", F + "mse_loss", {"input": g(262, 4, 7), "target": g(263, 7)}, ["input", "target"])
grad_case("l1_broadcast", F + "l1_loss", {"input": g(264, 4, 1), "target": g(265, 7)}, ["input", "target"])
grad_case("mse_f64", F + "mse_loss", {"input": g(266, 3, 5, dtype=f64), "target": g(267, 3, 5, dtype=f64)},
          ["input", "target"])
case("mse_mixed_dtype", F + "mse_loss", {"input": g(268, 5), "target": g(269, 5, dtype=f64)})
grad_case("huber_f64", F + "huber_loss", {"input": g(270, 3, 5, dtype=f64), "target": g(271, 3, 5, dtype=f64)},
          ["input", "target"], delta=0.7)
grad_case("smooth_l1_f64", F + "smooth_l1_loss", {"input": g(272, 3, 5, dtype=f64), "target": g(273, 3, 5, dtype=f64)},
          ["input", "target"], beta=0.3)
error_case("err_mse_shape", F + "mse_loss", {"input": g(1, 3, 5), "target": g(2, 4)})
error_case("err_mse_int", F + "mse_loss", {"input": T([1, 2]), "target": T([1, 2])})
error_case("err_smooth_l1_beta", F + "smooth_l1_loss", {"input": g(1, 3), "target": g(2, 3)}, beta=-1.0)
error_case("err_huber_delta", F + "huber_loss", {"input": g(1, 3), "target": g(2, 3)}, delta=0.0)
for op, kw in [("mse_loss", {}), ("smooth_l1_loss", {"beta": 0.7}), ("huber_loss", {"delta": 0.6})]:
    dd_case(f"{op}_dd", F + op, {"input": g(280, 3, 4), "target": g(281, 3, 4)}, ["input", "target"], **kw)

# ------------------------------------------------------------------ binary cross entropy
BCE = F + "binary_cross_entropy"
p = torch.sigmoid(g(290, 4, 6))
y = torch.rand(4, 6, generator=torch.Generator().manual_seed(291))
for red in ["mean", "sum", "none"]:
    grad_case(f"bce_{red}", BCE, {"input": p, "target": y}, ["input", "target"], reduction=red)
    grad_case(f"bce_weight_{red}", BCE, {"input": p, "target": y, "weight": g(292, 6).abs()}, ["input", "target"],
              reduction=red)
case("bce_clamped_logs", BCE, {"input": T([0.0, 1.0, 0.0, 1.0, 1e-30, 0.5]), "target": T([0.0, 1.0, 1.0, 0.0, 1.0, 0.5])},
     reduction="none")
grad_case("bce_f64", BCE, {"input": p.double(), "target": y.double()}, ["input", "target"])
error_case("err_bce_input_range", BCE, {"input": T([1.5]), "target": T([1.0])})
error_case("err_bce_target_range", BCE, {"input": T([0.5]), "target": T([1.5])})
error_case("err_bce_shape", BCE, {"input": torch.rand(3, 5), "target": torch.rand(5)})
dd_case("bce_dd", BCE, {"input": p, "target": y}, ["input", "target"])

BCEL = F + "binary_cross_entropy_with_logits"
z = g(300, 4, 6, scale=3.0)
for red in ["mean", "sum", "none"]:
    grad_case(f"bcel_{red}", BCEL, {"input": z, "target": y}, ["input", "target"], reduction=red)
    grad_case(f"bcel_pos_weight_{red}", BCEL, {"input": z, "target": y, "pos_weight": g(301, 6).abs()},
              ["input", "target"], reduction=red)
    grad_case(f"bcel_weight_pos_weight_{red}", BCEL, {"input": z, "target": y, "weight": g(302, 4, 1).abs(),
                                                      "pos_weight": g(303, 6).abs()}, ["input", "target"],
              reduction=red)
grad_case("bcel_large_logits", BCEL, {"input": T([100.0, -100.0, 30.0, -30.0, 0.0]), "target": T([0.0, 1.0, 1.0, 0.0, 0.5]),
                                      "pos_weight": T([2.0])}, ["input", "target"], reduction="none")
grad_case("bcel_f64", BCEL, {"input": z.double(), "target": y.double(), "pos_weight": g(304, 6, dtype=f64).abs()},
          ["input", "target"])
error_case("err_bcel_shape", BCEL, {"input": torch.rand(3, 5), "target": torch.rand(5)})
dd_case("bcel_dd_pos_weight", BCEL, {"input": z, "target": y, "pos_weight": g(305, 6).abs()}, ["input", "target"])

# ------------------------------------------------------------------ kl_div
KL = F + "kl_div"
lq = torch.log_softmax(g(310, 4, 5), 1)
pt = torch.softmax(g(311, 4, 5), 1)
pt0 = pt.clone()
pt0[0, 1] = 0.0
for red in ["mean", "sum", "none", "batchmean"]:
    grad_case(f"kl_{red}", KL, {"input": lq, "target": pt}, ["input", "target"], reduction=red)
    grad_case(f"kl_log_target_{red}", KL, {"input": lq, "target": pt.log()}, ["input", "target"], reduction=red,
              log_target=True)
grad_case("kl_zero_target", KL, {"input": lq, "target": pt0}, ["input"], reduction="batchmean")
grad_case("kl_f64", KL, {"input": lq.double(), "target": pt.double()}, ["input", "target"], reduction="sum")
error_case("err_kl_int", KL, {"input": T([1, 2]), "target": T([1, 2])})

write(OUT, "nn_loss")
