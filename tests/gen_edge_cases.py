"""PyTorch's answers to edge cases that held-out tests found or may find:
alpha/beta = 0 in the addmm family, value range checks per dtype, strides of
`*_like` results, gradients at singular points, bernoulli's draw order,
linspace's last bits, printing in scientific mode, LayerNorm's backward
rounding, and argument forms (repeat_interleave, masked_scatter_,
index_fill with a tensor value, solve(left=False), searchsorted's side and
sorter, empty_strided's dtype, nansum/nanmean dtype, in-place logical ops,
negative integer arguments). Writes tests/edge_cases.json, which
tests/edge_cases.rs replays case by case (the same names in both files).

    bench/.venv/bin/python tests/gen_edge_cases.py
"""
import json
import math
import os
import warnings

import torch

warnings.simplefilter("ignore")
nan, inf = float("nan"), float("inf")
f32, f64, f16, bf16 = torch.float32, torch.float64, torch.float16, torch.bfloat16

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def grads(outs, ins):
    """The gradients of the sum of `outs` with respect to `ins`."""
    total = sum(o.sum() for o in outs)
    return list(torch.autograd.grad(total, ins, allow_unused=True))


def leaf(v, dtype=f64):
    return torch.tensor(v, dtype=dtype, requires_grad=True)


A = [[1.0, 2.0], [3.0, 4.0]]
B = [[5.0, 6.0], [7.0, 8.0]]
A_NAN = [[nan, 2.0], [3.0, 4.0]]


# --- alpha / beta = 0 in addmm, addmv, addbmm, baddbmm -----------------------
for dt in ("f32", "f64"):
    d = {"f32": f32, "f64": f64}[dt]
    CASES[f"addmm_beta0_nan_input_{dt}"] = (lambda d=d: [torch.full((2, 2), nan, dtype=d).addmm(torch.tensor(A, dtype=d), torch.tensor(B, dtype=d), beta=0)])
    CASES[f"addmm_beta0_inf_input_{dt}"] = (lambda d=d: [torch.full((2, 2), inf, dtype=d).addmm(torch.tensor(A, dtype=d), torch.tensor(B, dtype=d), beta=0)])
    CASES[f"addmm_alpha0_nan_mat_{dt}"] = (lambda d=d: [torch.ones(2, 2, dtype=d).addmm(torch.tensor(A_NAN, dtype=d), torch.tensor(B, dtype=d), alpha=0)])
    CASES[f"addmm_alpha0_beta0_{dt}"] = (lambda d=d: [torch.full((2, 2), nan, dtype=d).addmm(torch.tensor(A_NAN, dtype=d), torch.tensor(B, dtype=d), alpha=0, beta=0)])
    CASES[f"addmv_beta0_nan_input_{dt}"] = (lambda d=d: [torch.full((2,), nan, dtype=d).addmv(torch.tensor(A, dtype=d), torch.tensor([1.0, 2.0], dtype=d), beta=0)])
    CASES[f"addmv_alpha0_nan_mat_{dt}"] = (lambda d=d: [torch.ones(2, dtype=d).addmv(torch.tensor(A_NAN, dtype=d), torch.tensor([1.0, 2.0], dtype=d), alpha=0)])
    CASES[f"addbmm_beta0_nan_input_{dt}"] = (lambda d=d: [torch.full((2, 2), nan, dtype=d).addbmm(torch.tensor([A, B], dtype=d), torch.tensor([B, A], dtype=d), beta=0)])
    CASES[f"addbmm_alpha0_nan_mat_{dt}"] = (lambda d=d: [torch.ones(2, 2, dtype=d).addbmm(torch.tensor([A_NAN, B], dtype=d), torch.tensor([B, A], dtype=d), alpha=0)])
    CASES[f"baddbmm_beta0_nan_input_{dt}"] = (lambda d=d: [torch.full((1, 2, 2), nan, dtype=d).baddbmm(torch.tensor([A], dtype=d), torch.tensor([B], dtype=d), beta=0)])
    # k*m*n < 400: PyTorch's naive kernel multiplies by alpha (NaN propagates);
    # from 400 on, BLAS ignores the product when alpha is 0.
    CASES[f"baddbmm_alpha0_small_{dt}"] = (lambda d=d: [torch.ones(1, 2, 2, dtype=d).baddbmm(torch.tensor([A_NAN], dtype=d), torch.tensor([B], dtype=d), alpha=0)])
    CASES[f"baddbmm_alpha0_large_{dt}"] = (lambda d=d: [torch.ones(1, 8, 8, dtype=d).baddbmm(torch.full((1, 8, 8), nan, dtype=d), torch.ones(1, 8, 8, dtype=d), alpha=0)])
CASES["addmm_alpha0_nan_mat_bf16"] = lambda: [torch.ones(2, 2, dtype=bf16).addmm(torch.tensor(A_NAN, dtype=bf16), torch.tensor(B, dtype=bf16), alpha=0)]
CASES["addmm_beta0_nan_input_bf16"] = lambda: [torch.full((2, 2), nan, dtype=bf16).addmm(torch.tensor(A, dtype=bf16), torch.tensor(B, dtype=bf16), beta=0)]


# --- scalar values converted to a dtype --------------------------------------
CONV = {
    "full_u8_300": lambda: torch.full((2,), 300, dtype=torch.uint8),
    "full_u8_neg1": lambda: torch.full((2,), -1, dtype=torch.uint8),
    "full_u8_neg255": lambda: torch.full((2,), -255, dtype=torch.uint8),
    "full_u8_neg256": lambda: torch.full((2,), -256, dtype=torch.uint8),
    "full_u8_neg1_float": lambda: torch.full((2,), -1.0, dtype=torch.uint8),
    "full_u8_255_9": lambda: torch.full((2,), 255.9, dtype=torch.uint8),
    "full_u8_256_0": lambda: torch.full((2,), 256.0, dtype=torch.uint8),
    "full_i32_2p31": lambda: torch.full((2,), 2**31, dtype=torch.int32),
    "full_i32_nan": lambda: torch.full((2,), nan, dtype=torch.int32),
    "full_i64_inf": lambda: torch.full((2,), inf, dtype=torch.int64),
    "full_f32_1e40": lambda: torch.full((2,), 1e40),
    "full_f32_inf": lambda: torch.full((2,), inf),
    "full_f32_1e40_one": lambda: torch.full((1,), 1e40),
    "full_f16_1e5": lambda: torch.full((2,), 1e5, dtype=f16),
    "full_f16_1e5_one": lambda: torch.full((1,), 1e5, dtype=f16),
    "full_f16_1e5_0d": lambda: torch.full((), 1e5, dtype=f16),
    "full_bf16_1e39": lambda: torch.full((2,), 1e39, dtype=bf16),
    "full_bf16_1e39_one": lambda: torch.full((1,), 1e39, dtype=bf16),
    "full_f16_double_rounding": lambda: torch.full((2,), 1 + 2**-11 + 1e-12, dtype=f16),
    "fill_f16_1e5": lambda: torch.zeros(3, dtype=f16).fill_(1e5),
    "fill_f16_1e5_one": lambda: torch.zeros(1, dtype=f16).fill_(1e5),
    "fill_u8_300": lambda: torch.zeros(3, dtype=torch.uint8).fill_(300),
    "fill_i32_1e10": lambda: torch.zeros(3, dtype=torch.int32).fill_(1e10),
    "new_full_u8_300": lambda: torch.zeros(1, dtype=torch.uint8).new_full((2,), 300),
    "masked_fill_u8_300": lambda: torch.zeros(3, dtype=torch.uint8).masked_fill(torch.tensor([True, False, True]), 300),
    "index_fill_i32_2p31": lambda: torch.zeros(3, dtype=torch.int32).index_fill(0, torch.tensor([1]), 2**31),
    "new_tensor_u8_300": lambda: torch.zeros(1, dtype=torch.uint8).new_tensor([300]),
    "new_tensor_u8_neg1": lambda: torch.zeros(1, dtype=torch.uint8).new_tensor([-1, 5]),
    "new_tensor_u8_neg256": lambda: torch.zeros(1, dtype=torch.uint8).new_tensor([-256]),
    "new_tensor_i32_from_floats": lambda: torch.zeros(1, dtype=torch.int32).new_tensor([3.7, -3.7, 255.9]),
    "new_tensor_i32_1e10": lambda: torch.zeros(1, dtype=torch.int32).new_tensor([1e10]),
    "new_tensor_i64_nan": lambda: torch.zeros(1, dtype=torch.int64).new_tensor([nan]),
    "new_tensor_f32_1e40": lambda: torch.zeros(1).new_tensor([1e40, -1e300, 2.5]),
    "new_tensor_f16_70000": lambda: torch.zeros(1, dtype=f16).new_tensor([70000.0, 65519.0, 65520.0]),
    "new_tensor_f16_double_rounding": lambda: torch.zeros(1, dtype=f16).new_tensor([1 + 2**-11 + 1e-12]),
    "new_tensor_bool": lambda: torch.zeros(1, dtype=torch.bool).new_tensor([nan, 0.0, 0.5]),
    "tensor_u8_300": lambda: torch.tensor([300], dtype=torch.uint8),
    "tensor_u8_neg1": lambda: torch.tensor([-1], dtype=torch.uint8),
    "tensor_i32_nan": lambda: torch.tensor([nan], dtype=torch.int32),
    "tensor_f32_1e40": lambda: torch.tensor([1e40], dtype=f32),
    "tensor_bf16_1e39": lambda: torch.tensor([1e39], dtype=bf16),
    "tensor_f16_from_ints": lambda: torch.tensor([70000, 3], dtype=f16),
}
for k, fn in CONV.items():
    CASES[k] = (lambda fn=fn: [fn()])


# --- strides of *_like results ------------------------------------------------
def strided(sizes, strides):
    return torch.zeros(1000).as_strided(sizes, strides)


LIKE = {
    "size1_odd_stride": ((1, 3), (100, 1)),
    "size1_middle": ((2, 1, 3), (1, 7, 2)),
    "zero_stride_size1": ((2, 1, 3), (1, 0, 2)),
    "empty": ((2, 0, 3), (1, 5, 100)),
    "one_elem_1d": ((1,), (5,)),
    "gapped_1d": ((3,), (2,)),
    "sliced_last": ((2, 3, 2), (12, 4, 2)),
    "expanded_rows": ((3, 4), (1, 0)),
    "expanded_cols": ((3, 4), (0, 1)),
    "expanded_both": ((3, 4), (0, 0)),
    "mixed_zero": ((2, 3, 4), (1, 0, 2)),
    "mixed_zero2": ((2, 3, 4), (24, 0, 2)),
    "five_dims": ((6, 5, 4, 3, 2), (6, 0, 120, 0, 1)),
    "overlap": ((3, 2, 2, 3), (4, 3, 3, 4)),
    "overlap_2d": ((2, 2), (1, 1)),
    "equal_strides": ((2, 3), (1, 1)),
    "equal_strides2": ((3, 2), (1, 1)),
    "channels_last_sliced": ((2, 3, 4, 3), (72, 1, 18, 6)),
    "column_slice": ((4, 2), (3, 1)),
    "transposed": ((3, 4), (1, 3)),
}
for k, (sz, st) in LIKE.items():
    CASES[f"empty_like_{k}"] = (lambda sz=sz, st=st: [torch.empty_like(strided(sz, st))])
    CASES[f"zeros_like_{k}"] = (lambda sz=sz, st=st: [torch.zeros_like(strided(sz, st))])
CASES["clone_size1_odd_stride"] = lambda: [strided((1, 3), (100, 1)).clone()]
CASES["clone_sliced_last"] = lambda: [strided((2, 3, 2), (12, 4, 2)).clone()]


# --- gradients at singular points ----------------------------------------------
@case
def grad_atan2_origin():
    y, x = leaf([0.0, 0.0, 1e-200, 1.0]), leaf([0.0, -0.0, 0.0, 2.0])
    return grads([torch.atan2(y, x)], [y, x])


@case
def grad_abs_zero():
    x = leaf([0.0, -0.0, -2.0])
    return grads([x.abs()], [x])


@case
def grad_sqrt_zero():
    x = leaf([0.0, 4.0])
    return grads([x.sqrt()], [x])


@case
def grad_pow_scalar_at_zero():
    x = leaf([0.0, 2.0])
    return grads([x.pow(0), x.pow(2), x.pow(0.5) * 0 + x.pow(3)], [x])


@case
def grad_pow_tensor_at_zero():
    b, e = leaf([0.0, 0.0, 0.0, 0.0, 2.0]), leaf([0.0, 0.5, 1.0, 2.0, -1.0])
    return grads([torch.pow(b, e)], [b, e])


@case
def grad_pow_scalar_base_zero():
    e = leaf([0.0, 1.0, 2.0, -1.0])
    return grads([torch.pow(0.0, e)], [e])


@case
def grad_norm_at_zero():
    x = leaf([0.0, 0.0, 0.0])
    return grads([x.norm(2), x.norm(1), x.norm(3), x.norm(0.5)], [x])


@case
def grad_norm_inf_ties():
    x = leaf([1.0, -3.0, 3.0, 2.0])
    return grads([torch.linalg.vector_norm(x, inf)], [x])


@case
def grad_hypot_origin():
    a, b = leaf([0.0, 3.0]), leaf([0.0, 4.0])
    return grads([torch.hypot(a, b)], [a, b])


@case
def grad_max_ties():
    x = leaf([1.0, 3.0, 3.0, 2.0])
    return grads([x.max()], [x])


@case
def grad_max_dim_ties():
    x = leaf([[1.0, 3.0, 3.0, 2.0]])
    return grads([x.max(1).values], [x])


@case
def grad_amax_ties():
    x = leaf([1.0, 3.0, 3.0, 2.0, 3.0])
    return grads([x.amax()], [x])


@case
def grad_maximum_tie():
    a, b = leaf([1.0, 2.0, 3.0]), leaf([1.0, 1.0, 4.0])
    return grads([torch.maximum(a, b)], [a, b])


@case
def grad_clamp_boundary():
    x = leaf([-1.0, 0.0, 0.5, 1.0, 2.0, nan])
    return grads([x.clamp(0.0, 1.0)], [x])


@case
def grad_clamp_min_boundary():
    x = leaf([-1.0, 0.0, 2.0])
    return grads([x.clamp_min(0.0)], [x])


@case
def grad_clamp_tensor_bounds():
    x, lo, hi = leaf([0.0, 1.0, 5.0]), leaf([0.0, 0.0, 0.0]), leaf([2.0, 1.0, 4.0])
    return grads([x.clamp(lo, hi)], [x, lo, hi])


@case
def grad_relu_zero():
    x = leaf([0.0, 1.0, -1.0])
    return grads([x.relu()], [x])


@case
def grad_hardtanh_boundary():
    x = leaf([-1.0, 0.0, 1.0])
    return grads([torch.nn.functional.hardtanh(x)], [x])


@case
def grad_prod_zeros():
    x, y, z = leaf([2.0, 0.0, 3.0]), leaf([2.0, 0.0, 0.0]), leaf([0.0])
    return grads([x.prod(), y.prod(), z.prod()], [x, y, z])


@case
def grad_prod_inf():
    x = leaf([2.0, inf, 3.0])
    return grads([x.prod()], [x])


@case
def grad_cumprod_zeros():
    xs = [leaf(v) for v in ([2.0, 3.0, 4.0], [2.0, 3.0, 0.0], [0.0, 3.0, 4.0], [2.0, 0.0, 3.0, 4.0])]
    return grads([x.cumprod(0) for x in xs], xs)


@case
def grad_logsumexp_neg_inf():
    x, y = leaf([-inf, -inf]), leaf([inf, 1.0])
    return grads([x.logsumexp(0), y.logsumexp(0)], [x, y])


@case
def grad_where_sqrt_zero():
    x = leaf([0.0, 4.0])
    return grads([torch.where(x > 0, x.sqrt(), torch.zeros_like(x))], [x])


@case
def grad_copysign_zero():
    a, b = leaf([0.0, 2.0]), leaf([-1.0, -1.0])
    return grads([torch.copysign(a, b)], [a, b])


@case
def grad_std_constant():
    x = leaf([2.0, 2.0, 2.0])
    return grads([x.std()], [x])


@case
def grad_var_single():
    x = leaf([2.0])
    return grads([x.var()], [x])


@case
def grad_fmod_by_zero():
    a, b = leaf([5.5]), leaf([0.0])
    return grads([torch.fmod(a, b)], [a, b])


@case
def grad_logaddexp_infs():
    a, b = leaf([-inf, inf]), leaf([-inf, inf])
    return grads([torch.logaddexp(a, b)], [a, b])


@case
def grad_rsqrt_reciprocal_zero():
    x, y = leaf([0.0]), leaf([0.0])
    return grads([x.rsqrt(), y.reciprocal()], [x, y])


# --- bernoulli: which numbers, in which order --------------------------------
P = [[0.1, 0.5, 0.9, 0.3], [0.7, 0.2, 0.6, 0.4], [0.95, 0.05, 0.5, 0.8]]


@case
def bernoulli_p_f32():
    torch.manual_seed(7)
    return [torch.bernoulli(torch.tensor(P))]


@case
def bernoulli_p_f64():
    torch.manual_seed(7)
    return [torch.bernoulli(torch.tensor(P, dtype=f64))]


@case
def bernoulli_p_noncontiguous():
    torch.manual_seed(7)
    return [torch.bernoulli(torch.tensor(P).t())]


@case
def bernoulli_inplace_noncontiguous_self():
    torch.manual_seed(7)
    x = torch.zeros(3, 4).t()
    x.bernoulli_(torch.tensor(P).t())
    return [x]


@case
def bernoulli_inplace_f64_self_f32_p():
    torch.manual_seed(7)
    x = torch.zeros(3, 4, dtype=f64)
    x.bernoulli_(torch.tensor(P))
    return [x]


@case
def bernoulli_inplace_broadcast_p():
    torch.manual_seed(7)
    x = torch.zeros(2, 4)
    x.bernoulli_(torch.tensor(P[0]))
    return [x]


@case
def bernoulli_inplace_scalar_p():
    torch.manual_seed(7)
    return [torch.zeros(3, 4).t().bernoulli_(0.4)]


@case
def bernoulli_p_out_of_range():
    torch.manual_seed(7)
    return [torch.bernoulli(torch.tensor([0.5, 1.5]))]


# --- linspace, arange, and friends -------------------------------------------
LIN = [(0.0, 1.0, 7), (-3.7, 11.3, 13), (1e-3, 1e3, 50), (538, -419, 40), (0.1, 0.7, 100), (-1.0, 1.0, 2), (2.5, 2.5, 3)]
for i, (s, e, n) in enumerate(LIN):
    CASES[f"linspace_f32_{i}"] = (lambda s=s, e=e, n=n: [torch.linspace(s, e, n)])
    CASES[f"linspace_f64_{i}"] = (lambda s=s, e=e, n=n: [torch.linspace(s, e, n, dtype=f64)])
    CASES[f"linspace_i64_{i}"] = (lambda s=s, e=e, n=n: [torch.linspace(s, e, n, dtype=torch.int64)])
    CASES[f"linspace_bf16_{i}"] = (lambda s=s, e=e, n=n: [torch.linspace(s, e, n, dtype=bf16)])
    CASES[f"linspace_f16_{i}"] = (lambda s=s, e=e, n=n: [torch.linspace(s, e, n, dtype=f16)])
CASES["linspace_neg_steps"] = lambda: [torch.linspace(0, 1, -1)]
CASES["linspace_f32_overflow"] = lambda: [torch.linspace(0, 1e40, 3)]
CASES["arange_bool"] = lambda: [torch.arange(5, dtype=torch.bool)]
CASES["arange_float_bool"] = lambda: [torch.arange(0.0, 2.0, 0.5, dtype=torch.bool)]
CASES["linspace_bool"] = lambda: [torch.linspace(0, 1, 3, dtype=torch.bool)]
CASES["unflatten_empty_sizes"] = lambda: [torch.zeros(3).unflatten(0, ())]
CASES["one_hot_empty_infer"] = lambda: [torch.nn.functional.one_hot(torch.zeros(0, dtype=torch.int64))]
CASES["one_hot_empty_zero"] = lambda: [torch.nn.functional.one_hot(torch.zeros(0, dtype=torch.int64), 0)]
CASES["one_hot_empty_three"] = lambda: [torch.nn.functional.one_hot(torch.zeros(0, dtype=torch.int64), 3)]


# --- argument forms ------------------------------------------------------------
CASES["repeat_interleave_counts"] = lambda: [torch.repeat_interleave(torch.tensor([1, 0, 3]))]
CASES["repeat_interleave_counts_i32"] = lambda: [torch.repeat_interleave(torch.tensor([2, 1], dtype=torch.int32))]
CASES["repeat_interleave_counts_empty"] = lambda: [torch.repeat_interleave(torch.zeros(0, dtype=torch.int64))]
CASES["repeat_interleave_counts_negative"] = lambda: [torch.repeat_interleave(torch.tensor([1, -1]))]
CASES["repeat_interleave_counts_2d"] = lambda: [torch.repeat_interleave(torch.tensor([[1, 2]]))]
CASES["repeat_interleave_counts_output_size"] = lambda: [torch.repeat_interleave(torch.tensor([1, 2]), output_size=3)]
CASES["repeat_interleave_counts_bad_output_size"] = lambda: [torch.repeat_interleave(torch.tensor([1, 2]), output_size=4)]
CASES["repeat_interleave_output_size"] = lambda: [torch.tensor([[1.0, 2.0], [3.0, 4.0]]).repeat_interleave(2, dim=0, output_size=4)]
CASES["repeat_interleave_bad_output_size"] = lambda: [torch.tensor([[1.0, 2.0], [3.0, 4.0]]).repeat_interleave(2, dim=0, output_size=5)]
CASES["repeat_interleave_tensor_output_size"] = lambda: [torch.tensor([1.0, 2.0]).repeat_interleave(torch.tensor([1, 2]), dim=0, output_size=3)]
CASES["repeat_interleave_tensor_bad_output_size"] = lambda: [torch.tensor([1.0, 2.0]).repeat_interleave(torch.tensor([1, 2]), dim=0, output_size=2)]
CASES["repeat_interleave_negative"] = lambda: [torch.tensor([1.0, 2.0]).repeat_interleave(-1)]
CASES["masked_scatter_inplace"] = lambda: [torch.zeros(2, 3).masked_scatter_(torch.tensor([[True, False, True], [False, True, False]]), torch.arange(1.0, 7.0))]
CASES["masked_scatter_inplace_broadcast_mask"] = lambda: [torch.zeros(2, 3).masked_scatter_(torch.tensor([True, False, True]), torch.arange(1.0, 7.0))]
CASES["masked_scatter_inplace_too_small"] = lambda: [torch.zeros(2, 3).masked_scatter_(torch.ones(2, 3, dtype=torch.bool), torch.arange(1.0, 4.0))]
CASES["index_fill_tensor_value"] = lambda: [torch.zeros(3, dtype=torch.int64).index_fill(0, torch.tensor([0, 2]), torch.tensor(5.7))]
CASES["index_fill_tensor_value_inplace"] = lambda: [torch.zeros(2, 3).index_fill_(1, torch.tensor([1]), torch.tensor(-2.5))]
CASES["index_fill_tensor_value_1d"] = lambda: [torch.zeros(3).index_fill(0, torch.tensor([0]), torch.tensor([5.0]))]
CASES["solve_left_false"] = lambda: [torch.linalg.solve(torch.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=f64), torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=f64), left=False)]
CASES["solve_left_false_batched"] = lambda: [torch.linalg.solve(torch.tensor([[[2.0, 1.0], [1.0, 3.0]], [[1.0, 0.5], [0.0, 2.0]]], dtype=f64), torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]]], dtype=f64), left=False)]
CASES["solve_left_false_vector"] = lambda: [torch.linalg.solve(torch.eye(2, dtype=f64), torch.ones(2, dtype=f64), left=False)]
SEQ = [1.0, 3.0, 3.0, 5.0, 7.0]
CASES["searchsorted_side_right"] = lambda: [torch.searchsorted(torch.tensor(SEQ), torch.tensor([3.0, 6.0]), side="right")]
CASES["searchsorted_side_left"] = lambda: [torch.searchsorted(torch.tensor(SEQ), torch.tensor([3.0, 6.0]), side="left")]
CASES["searchsorted_side_conflict"] = lambda: [torch.searchsorted(torch.tensor(SEQ), torch.tensor([3.0]), side="left", right=True)]
CASES["searchsorted_side_right_right_false"] = lambda: [torch.searchsorted(torch.tensor(SEQ), torch.tensor([3.0]), side="right", right=False)]
CASES["searchsorted_bad_side"] = lambda: [torch.searchsorted(torch.tensor(SEQ), torch.tensor([3.0]), side="middle")]
CASES["searchsorted_sorter"] = lambda: [torch.searchsorted(torch.tensor([5.0, 1.0, 3.0]), torch.tensor([2.0, 4.0, 6.0]), sorter=torch.tensor([1, 2, 0]))]
CASES["searchsorted_sorter_side_right"] = lambda: [torch.searchsorted(torch.tensor([5.0, 1.0, 3.0]), torch.tensor([3.0, 5.0]), sorter=torch.tensor([1, 2, 0]), side="right")]
CASES["searchsorted_sorter_bad_size"] = lambda: [torch.searchsorted(torch.tensor([5.0, 1.0, 3.0]), torch.tensor([2.0]), sorter=torch.tensor([1, 2]))]
CASES["searchsorted_sorter_bad_dtype"] = lambda: [torch.searchsorted(torch.tensor([5.0, 1.0, 3.0]), torch.tensor([2.0]), sorter=torch.tensor([1, 2, 0], dtype=torch.int32))]
CASES["searchsorted_sorter_out_of_range"] = lambda: [torch.searchsorted(torch.tensor([5.0, 1.0, 3.0]), torch.tensor([2.0]), sorter=torch.tensor([1, 3, 0]))]
CASES["empty_strided_f64"] = lambda: [torch.empty_strided((2, 3), (1, 2), dtype=f64).zero_()]
CASES["empty_strided_i32"] = lambda: [torch.empty_strided((2, 2), (2, 1), dtype=torch.int32).zero_()]
CASES["nansum_dtype_f64"] = lambda: [torch.nansum(torch.tensor([1.5, nan, 2.25]), dtype=f64)]
CASES["nansum_dtype_int_input"] = lambda: [torch.nansum(torch.tensor([200, 100], dtype=torch.uint8))]
CASES["nansum_dtype_i64_from_float"] = lambda: [torch.nansum(torch.tensor([1.5, 2.5]), dtype=torch.int64)]
CASES["nansum_dim_dtype"] = lambda: [torch.nansum(torch.tensor([[1.5, nan], [2.25, 1.0]]), 1, dtype=f64)]
CASES["nanmean_dtype_f64"] = lambda: [torch.nanmean(torch.tensor([1.5, nan, 2.25]), dtype=f64)]
CASES["nanmean_dim_dtype"] = lambda: [torch.nanmean(torch.tensor([[1.5, nan], [2.25, 1.0]]), 1, dtype=f64)]
CASES["nanmean_int_input"] = lambda: [torch.nanmean(torch.tensor([1, 2]), dtype=f32)]
CASES["nanmean_int_dtype"] = lambda: [torch.nanmean(torch.tensor([1.0, 2.0]), dtype=torch.int64)]
CASES["logical_and_inplace_f32"] = lambda: [torch.tensor([1.0, 0.0, nan, 2.0]).logical_and_(torch.tensor([3, 0, 1, 0]))]
CASES["logical_or_inplace_i64"] = lambda: [torch.tensor([0, 0, 5]).logical_or_(torch.tensor([0.0, 0.5, 0.0]))]
CASES["logical_xor_inplace_u8"] = lambda: [torch.tensor([0, 1, 2], dtype=torch.uint8).logical_xor_(torch.tensor([True, True, False]))]
CASES["logical_not_inplace_f16"] = lambda: [torch.tensor([0.0, 1.5], dtype=f16).logical_not_()]
CASES["logical_and_inplace_no_broadcast_self"] = lambda: [torch.tensor([1.0]).logical_and_(torch.tensor([1.0, 0.0]))]


# --- negative integer arguments PyTorch takes as signed ----------------------
CASES["chunk_negative"] = lambda: list(torch.zeros(4).chunk(-1))
CASES["chunk_zero"] = lambda: list(torch.zeros(4).chunk(0))
CASES["split_negative"] = lambda: list(torch.zeros(4).split(-1))
CASES["topk_negative"] = lambda: list(torch.zeros(4).topk(-1))
CASES["unfold_negative_size"] = lambda: [torch.zeros(4).unfold(0, -1, 1)]
CASES["unfold_zero_step"] = lambda: [torch.zeros(4).unfold(0, 2, 0)]
CASES["unfold_negative_step"] = lambda: [torch.zeros(4).unfold(0, 2, -1)]
CASES["eye_negative"] = lambda: [torch.eye(-1)]
CASES["narrow_negative_length"] = lambda: [torch.zeros(4).narrow(0, 0, -1)]
CASES["one_hot_negative_classes"] = lambda: [torch.nn.functional.one_hot(torch.tensor([0]), -2)]
CASES["randperm_negative"] = lambda: [torch.randperm(-1)]
CASES["multinomial_negative"] = lambda: [torch.multinomial(torch.ones(3), -1)]
CASES["kthvalue_zero"] = lambda: list(torch.zeros(4).kthvalue(0))
CASES["histc_negative_bins"] = lambda: [torch.zeros(4).histc(-1)]


# --- norms and reduced-precision products ------------------------------------
CASES["vector_norm_f32_overflow"] = lambda: [torch.linalg.vector_norm(torch.tensor([1e30, 1e30])), torch.linalg.vector_norm(torch.tensor([1e30, 1e30]), inf)]
CASES["vector_norm_f32_underflow"] = lambda: [torch.linalg.vector_norm(torch.tensor([1e-30, 1e-30]))]
CASES["vector_norm_f16_no_overflow"] = lambda: [torch.linalg.vector_norm(torch.tensor([300.0, 300.0], dtype=f16))]
CASES["vector_norm_bf16_overflow"] = lambda: [torch.linalg.vector_norm(torch.tensor([1e30, 1e30], dtype=bf16))]
CASES["vector_norm_f32_dtype_f64"] = lambda: [torch.linalg.vector_norm(torch.tensor([1e30, 1e30]), dtype=f64)]
CASES["sum_f16_overflow"] = lambda: [torch.full((10,), 10000.0, dtype=f16).sum(), torch.full((10,), 10000.0, dtype=f16).mean()]
CASES["mm_f16_partial_overflow"] = lambda: [torch.tensor([[300.0, 300.0, -300.0]], dtype=f16) @ torch.tensor([[300.0], [200.0], [300.0]], dtype=f16)]
CASES["mm_f16_overflow"] = lambda: [torch.tensor([[300.0, 300.0]], dtype=f16) @ torch.tensor([[300.0], [300.0]], dtype=f16)]


def norm_rows(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=g)


for n in (7, 13, 100, 1003):
    CASES[f"vector_norm_f32_order_{n}"] = (lambda n=n: [torch.linalg.vector_norm(norm_rows(n, n))])


# --- LayerNorm backward, f32: PyTorch's CPU formula, bit for bit ------------
def layer_norm_case(n, gamma, seed):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(3, n, generator=g) * 3 + 1).requires_grad_()
    dy = torch.randn(3, n, generator=g)
    w = (torch.randn(n, generator=g) + 1).requires_grad_() if gamma else None
    b = torch.randn(n, generator=g).requires_grad_() if gamma else None
    y = torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)
    ins = [x] + ([w, b] if gamma else [])
    return [y] + list(torch.autograd.grad(y, ins, dy))


for n in (1, 5, 8, 13, 16, 31, 64, 100):
    CASES[f"layer_norm_backward_{n}"] = (lambda n=n: layer_norm_case(n, False, n))
    CASES[f"layer_norm_backward_affine_{n}"] = (lambda n=n: layer_norm_case(n, True, 100 + n))


@case
def layer_norm_backward_true_zero():
    """d(sum(layer_norm(x)))/dx is 0 exactly; PyTorch's rounding noise."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4, 37, generator=g) * 5).requires_grad_()
    return list(torch.autograd.grad(torch.nn.functional.layer_norm(x, (37,)).sum(), [x]))


# --- printing with sci_mode ----------------------------------------------------
PRINT = {
    "mixed": [1.5, -2.25, nan, inf, 0.0],
    "ints_as_floats": [1.0, 2.0, 3.0],
    "neg_zero": [-0.0, 1.0],
    "zeros": [0.0, 0.0],
    "nan_only": [nan],
    "wide": [1.0, -1e-5, 12345678.0, 1e100],
    "rows": [[1.0, -2.0], [3.5, 4e-3]],
    "long_row": [float(i) * 1.5 - 7.0 for i in range(20)],
}
for k, v in PRINT.items():
    CASES[f"print_sci_{k}"] = (lambda v=v: {"print": str(torch.tensor(v))})
CASES["print_sci_ints"] = lambda: {"print": str(torch.tensor([1, 2, 300]))}
CASES["print_sci_0d"] = lambda: {"print": str(torch.tensor(3.5))}
CASES["print_sci_f16"] = lambda: {"print": str(torch.tensor([0.1, 2.5], dtype=f16))}


def enc(v):
    if isinstance(v, float) and (v != v or v in (inf, -inf)):
        return str(v)
    return v


def tensor_json(t):
    t = t.detach()
    return {
        "shape": list(t.shape),
        "strides": list(t.stride()),
        "dtype": str(t.dtype).replace("torch.", ""),
        "bits": [enc(v) for v in t.double().reshape(-1).tolist()] if t.dtype != torch.bool else [int(v) for v in t.reshape(-1).tolist()],
        "neg": [math.copysign(1.0, v) < 0 for v in t.double().reshape(-1).tolist()],
    }


out = []
for name, fn in CASES.items():
    sci = name.startswith("print_sci")
    if sci:
        torch.set_printoptions(sci_mode=True, precision=2 if name == "print_sci_wide" else 4)
    try:
        r = fn()
        if isinstance(r, dict):
            out.append({"name": name, "print": r["print"]})
        else:
            out.append({"name": name, "ok": [None if t is None else tensor_json(t) for t in r]})
    except Exception as e:
        msg = str(e).split("\nException raised from")[0]
        out.append({"name": name, "error": msg.split("\n")[-1] if msg.strip() else type(e).__name__})
    finally:
        if sci:
            torch.set_printoptions(profile="default")
            torch.set_printoptions(sci_mode=None)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "edge_cases.json")
with open(path + ".part", "w") as f:
    json.dump({"torch": torch.__version__, "cases": out}, f, indent=0)
os.replace(path + ".part", path)
print(f"{len(out)} cases in {path}")
