"""Writes tests/oracle_extra/nn.json: PyTorch reference values (forward
outputs, gradients, second derivatives, errors) for the operators behind
torch.nn's layers, beyond what the shared oracle (tests/oracle/) covers.

One function per section (convolution, pooling, ...); a new family of
layers (norms, losses, attention) adds its own section function and a call
at the bottom, so the file stays one generator with one output. Cases are
mapped to ferrotorch calls in tests/support/oracle_nn.rs.

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_nn_oracle.py
"""

import os
import warnings

from oracle_common import *  # noqa: F401,F403
from oracle_common import CASES, add_case, enc, enc_out, error_case, g, gi, resolve, write

torch.set_num_threads(1)
warnings.filterwarnings("ignore", message=r"Using padding='same'")

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle_extra", "nn.json")

F = "torch.nn.functional."
f64 = torch.float64
f16 = torch.float16
bf16 = torch.bfloat16
i32 = torch.int32
u8 = torch.uint8
T = torch.tensor


def laid_out(t, layout):
    """`t` with the memory layout a case's `layouts` names (same values)."""
    if layout is None:
        return t
    if layout == "channels_last":
        n = t.dim()
        return t.permute(0, *range(2, n), 1).contiguous().permute(0, n - 1, *range(1, n - 1))
    if layout == "transposed":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    raise ValueError(layout)


def nn_case(name, op, inputs, grad=(), layouts=None, dd=False, note=None, **kwargs):
    """`op(**inputs, **kwargs)` with the inputs named in `layouts` given in
    that memory layout. `grad`: the inputs whose d/d(input) of
    sum(output * W) is recorded (`grads`); `dd`: a `double_backward` case
    (also d/d(input) of sum(grads * U), `grad_grads`)."""
    layouts = layouts or {}
    leaves = {k: v.detach().clone().requires_grad_(k in grad) for k, v in inputs.items()}
    args = {k: laid_out(v, layouts.get(k)) for k, v in leaves.items()}
    r = resolve(op)(**args, **kwargs)
    extra = {"kind": "double_backward"} if dd else {}
    add_case(name, op, list(inputs.values()), enc_out(r), kwargs, list(inputs.keys()), note, **extra)
    c = CASES[-1]
    if layouts:
        c["layouts"] = layouts
    if not grad:
        return
    outs = [r] if isinstance(r, torch.Tensor) else list(r)
    gen = torch.Generator().manual_seed(len(CASES))
    ws = [torch.randn(o.shape, generator=gen, dtype=f64).to(o.dtype) if o.dtype.is_floating_point else None
          for o in outs]
    loss = sum((o * w).sum() for o, w in zip(outs, ws) if w is not None)
    diff = [leaves[k] for k in inputs if k in grad]
    gs = torch.autograd.grad(loss, diff, create_graph=dd, allow_unused=True)
    gs = [x if x is not None else torch.zeros_like(v) for x, v in zip(gs, diff)]
    it = iter(gs)
    c["grads"] = [enc(next(it)) if k in grad else None for k in inputs]
    c["grad_weight"] = enc(ws[0]) if len(ws) == 1 else [None if w is None else enc(w) for w in ws]
    if not dd:
        return
    us = [torch.randn(v.shape, generator=gen, dtype=f64).to(v.dtype) for v in diff]
    s = sum((x * u).sum() for x, u in zip(gs, us) if x.requires_grad)
    ggs = torch.autograd.grad(s, diff, allow_unused=True)
    ggs = [x if x is not None else torch.zeros_like(v) for x, v in zip(ggs, diff)]
    iu, ig = iter(us), iter(ggs)
    c["grad_grad_weights"] = [enc(next(iu)) if k in grad else None for k in inputs]
    c["grad_grads"] = [enc(next(ig)) if k in grad else None for k in inputs]


def conv_inputs(seed, n, c, spatial, o, cg, kernel, bias=True, dtype=torch.float32):
    d = {"input": g(seed, n, c, *spatial, dtype=dtype), "weight": g(seed + 1, o, cg, *kernel, dtype=dtype, scale=0.3)}
    if bias:
        d["bias"] = g(seed + 2, o, dtype=dtype)
    return d


def conv_t_inputs(seed, n, c, spatial, cout_g, kernel, bias_len=None, dtype=torch.float32):
    d = {"input": g(seed, n, c, *spatial, dtype=dtype), "weight": g(seed + 1, c, cout_g, *kernel, dtype=dtype, scale=0.3)}
    if bias_len:
        d["bias"] = g(seed + 2, bias_len, dtype=dtype)
    return d


ALL = ("input", "weight", "bias")


# ------------------------------------------------------------ convolution
def section_conv():
    conv2d, conv1d = F + "conv2d", F + "conv1d"
    ct2d, ct1d = F + "conv_transpose2d", F + "conv_transpose1d"
    # conv2d: stride / padding / dilation / groups combinations, gradients
    combos = [
        (1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (3, 1, 2, 2), (2, 0, 1, 4), (1, (1, 2), (2, 1), 2),
        ((2, 1), (0, 1), 1, 1), ((1, 3), 2, (1, 2), 4),
    ]
    for k, (s, p, d, gr) in enumerate(combos):
        ins = conv_inputs(100 + 3 * k, 2, 4, (9, 8), 8, 4 // gr, (3, 2) if k % 2 else (3, 3))
        nn_case(f"conv2d_s{s}_p{p}_d{d}_g{gr}".replace(" ", ""), conv2d, ins, ALL, stride=s, padding=p, dilation=d,
                groups=gr)
    nn_case("conv2d_depthwise_mult2", conv2d, conv_inputs(130, 2, 3, (7, 6), 6, 1, (3, 3)), ALL, padding=1, groups=3)
    nn_case("conv2d_depthwise_stride2", conv2d, conv_inputs(133, 1, 4, (8, 9), 4, 1, (5, 5)), ALL, padding=2, stride=2,
            groups=4)
    nn_case("conv2d_1x1", conv2d, conv_inputs(136, 2, 5, (4, 3), 3, 5, (1, 1)), ALL)
    nn_case("conv2d_1x1_groups", conv2d, conv_inputs(139, 2, 6, (4, 3), 4, 3, (1, 1)), ALL, groups=2)
    nn_case("conv2d_1x1_stride2", conv2d, conv_inputs(142, 2, 3, (5, 5), 2, 3, (1, 1)), ALL, stride=2)
    nn_case("conv2d_1x1_pad1", conv2d, conv_inputs(145, 1, 3, (3, 4), 2, 3, (1, 1)), ALL, padding=1)
    nn_case("conv2d_same_even_kernel", conv2d, conv_inputs(148, 2, 2, (6, 7), 3, 2, (2, 4)), ALL, padding="same")
    nn_case("conv2d_same_even_dilated", conv2d, conv_inputs(151, 1, 2, (7, 7), 3, 2, (2, 3)), ALL, padding="same",
            dilation=(3, 2))
    nn_case("conv2d_same_odd_dilated", conv2d, conv_inputs(154, 1, 2, (6, 6), 2, 2, (3, 3)), ALL, padding="same",
            dilation=2)
    nn_case("conv2d_valid_stride", conv2d, conv_inputs(157, 2, 3, (8, 7), 2, 3, (3, 3)), ALL, padding="valid",
            stride=2)
    nn_case("conv2d_nobias_kernel_eq_input", conv2d, conv_inputs(160, 2, 2, (3, 4), 3, 2, (3, 4), bias=False),
            ("input", "weight"))
    nn_case("conv2d_unbatched", conv2d, conv_inputs(163, 1, 3, (5, 6), 2, 3, (3, 3))
            | {"input": g(163, 3, 5, 6)}, ALL, padding=1)
    nn_case("conv2d_f64", conv2d, conv_inputs(166, 2, 4, (6, 5), 4, 2, (3, 3), dtype=f64), ALL, padding=1, groups=2,
            stride=(1, 2))
    nn_case("conv2d_channels_last", conv2d, conv_inputs(169, 2, 3, (6, 5), 4, 3, (3, 3)), ALL,
            layouts={"input": "channels_last", "weight": "channels_last"}, padding=1)
    nn_case("conv2d_transposed_input", conv2d, conv_inputs(172, 2, 3, (5, 6), 2, 3, (2, 3)), ALL,
            layouts={"input": "transposed"}, stride=2)
    nn_case("conv2d_empty_batch", conv2d, conv_inputs(175, 0, 3, (5, 6), 2, 3, (3, 3)), ALL, padding=1)
    nn_case("conv2d_f16", conv2d, conv_inputs(178, 2, 3, (6, 5), 4, 3, (3, 3), dtype=f16), padding=1)
    nn_case("conv2d_bf16", conv2d, conv_inputs(181, 2, 3, (6, 5), 4, 3, (3, 3), dtype=bf16), padding=1)
    ii = {"input": gi(184, -5, 6, 2, 3, 5, 5), "weight": gi(185, -3, 4, 4, 3, 3, 3), "bias": gi(186, -9, 9, 4)}
    nn_case("conv2d_int64", conv2d, ii, padding=1, stride=2)
    nn_case("conv2d_int32", conv2d, {k: v.to(i32) for k, v in ii.items()}, padding=1)
    nn_case("conv2d_more_channels", conv2d, conv_inputs(187, 2, 16, (5, 5), 24, 16, (3, 3)), ALL, padding=1)
    nn_case("conv2d_dd_groups_stride", conv2d, conv_inputs(190, 1, 4, (6, 5), 4, 2, (3, 2)), ALL, dd=True, stride=2,
            padding=1, groups=2, dilation=(1, 2))
    nn_case("conv2d_dd_nobias", conv2d, conv_inputs(193, 2, 2, (4, 4), 3, 2, (2, 2), bias=False),
            ("input", "weight"), dd=True)
    # conv1d
    nn_case("conv1d_basic", conv1d, conv_inputs(200, 2, 3, (10,), 4, 3, (3,)), ALL)
    nn_case("conv1d_stride_pad_dil", conv1d, conv_inputs(203, 2, 4, (11,), 6, 2, (3,)), ALL, stride=2, padding=2,
            dilation=2, groups=2)
    nn_case("conv1d_same_even", conv1d, conv_inputs(206, 1, 2, (7,), 3, 2, (4,)), ALL, padding="same")
    nn_case("conv1d_valid_nobias", conv1d, conv_inputs(209, 2, 2, (6,), 3, 2, (3,), bias=False), ("input", "weight"),
            padding="valid")
    nn_case("conv1d_unbatched", conv1d, {"input": g(212, 3, 8), "weight": g(213, 2, 3, 2)}, ("input", "weight"))
    nn_case("conv1d_f64_depthwise", conv1d, conv_inputs(214, 2, 3, (9,), 3, 1, (5,), dtype=f64), ALL, padding=2,
            groups=3)
    nn_case("conv1d_1x1", conv1d, conv_inputs(217, 2, 4, (5,), 3, 4, (1,)), ALL)
    nn_case("conv1d_dd", conv1d, conv_inputs(220, 2, 2, (6,), 3, 2, (3,)), ALL, dd=True, padding=1, stride=2)
    # conv_transpose2d
    nn_case("conv_transpose2d_basic", ct2d, conv_t_inputs(230, 2, 3, (4, 5), 2, (3, 3), 2), ALL)
    nn_case("conv_transpose2d_stride2_outpad", ct2d, conv_t_inputs(233, 2, 3, (4, 3), 2, (3, 3), 2), ALL, stride=2,
            padding=1, output_padding=1)
    nn_case("conv_transpose2d_rect", ct2d, conv_t_inputs(236, 1, 2, (3, 4), 3, (2, 3), 3), ALL, stride=(2, 3),
            padding=(1, 0), output_padding=(0, 2))
    nn_case("conv_transpose2d_groups_dil", ct2d, conv_t_inputs(239, 2, 4, (3, 3), 3, (3, 2), 6), ALL, stride=2,
            groups=2, dilation=(2, 1))
    nn_case("conv_transpose2d_outpad_lt_dilation", ct2d, conv_t_inputs(242, 1, 2, (3, 3), 1, (3, 3), 1), ALL,
            dilation=2, output_padding=1)
    nn_case("conv_transpose2d_nobias", ct2d, conv_t_inputs(245, 2, 3, (3, 3), 2, (2, 2)), ("input", "weight"),
            stride=2)
    nn_case("conv_transpose2d_unbatched", ct2d, conv_t_inputs(248, 1, 2, (3, 4), 2, (3, 3), 2)
            | {"input": g(248, 2, 3, 4)}, ALL, padding=1)
    nn_case("conv_transpose2d_f64", ct2d, conv_t_inputs(251, 2, 4, (3, 4), 1, (3, 3), 2, dtype=f64), ALL, stride=2,
            padding=1, groups=2)
    nn_case("conv_transpose2d_channels_last", ct2d, conv_t_inputs(254, 2, 3, (4, 4), 2, (3, 3), 2), ALL,
            layouts={"input": "channels_last"}, stride=2)
    nn_case("conv_transpose2d_1x1", ct2d, conv_t_inputs(257, 2, 3, (3, 4), 2, (1, 1), 2), ALL)
    nn_case("conv_transpose2d_int64", ct2d, {"input": gi(260, -4, 5, 1, 2, 3, 3), "weight": gi(261, -3, 4, 2, 2, 2, 2)},
            stride=2)
    nn_case("conv_transpose2d_f16", ct2d, conv_t_inputs(262, 1, 2, (3, 3), 2, (3, 3), 2, dtype=f16), stride=2)
    nn_case("conv_transpose2d_dd", ct2d, conv_t_inputs(265, 1, 2, (3, 3), 2, (3, 3), 2), ALL, dd=True, stride=2,
            padding=1, output_padding=1)
    # conv_transpose1d
    nn_case("conv_transpose1d_basic", ct1d, conv_t_inputs(270, 2, 3, (5,), 2, (3,), 2), ALL)
    nn_case("conv_transpose1d_stride_outpad_groups", ct1d, conv_t_inputs(273, 2, 4, (4,), 2, (3,), 4), ALL, stride=3,
            padding=1, output_padding=2, groups=2)
    nn_case("conv_transpose1d_dd", ct1d, conv_t_inputs(276, 1, 2, (4,), 3, (2,), 3), ALL, dd=True, stride=2)
    # errors
    error_case("err_conv2d_channels", conv2d, {"input": torch.ones(64, 3, 28, 28), "weight": torch.ones(32, 1, 3, 3)})
    error_case("err_conv2d_kernel_too_big", conv2d, {"input": torch.ones(1, 1, 2, 2), "weight": torch.ones(1, 1, 3, 3)})
    error_case("err_conv2d_kernel_too_big_padded", conv2d, {"input": torch.ones(1, 1, 2, 5),
               "weight": torch.ones(1, 1, 5, 3)}, padding=1)
    error_case("err_conv2d_dilated_kernel_too_big", conv2d, {"input": torch.ones(1, 1, 4, 4),
               "weight": torch.ones(1, 1, 3, 3)}, dilation=2)
    error_case("err_conv2d_stride0", conv2d, {"input": torch.ones(1, 4, 5, 5), "weight": torch.ones(3, 4, 3, 3)},
               stride=0)
    error_case("err_conv2d_stride_neg", conv2d, {"input": torch.ones(1, 4, 5, 5), "weight": torch.ones(3, 4, 3, 3)},
               stride=(1, -1))
    error_case("err_conv2d_dilation0", conv2d, {"input": torch.ones(1, 4, 5, 5), "weight": torch.ones(3, 4, 3, 3)},
               dilation=0)
    error_case("err_conv2d_padding_neg", conv2d, {"input": torch.ones(1, 4, 5, 5), "weight": torch.ones(3, 4, 3, 3)},
               padding=-1)
    error_case("err_conv2d_groups0", conv2d, {"input": torch.ones(1, 4, 5, 5), "weight": torch.ones(3, 4, 3, 3)},
               groups=0)
    error_case("err_conv2d_groups_weight", conv2d, {"input": torch.ones(1, 4, 5, 5), "weight": torch.ones(3, 2, 3, 3)},
               groups=2)
    error_case("err_conv2d_groups_input", conv2d, {"input": torch.ones(1, 5, 5, 5), "weight": torch.ones(4, 2, 3, 3)},
               groups=2)
    error_case("err_conv2d_groups_too_many", conv2d, {"input": torch.ones(1, 4, 5, 5),
               "weight": torch.ones(2, 1, 3, 3)}, groups=4)
    error_case("err_conv2d_bias_size", conv2d, {"input": torch.ones(1, 4, 5, 5), "weight": torch.ones(3, 4, 3, 3),
               "bias": torch.ones(2)})
    error_case("err_conv2d_bias_2d", conv2d, {"input": torch.ones(1, 1, 3, 3), "weight": torch.ones(1, 1, 3, 3),
               "bias": torch.ones(1, 1)})
    error_case("err_conv2d_same_strided", conv2d, {"input": torch.ones(1, 4, 5, 5), "weight": torch.ones(3, 4, 3, 3)},
               padding="same", stride=2)
    error_case("err_conv2d_input_2d", conv2d, {"input": torch.ones(2, 2), "weight": torch.ones(1, 1, 3, 3)})
    error_case("err_conv2d_input_5d", conv2d, {"input": torch.ones(1, 1, 1, 3, 3), "weight": torch.ones(1, 1, 3, 3)})
    error_case("err_conv2d_weight_dtype", conv2d, {"input": torch.ones(1, 1, 3, 3),
               "weight": torch.ones(1, 1, 3, 3, dtype=f64)})
    error_case("err_conv2d_bias_dtype", conv2d, {"input": torch.ones(1, 1, 3, 3), "weight": torch.ones(1, 1, 3, 3),
               "bias": torch.ones(1, dtype=f64)})
    error_case("err_conv2d_bool", conv2d, {"input": torch.ones(1, 1, 3, 3, dtype=torch.bool),
               "weight": torch.ones(1, 1, 3, 3, dtype=torch.bool)})
    error_case("err_conv2d_zero_out_channels", conv2d, {"input": torch.ones(1, 4, 5, 5),
               "weight": torch.ones(0, 4, 3, 3)})
    error_case("err_conv2d_stride_len", conv2d, {"input": torch.ones(1, 4, 5, 5), "weight": torch.ones(3, 4, 3, 3)},
               stride=(1, 2, 3))
    error_case("err_conv1d_input_4d", conv1d, {"input": torch.ones(1, 4, 3, 3), "weight": torch.ones(4, 4, 1)})
    error_case("err_conv1d_channels", conv1d, {"input": torch.ones(2, 5, 5), "weight": torch.ones(2, 2, 3)})
    error_case("err_conv_transpose2d_outpad", ct2d, {"input": torch.ones(1, 4, 5, 5),
               "weight": torch.ones(4, 3, 3, 3)}, stride=2, output_padding=2)
    error_case("err_conv_transpose2d_too_small", ct2d, {"input": torch.ones(1, 4, 1, 1),
               "weight": torch.ones(4, 3, 1, 1)}, padding=1)
    error_case("err_conv_transpose2d_channels", ct2d, {"input": torch.ones(1, 5, 3, 3),
               "weight": torch.ones(4, 3, 1, 1)})
    error_case("err_conv_transpose2d_groups", ct2d, {"input": torch.ones(1, 4, 3, 3),
               "weight": torch.ones(4, 3, 1, 1)}, groups=3)
    error_case("err_conv_transpose2d_bias", ct2d, {"input": torch.ones(1, 4, 3, 3), "weight": torch.ones(4, 3, 1, 1),
               "bias": torch.ones(2)})
    error_case("err_conv_transpose2d_int32", ct2d, {"input": torch.ones(1, 2, 3, 3, dtype=i32),
               "weight": torch.ones(2, 2, 3, 3, dtype=i32)})
    error_case("err_conv_transpose1d_outpad", ct1d, {"input": torch.ones(1, 2, 5), "weight": torch.ones(2, 3, 3)},
               output_padding=1)


# ------------------------------------------------------------ pooling
def section_pool():
    mp2, mp1 = F + "max_pool2d", F + "max_pool1d"
    ap2, ap1 = F + "avg_pool2d", F + "avg_pool1d"
    aap2, aap1 = F + "adaptive_avg_pool2d", F + "adaptive_avg_pool1d"
    amp2, amp1 = F + "adaptive_max_pool2d", F + "adaptive_max_pool1d"
    x = g(300, 2, 3, 9, 8)
    tied = (g(301, 2, 2, 7, 8) * 2).round()
    for k, s, p, d, ceil in [(3, 2, 1, 1, False), (3, 2, 1, 1, True), (2, 3, 1, 1, True), (3, 1, 0, 2, False),
                             (2, 2, 1, 3, True), ((3, 2), (2, 1), (1, 0), (1, 2), False), (4, 3, 2, 1, True),
                             (5, 2, 2, 1, True), (1, 1, 0, 1, False)]:
        name = f"max_pool2d_k{k}_s{s}_p{p}_d{d}{'_ceil' if ceil else ''}".replace(" ", "")
        nn_case(name, mp2, {"input": x}, ("input",), kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil,
                return_indices=True)
    nn_case("max_pool2d_ties", mp2, {"input": tied}, ("input",), kernel_size=3, stride=1, padding=1,
            return_indices=True)
    nn_case("max_pool2d_ties_2x2", mp2, {"input": tied}, ("input",), kernel_size=2, return_indices=True)
    nan = g(302, 1, 2, 6, 6)
    nan[0, 0, 0, 0] = NAN
    nan[0, 0, 1, 3] = NAN
    nan[0, 0, 0, 2] = NAN
    nan[0, 1, 2:4, 2:4] = -INF
    nan[0, 1, 0, 0:2] = INF
    nan[0, 1, 5, 5] = NAN
    nan[0, 1, 4, 4] = NAN
    nn_case("max_pool2d_nan_inf", mp2, {"input": nan}, ("input",), kernel_size=2, return_indices=True)
    nn_case("max_pool2d_nan_inf_overlap", mp2, {"input": nan}, ("input",), kernel_size=3, stride=1, padding=1,
            return_indices=True)
    ninf = torch.full((1, 1, 4, 4), -INF)
    ninf[0, 0, 3, 3] = 1.0
    nn_case("max_pool2d_all_neg_inf", mp2, {"input": ninf}, kernel_size=3, stride=1, padding=1, return_indices=True)
    nn_case("max_pool2d_unbatched", mp2, {"input": g(303, 3, 7, 6)}, ("input",), kernel_size=3, stride=2,
            return_indices=True)
    nn_case("max_pool2d_f64", mp2, {"input": g(304, 2, 2, 7, 7, dtype=f64)}, ("input",), kernel_size=3, stride=2,
            padding=1, ceil_mode=True)
    nn_case("max_pool2d_channels_last", mp2, {"input": x}, ("input",), layouts={"input": "channels_last"},
            kernel_size=3, stride=2, padding=1, return_indices=True)
    nn_case("max_pool2d_transposed_input", mp2, {"input": x}, ("input",), layouts={"input": "transposed"},
            kernel_size=2, return_indices=True)
    nn_case("max_pool2d_int64_negative", mp2, {"input": gi(305, -100, 0, 1, 2, 5, 5)}, kernel_size=2,
            return_indices=True)
    nn_case("max_pool2d_int32", mp2, {"input": gi(306, -50, 50, 1, 2, 5, 5, dtype=i32)}, kernel_size=3, stride=2,
            padding=1)
    nn_case("max_pool2d_uint8", mp2, {"input": gi(307, 0, 256, 1, 2, 5, 5, dtype=u8)}, kernel_size=2,
            return_indices=True)
    nn_case("max_pool2d_f16", mp2, {"input": g(308, 1, 2, 6, 6, dtype=f16)}, kernel_size=2, return_indices=True)
    nn_case("max_pool2d_bf16", mp2, {"input": g(309, 1, 2, 6, 6, dtype=bf16)}, kernel_size=3, stride=2, padding=1)
    nn_case("max_pool2d_empty_batch", mp2, {"input": torch.ones(0, 2, 5, 5)}, kernel_size=2, return_indices=True)
    nn_case("max_pool2d_dd", mp2, {"input": g(310, 1, 2, 5, 6)}, ("input",), dd=True, kernel_size=3, stride=2,
            padding=1)
    nn_case("max_pool1d_basic", mp1, {"input": g(311, 2, 3, 9)}, ("input",), kernel_size=2, return_indices=True)
    nn_case("max_pool1d_all_args", mp1, {"input": g(312, 2, 3, 11)}, ("input",), kernel_size=3, stride=2, padding=1,
            dilation=2, ceil_mode=True, return_indices=True)
    nn_case("max_pool1d_unbatched", mp1, {"input": g(313, 3, 8)}, ("input",), kernel_size=3, stride=1)
    # average pools: ceil_mode x count_include_pad x divisor_override
    for ceil in (False, True):
        for inc in (False, True):
            for div in (None, 5):
                name = f"avg_pool2d_k3_s2_p1{'_ceil' if ceil else ''}{'' if inc else '_exclpad'}" + \
                       (f"_div{div}" if div else "")
                nn_case(name, ap2, {"input": x}, ("input",), kernel_size=3, stride=2, padding=1, ceil_mode=ceil,
                        count_include_pad=inc, divisor_override=div)
    nn_case("avg_pool2d_rect_ceil_exclpad", ap2, {"input": x}, ("input",), kernel_size=(3, 2), stride=(2, 3),
            padding=(1, 1), ceil_mode=True, count_include_pad=False)
    nn_case("avg_pool2d_k4_s3_p2_ceil", ap2, {"input": x}, ("input",), kernel_size=4, stride=3, padding=2,
            ceil_mode=True)
    nn_case("avg_pool2d_unbatched", ap2, {"input": g(320, 2, 7, 6)}, ("input",), kernel_size=2, stride=1)
    nn_case("avg_pool2d_f64", ap2, {"input": g(321, 2, 2, 7, 7, dtype=f64)}, ("input",), kernel_size=3, stride=2,
            padding=1, count_include_pad=False)
    nn_case("avg_pool2d_channels_last", ap2, {"input": x}, ("input",), layouts={"input": "channels_last"},
            kernel_size=3, stride=2, padding=1, ceil_mode=True)
    nn_case("avg_pool2d_int64", ap2, {"input": gi(322, -100, 100, 1, 2, 6, 6)}, kernel_size=3, stride=2, padding=1,
            count_include_pad=False)
    nn_case("avg_pool2d_f16", ap2, {"input": g(323, 1, 2, 6, 6, dtype=f16)}, kernel_size=2)
    nn_case("avg_pool2d_bf16", ap2, {"input": g(324, 1, 2, 6, 6, dtype=bf16)}, kernel_size=3, stride=2, padding=1)
    nn_case("avg_pool2d_dd", ap2, {"input": g(325, 1, 2, 5, 6)}, ("input",), dd=True, kernel_size=3, stride=2,
            padding=1, count_include_pad=False)
    nn_case("avg_pool1d_basic", ap1, {"input": g(326, 2, 3, 9)}, ("input",), kernel_size=2)
    nn_case("avg_pool1d_pad_exclpad_ceil", ap1, {"input": g(327, 2, 3, 10)}, ("input",), kernel_size=3, stride=2,
            padding=1, ceil_mode=True, count_include_pad=False)
    nn_case("avg_pool1d_unbatched", ap1, {"input": g(328, 3, 8)}, ("input",), kernel_size=4, stride=3, padding=2)
    # adaptive pools: sizes that do not divide, larger than the input, 1x1
    for h, w, oh, ow in [(9, 8, 4, 3), (7, 5, 3, 2), (5, 7, 7, 9), (6, 6, 1, 1), (7, 9, 1, 4), (8, 8, 4, 4),
                         (5, 5, 5, 5), (10, 3, 3, 1)]:
        xi = g(330 + h + w, 2, 3, h, w)
        nn_case(f"adaptive_avg_pool2d_{h}x{w}_to_{oh}x{ow}", aap2, {"input": xi}, ("input",), output_size=(oh, ow))
        nn_case(f"adaptive_max_pool2d_{h}x{w}_to_{oh}x{ow}", amp2, {"input": xi}, ("input",), output_size=(oh, ow),
                return_indices=True)
    nn_case("adaptive_avg_pool2d_int_size", aap2, {"input": g(350, 1, 2, 7, 6)}, ("input",), output_size=3)
    nn_case("adaptive_avg_pool2d_unbatched", aap2, {"input": g(351, 2, 7, 6)}, ("input",), output_size=(2, 4))
    nn_case("adaptive_avg_pool2d_f64", aap2, {"input": g(352, 2, 2, 7, 6, dtype=f64)}, ("input",),
            output_size=(3, 4))
    nn_case("adaptive_avg_pool2d_channels_last", aap2, {"input": g(353, 2, 3, 7, 6)}, ("input",),
            layouts={"input": "channels_last"}, output_size=(3, 4))
    nn_case("adaptive_avg_pool2d_f16", aap2, {"input": g(354, 1, 2, 7, 6, dtype=f16)}, output_size=(3, 4))
    nn_case("adaptive_avg_pool2d_empty_channels", aap2, {"input": torch.ones(1, 0, 5, 5)}, output_size=2)
    nn_case("adaptive_avg_pool2d_zero_size", aap2, {"input": g(355, 1, 2, 5, 5)}, output_size=(0, 3))
    nn_case("adaptive_avg_pool2d_dd", aap2, {"input": g(356, 1, 2, 7, 5)}, ("input",), dd=True, output_size=(3, 2))
    nn_case("adaptive_avg_pool1d", aap1, {"input": g(357, 2, 3, 10)}, ("input",), output_size=4)
    anan = g(358, 1, 2, 5, 5)
    anan[0, 0, 1, 1] = NAN
    anan[0, 1, 4, 4] = NAN
    nn_case("adaptive_max_pool2d_nan", amp2, {"input": anan}, ("input",), output_size=(3, 2), return_indices=True)
    nn_case("adaptive_max_pool2d_values_only", amp2, {"input": g(359, 1, 2, 5, 5)}, ("input",), output_size=2)
    nn_case("adaptive_max_pool2d_unbatched_f64", amp2, {"input": g(360, 2, 5, 7, dtype=f64)}, ("input",),
            output_size=(2, 3), return_indices=True)
    nn_case("adaptive_max_pool2d_channels_last", amp2, {"input": g(361, 2, 3, 7, 6)}, ("input",),
            layouts={"input": "channels_last"}, output_size=(3, 4), return_indices=True)
    nn_case("adaptive_max_pool2d_bf16", amp2, {"input": g(362, 1, 2, 7, 6, dtype=bf16)}, output_size=(3, 4),
            return_indices=True)
    nn_case("adaptive_max_pool2d_dd", amp2, {"input": g(363, 1, 2, 7, 5)}, ("input",), dd=True, output_size=(3, 2))
    nn_case("adaptive_max_pool1d", amp1, {"input": g(364, 2, 3, 10)}, ("input",), output_size=4, return_indices=True)
    # errors
    one = torch.ones(1, 1, 5, 5)
    error_case("err_max_pool2d_pad_half", mp2, {"input": one}, kernel_size=2, padding=2)
    error_case("err_max_pool2d_pad_half_dilated", mp2, {"input": torch.ones(1, 1, 9, 9)}, kernel_size=2, padding=2,
               dilation=3)
    error_case("err_max_pool2d_kernel0", mp2, {"input": one}, kernel_size=0)
    error_case("err_max_pool2d_kernel0_stride1", mp2, {"input": one}, kernel_size=0, stride=1)
    error_case("err_max_pool2d_stride0", mp2, {"input": one}, kernel_size=2, stride=0)
    error_case("err_max_pool2d_dilation0", mp2, {"input": one}, kernel_size=2, dilation=0)
    error_case("err_max_pool2d_pad_neg", mp2, {"input": one}, kernel_size=2, padding=-1)
    error_case("err_max_pool2d_too_small", mp2, {"input": torch.ones(1, 1, 1, 1)}, kernel_size=2)
    error_case("err_max_pool2d_input_2d", mp2, {"input": torch.ones(5, 5)}, kernel_size=2)
    error_case("err_max_pool2d_input_5d", mp2, {"input": torch.ones(1, 1, 1, 5, 5)}, kernel_size=2)
    error_case("err_max_pool2d_empty_channels", mp2, {"input": torch.ones(1, 0, 5, 5)}, kernel_size=2)
    error_case("err_max_pool2d_kernel_3", mp2, {"input": one}, kernel_size=(2, 2, 2))
    error_case("err_max_pool2d_bool", mp2, {"input": torch.ones(1, 1, 4, 4, dtype=torch.bool)}, kernel_size=2)
    error_case("err_max_pool1d_kernel0", mp1, {"input": torch.ones(1, 1, 5)}, kernel_size=0)
    error_case("err_max_pool1d_stride0", mp1, {"input": torch.ones(1, 1, 5)}, kernel_size=2, stride=0)
    error_case("err_max_pool1d_pad", mp1, {"input": torch.ones(1, 1, 5)}, kernel_size=2, padding=2)
    error_case("err_max_pool1d_too_small", mp1, {"input": torch.ones(1, 1, 1)}, kernel_size=2)
    error_case("err_max_pool1d_input_4d", mp1, {"input": one}, kernel_size=2)
    error_case("err_avg_pool2d_pad_half", ap2, {"input": one}, kernel_size=2, padding=2)
    error_case("err_avg_pool2d_divisor0", ap2, {"input": one}, kernel_size=2, divisor_override=0)
    error_case("err_avg_pool2d_too_small", ap2, {"input": torch.ones(1, 1, 1, 1)}, kernel_size=2)
    error_case("err_avg_pool2d_stride0", ap2, {"input": one}, kernel_size=2, stride=0)
    error_case("err_avg_pool2d_pad_neg", ap2, {"input": one}, kernel_size=2, padding=-1)
    error_case("err_avg_pool2d_empty_channels", ap2, {"input": torch.ones(1, 0, 5, 5)}, kernel_size=2)
    error_case("err_avg_pool2d_int32", ap2, {"input": torch.ones(1, 1, 4, 4, dtype=i32)}, kernel_size=2)
    error_case("err_avg_pool1d_input_4d", ap1, {"input": one}, kernel_size=2)
    error_case("err_avg_pool1d_pad", ap1, {"input": torch.ones(1, 1, 5)}, kernel_size=2, padding=2)
    error_case("err_avg_pool1d_too_small", ap1, {"input": torch.ones(1, 1, 1)}, kernel_size=2)
    error_case("err_adaptive_avg_pool2d_input_2d", aap2, {"input": torch.ones(5, 5)}, output_size=2)
    error_case("err_adaptive_avg_pool2d_negative", aap2, {"input": one}, output_size=-1)
    error_case("err_adaptive_avg_pool2d_three", aap2, {"input": one}, output_size=(1, 2, 3))
    error_case("err_adaptive_avg_pool2d_zero_h", aap2, {"input": torch.ones(1, 1, 0, 5)}, output_size=2)
    error_case("err_adaptive_avg_pool2d_int", aap2, {"input": torch.ones(1, 1, 4, 4, dtype=torch.int64)},
               output_size=2)
    error_case("err_adaptive_max_pool2d_input_2d", amp2, {"input": torch.ones(5, 5)}, output_size=2)
    error_case("err_adaptive_max_pool2d_negative", amp2, {"input": one}, output_size=-1)
    error_case("err_adaptive_max_pool2d_empty_channels", amp2, {"input": torch.ones(1, 0, 5, 5)}, output_size=2)
    error_case("err_adaptive_max_pool2d_int", amp2, {"input": torch.ones(1, 1, 4, 4, dtype=torch.int64)},
               output_size=2)


section_conv()
section_pool()
write(OUT, "nn")
