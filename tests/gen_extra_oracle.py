"""Writes tests/oracle_extra/core.json: PyTorch reference values for core
tensor ops that the shared oracle (tests/oracle/*.json) does not cover.

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_extra_oracle.py

The format is the shared oracle's (tests/oracle/README.md), with the
extensions described in tests/oracle_extra/README.md (more dtypes, `seed`,
tensor items in `__getitem__` indices, kinds "chain" and "error").
"""

import os

from oracle_common import *  # noqa: F401,F403

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle_extra", "core.json")

T = torch.tensor
f64 = torch.float64

# ---------------------------------------------------------------- sort / topk
ties = T([3.0, NAN, 1.0, 3.0, -0.0, 0.0, NAN, -INF, INF, 1.0, 2.0, 1.0])
case("sort_ties_nan", "torch.sort", {"input": ties}, dim=-1, stable=True)
case("sort_ties_nan_desc", "torch.sort", {"input": ties}, dim=0, descending=True, stable=True)
rounded = torch.round(g(1, 4, 6) * 2) / 2
case("sort_2d_dim0_ties", "torch.sort", {"input": rounded}, dim=0, stable=True)
case("sort_2d_dim1_desc_ties", "torch.sort", {"input": rounded}, dim=1, descending=True, stable=True)
case("sort_int_ties_desc", "torch.sort", {"input": gi(2, -3, 4, 3, 7)}, dim=-1, descending=True, stable=True)
case("sort_f64_3d_dim1", "torch.sort", {"input": g(3, 2, 5, 3, dtype=f64)}, dim=1)
case("argsort_ties_nan", "torch.argsort", {"input": ties}, dim=0, stable=True)
case("argsort_desc_ties", "torch.argsort", {"input": rounded}, dim=-1, descending=True, stable=True)
case("argsort_int32", "torch.argsort", {"input": gi(4, 0, 5, 10, dtype=torch.int32)}, dim=0, stable=True)
distinct = g(5, 3, 8)
case("topk_largest_k3", "torch.topk", {"input": distinct}, k=3, dim=-1)
case("topk_smallest_k2_dim0", "torch.topk", {"input": distinct}, k=2, dim=0, largest=False)
case("topk_nan_largest", "torch.topk", {"input": T([[1.0, NAN, 3.0, -1.0], [2.0, 0.5, -INF, 7.0]])}, k=2, dim=1)
case("topk_int_smallest", "torch.topk", {"input": T([5, -3, 9, 0, 2, 8])}, k=3, largest=False)
case("topk_k_full", "torch.topk", {"input": g(6, 5)}, k=5)

# ------------------------------------------------------------- cumsum / cumprod
case("cumsum_dim1", "torch.cumsum", {"input": g(7, 3, 5)}, dim=1)
case("cumsum_dim0_3d", "torch.cumsum", {"input": g(8, 4, 2, 3)}, dim=0)
case("cumsum_neg_dim_f64", "torch.cumsum", {"input": g(9, 2, 6, dtype=f64)}, dim=-1)
case("cumsum_int32_to_int64", "torch.cumsum", {"input": gi(10, -5, 6, 3, 4, dtype=torch.int32)}, dim=1)
case("cumsum_bool_to_int64", "torch.cumsum", {"input": gi(11, 0, 2, 8).bool()}, dim=0)
case("cumsum_uint8_to_int64", "torch.cumsum", {"input": T([200, 100, 50, 7], dtype=torch.uint8)}, dim=0)
case("cumprod_dim1", "torch.cumprod", {"input": g(12, 3, 5) * 0.5 + 1}, dim=1)
case("cumprod_zero_nan", "torch.cumprod", {"input": T([2.0, 0.0, 3.0, NAN, 1.0])}, dim=0)
case("cumprod_int_to_int64", "torch.cumprod", {"input": gi(13, -3, 4, 2, 6, dtype=torch.int32)}, dim=-1)
case("cumprod_int64_f64", "torch.cumprod", {"input": g(14, 4, 3, dtype=f64)}, dim=0)

# ---------------------------------------------------------------- prod / all / any
near1 = 1 + 0.3 * g(15, 3, 4, 5)
case("prod_all", "torch.prod", {"input": near1})
case("prod_dim1", "torch.prod", {"input": near1}, dim=1)
case("prod_dim-1_keepdim", "torch.prod", {"input": near1}, dim=-1, keepdim=True)
case("prod_int_to_int64", "torch.prod", {"input": gi(16, -3, 4, 3, 4, dtype=torch.int32)}, dim=0)
case("prod_int_all", "torch.prod", {"input": T([[2, -3], [4, 5]])})
case("prod_bool", "torch.prod", {"input": T([True, True, False])})
case("prod_f64_with_zero", "torch.prod", {"input": T([[1.5, 0.0, 2.0], [3.0, -1.0, 0.5]], dtype=f64)}, dim=1)
zs = T([[0.0, 1.0, 2.0], [3.0, 0.5, -1.0], [0.0, 0.0, 0.0], [NAN, 1.0, 2.0]])
case("all_float", "torch.all", {"input": zs})
case("all_dim1", "torch.all", {"input": zs}, dim=1)
case("any_dim1_keepdim", "torch.any", {"input": zs}, dim=1, keepdim=True)
case("any_dim0", "torch.any", {"input": zs}, dim=0)
case("any_int", "torch.any", {"input": T([0, 0, 3])})
case("all_bool_dim0", "torch.all", {"input": T([[True, False], [True, True]])}, dim=0)
case("all_uint8", "torch.all", {"input": T([1, 2, 255], dtype=torch.uint8)})
case("any_all_zero", "torch.any", {"input": torch.zeros(2, 3)})

# ---------------------------------------------------------------- amin / min / max / argmin
tied = T([[1.0, 3.0, 3.0, -2.0], [5.0, -2.0, 5.0, -2.0], [0.0, 0.0, 0.0, 0.0]])
case("amin_dim1_ties", "torch.amin", {"input": tied}, dim=1)
case("amin_dims01_keepdim", "torch.amin", {"input": g(17, 2, 3, 4)}, dim=[0, 1], keepdim=True)
case("amin_int", "torch.amin", {"input": gi(18, -9, 9, 3, 5)}, dim=-1)
case("amax_nan", "torch.amax", {"input": T([[1.0, NAN, 2.0], [3.0, 1.0, -INF]])}, dim=1)
case("max_dim1_ties", "torch.max", {"input": tied}, dim=1)
case("min_dim1_ties", "torch.min", {"input": tied}, dim=1)
case("min_dim0_ties_keepdim", "torch.min", {"input": tied}, dim=0, keepdim=True)
case("max_dim_nan", "torch.max", {"input": T([[1.0, NAN, 5.0, NAN], [2.0, 2.0, 1.0, 0.0]])}, dim=1)
case("min_dim_nan", "torch.min", {"input": T([[1.0, NAN, -5.0], [2.0, 2.0, 1.0]])}, dim=-1)
case("max_int_dim_ties", "torch.max", {"input": T([[4, 7, 7, 1], [-1, -1, -3, -1]])}, dim=1)
case("min_int_all", "torch.min", {"input": gi(19, -50, 50, 4, 5)})
case("max_all_nan", "torch.max", {"input": T([1.0, NAN, 3.0])})
case("max_bool_dim", "torch.max", {"input": T([[False, True, True], [False, False, False]])}, dim=1)
case("argmin_ties", "torch.argmin", {"input": tied}, dim=1)
case("argmin_all_ties", "torch.argmin", {"input": T([[3.0, -1.0], [-1.0, 2.0]])})
case("argmin_keepdim_dim0", "torch.argmin", {"input": tied}, dim=0, keepdim=True)
case("argmin_nan", "torch.argmin", {"input": T([[1.0, NAN, -5.0], [2.0, 2.0, 1.0]])}, dim=1)
case("argmax_int_ties", "torch.argmax", {"input": T([[4, 7, 7, 1], [-1, -1, -3, -1]])}, dim=1)

# ---------------------------------------------------------------- norm
nx = g(20, 3, 5)
nx[1, 2] = 0.0
nx[0, 0] = 0.0
for p in [1, 2, INF, -INF, 0, 3]:
    pn = {1: "1", 2: "2", INF: "inf", -INF: "-inf", 0: "0", 3: "3"}[p]
    case(f"norm_p{pn}_all", "torch.norm", {"input": nx}, p=float(p))
    case(f"norm_p{pn}_dim1", "torch.norm", {"input": nx}, p=float(p), dim=1)
case("norm_p2_dim0_keepdim", "torch.norm", {"input": nx}, p=2.0, dim=0, keepdim=True)
case("norm_p3_dims12_3d", "torch.norm", {"input": g(21, 2, 3, 4)}, p=3.0, dim=[1, 2])
case("norm_p1.5_dim-1", "torch.norm", {"input": nx}, p=1.5, dim=-1)
case("norm_p2_f64", "torch.norm", {"input": g(22, 4, 4, dtype=f64)}, p=2.0, dim=1)

# ---------------------------------------------------------------- var / std
vx = g(23, 4, 5, 3) + 2
case("var_corr0_dim1", "torch.var", {"input": vx}, dim=1, correction=0)
case("var_corr2_dim1", "torch.var", {"input": vx}, dim=1, correction=2)
case("var_corr2_all", "torch.var", {"input": vx}, correction=2)
case("var_corr0_dims02_keepdim", "torch.var", {"input": vx}, dim=[0, 2], correction=0, keepdim=True)
case("std_corr0_dim-1", "torch.std", {"input": vx}, dim=-1, correction=0)
case("std_corr2_dim0", "torch.std", {"input": vx}, dim=0, correction=2)
case("std_corr2_all_f64", "torch.std", {"input": vx.double()}, correction=2)
case("var_corr1_f64_dim1", "torch.var", {"input": vx.double()}, dim=1)
case("var_corr_exceeds_n", "torch.var", {"input": g(24, 2, 2)}, dim=1, correction=3, note="n - correction < 0 -> inf")

# ---------------------------------------------------------------- clamp
cx = T([-3.0, -1.5, -0.0, 0.5, 1.0, 2.5, 7.0, NAN, INF, -INF])
case("clamp_min_only", "torch.clamp", {"input": cx}, min=-1.0)
case("clamp_max_only", "torch.clamp", {"input": cx}, max=1.0)
case("clamp_both", "torch.clamp", {"input": cx}, min=-1.0, max=2.0)
case("clamp_min_gt_max", "torch.clamp", {"input": cx}, min=3.0, max=1.0)
case("clamp_int", "torch.clamp", {"input": T([-9, -2, 0, 3, 8, 12])}, min=-2, max=5)
case("clamp_int_float_bound", "torch.clamp", {"input": T([-9, -2, 0, 3, 8])}, min=-2.5, note="int + float bound -> float32")
case("clamp_int32_max", "torch.clamp", {"input": T([-9, 3, 8], dtype=torch.int32)}, max=4)
case("clamp_uint8", "torch.clamp", {"input": T([0, 10, 200, 255], dtype=torch.uint8)}, min=5, max=150)
case("clamp_f64", "torch.clamp", {"input": g(25, 6, dtype=f64)}, min=-0.5, max=0.5)

# ---------------------------------------------------------------- rounding / sign
rx = T([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.5, -3.7, 2.2, 0.49999997, -0.49999997, 1e20, NAN, INF, -INF])
for op in ["floor", "ceil", "round", "trunc", "sign"]:
    case(f"{op}_edges", f"torch.{op}", {"input": rx})
    case(f"{op}_f64", f"torch.{op}", {"input": (g(26, 8, dtype=f64) * 3)})
for op in ["floor", "round", "sign"]:
    case(f"{op}_int", f"torch.{op}", {"input": T([-3, 0, 4])})
case("sign_int32", "torch.sign", {"input": T([-7, 0, 2], dtype=torch.int32)})
case("round_half_f16", "torch.round", {"input": T([0.5, 1.5, 2.5, -2.5, 1000.5], dtype=torch.float16)})

# ---------------------------------------------------------------- log1p, expm1, rsqrt, reciprocal, erf
ux = T([-1.0, -0.999, -0.5, -1e-8, -0.0, 0.0, 1e-10, 1e-5, 0.3, 1.0, 10.0, 100.0, NAN, INF, -INF, -2.0])
for op in ["log1p", "expm1", "rsqrt", "reciprocal", "erf"]:
    case(f"{op}_edges", f"torch.{op}", {"input": ux})
    case(f"{op}_f64", f"torch.{op}", {"input": torch.cat([ux.double(), g(27, 8, dtype=f64) * 4])})
    case(f"{op}_rand", f"torch.{op}", {"input": g(28, 5, 4) * 2})
case("expm1_large", "torch.expm1", {"input": T([80.0, 88.0, 89.0, -80.0, -100.0])})
case("erf_large", "torch.erf", {"input": T([3.0, 4.0, 6.0, -6.0, 0.001, -0.001])})
case("log1p_int", "torch.log1p", {"input": T([0, 1, 5])}, note="int -> float32")
case("reciprocal_int", "torch.reciprocal", {"input": T([1, -2, 0, 4])}, note="int -> float32")

# ---------------------------------------------------------------- softplus
sx = torch.cat([g(29, 12) * 5, T([20.0, 25.0, -30.0, 0.0])])
case("softplus_default", "torch.nn.functional.softplus", {"input": sx})
case("softplus_beta2_thr5", "torch.nn.functional.softplus", {"input": sx}, beta=2.0, threshold=5.0)
case("softplus_beta0.5_thr1", "torch.nn.functional.softplus", {"input": sx}, beta=0.5, threshold=1.0)
case("softplus_f64", "torch.nn.functional.softplus", {"input": sx.double()}, beta=3.0, threshold=10.0)

# ---------------------------------------------------------------- comparisons
ca = T([[1.0, NAN, 3.0, -0.0], [2.0, 2.0, INF, -1.0]])
cb = T([[1.0, NAN, 2.0, 0.0], [3.0, 2.0, INF, -2.0]])
for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
    case(f"{op}_tensor", f"torch.{op}", {"input": ca, "other": cb})
    case(f"{op}_scalar", f"torch.{op}", {"input": ca}, other=2.0)
case("eq_int32_int64", "torch.eq", {"input": T([1, 2, 3], dtype=torch.int32), "other": T([1, 5, 3])})
case("lt_int_float_scalar", "torch.lt", {"input": T([1, 2, 3])}, other=2.5)
case("ge_f32_f64_broadcast", "torch.ge", {"input": T([[0.1], [0.2]]), "other": T([0.1, 0.2, 0.3], dtype=f64)},
     note="0.1f32 vs 0.1f64: compared in f64")
case("gt_uint8_int", "torch.gt", {"input": T([0, 100, 255], dtype=torch.uint8), "other": T([-1, 50, 300])})
case("eq_uint8_neg_scalar", "torch.eq", {"input": T([0, 255, 1], dtype=torch.uint8)}, other=-1,
     note="the scalar is cast to uint8 (255)")
case("lt_uint8_neg_scalar", "torch.lt", {"input": T([0, 255, 1], dtype=torch.uint8)}, other=-1)
case("ne_bool_int", "torch.ne", {"input": T([True, False, True]), "other": T([1, 0, 2])})
case("le_f16_scalar", "torch.le", {"input": T([0.1, 0.2, 0.3], dtype=torch.float16)}, other=0.2)

# ---------------------------------------------------------------- logical
la = T([0.0, NAN, 2.0, -0.0, 1.0, 0.0])
lb = T([1, 0, 3, 0, 0, 0])
for op in ["logical_and", "logical_or", "logical_xor"]:
    case(f"{op}_float_int", f"torch.{op}", {"input": la, "other": lb})
    case(f"{op}_bool_broadcast", f"torch.{op}", {"input": T([[True], [False]]), "other": T([True, False, True])})
case("logical_not_float", "torch.logical_not", {"input": la})
case("logical_not_int", "torch.logical_not", {"input": lb})
case("logical_not_bool", "torch.logical_not", {"input": T([True, False])})

# ---------------------------------------------------------------- where
cond = T([[True, False, True], [False, False, True]])
wx = g(30, 2, 3)
case("where_scalar_other", "torch.where", {"condition": cond, "input": wx}, other=0.0)
case("where_scalar_input", "torch.where", {"condition": cond, "other": wx}, self=-1.5)
case("where_int_scalar_float", "torch.where", {"condition": cond, "input": T([[1, 2, 3], [4, 5, 6]])}, other=0.5,
     note="int64 tensor with a float scalar -> float32")
case("where_int_scalar_int", "torch.where", {"condition": cond, "input": T([1, 2, 3], dtype=torch.int32)}, other=7)
case("where_broadcast_mixed", "torch.where",
     {"condition": T([[True], [False]]), "input": T([1.0, 2.0], dtype=f64), "other": T([[3], [4]])})

# ---------------------------------------------------------------- div rounding
da = T([7.0, -7.0, 7.5, -7.5, 0.0, -0.0, 1.0, -1.0, 5.0, NAN])
db = T([2.0, 2.0, -2.0, -2.0, -3.0, 3.0, 0.0, 0.0, INF, 1.0])
for mode in ["trunc", "floor"]:
    case(f"div_{mode}_float", "torch.div", {"input": da, "other": db}, rounding_mode=mode)
    case(f"div_{mode}_int", "torch.div", {"input": T([7, -7, 7, -7, 0, 9, -9]), "other": T([2, 2, -2, -2, 5, 3, -4])},
         rounding_mode=mode)
    case(f"div_{mode}_int_scalar", "torch.div", {"input": T([7, -7, 8, -8, 0])}, other=-3, rounding_mode=mode)
    case(f"div_{mode}_int32_float_scalar", "torch.div", {"input": T([7, -7, 8], dtype=torch.int32)}, other=2.5,
         rounding_mode=mode)
    case(f"div_{mode}_f64", "torch.div", {"input": g(31, 6, dtype=f64) * 10, "other": g(32, 6, dtype=f64)},
         rounding_mode=mode)
case("div_true_int", "torch.div", {"input": T([7, -7, 1]), "other": T([2, 2, 3])})
case("div_true_int_by_zero", "torch.div", {"input": T([1, -1, 0]), "other": T([0, 0, 0])})

# ---------------------------------------------------------------- integer arithmetic
ia = T([[5, -3, 0], [12, 7, -8]])
ib = T([[2, 4, -6], [-3, 0, 9]])
case("add_int", "torch.add", {"input": ia, "other": ib})
case("add_int_alpha", "torch.add", {"input": ia, "other": ib}, alpha=3)
case("sub_int_alpha", "torch.sub", {"input": ia, "other": ib}, alpha=-2)
case("mul_int", "torch.mul", {"input": ia, "other": ib})
case("mul_int32_scalar", "torch.mul", {"input": ia.int()}, other=-4)
case("pow_int_scalar", "torch.pow", {"input": ia}, exponent=3)
case("pow_int_tensor", "torch.pow", {"input": ia, "exponent": ib.abs() % 4})
case("pow_int_scalar_base", "torch.pow", {"exponent": T([0, 1, 5, 10])}, self=2)
case("add_uint8_wrap", "torch.add", {"input": T([200, 250, 3], dtype=torch.uint8), "other": T([100, 10, 4], dtype=torch.uint8)})
case("sub_uint8_wrap", "torch.sub", {"input": T([3, 0], dtype=torch.uint8)}, other=5)
case("mul_int32_tensors", "torch.mul", {"input": ia.int(), "other": ib.int()})

# ---------------------------------------------------------------- type promotion
case("promo_int32_plus_float_scalar", "torch.add", {"input": T([1, 2, 3], dtype=torch.int32)}, other=2.5)
case("promo_int32_plus_int_scalar", "torch.add", {"input": T([1, 2, 3], dtype=torch.int32)}, other=2)
case("promo_uint8_plus_int64", "torch.add", {"input": T([1, 200], dtype=torch.uint8), "other": T([-5, 100])})
case("promo_bool_plus_int", "torch.add", {"input": T([True, False]), "other": T([3, 4])})
case("promo_bool_plus_int_scalar", "torch.add", {"input": T([True, False])}, other=2)
case("promo_bool_plus_bool", "torch.add", {"input": T([True, False, False]), "other": T([True, True, False])})
case("promo_bool_mul_float_scalar", "torch.mul", {"input": T([True, False])}, other=1.5)
case("promo_f16_plus_f32", "torch.add", {"input": T([1.0, 2.5, 0.1], dtype=torch.float16), "other": T([0.1, 0.2, 0.3])})
case("promo_f16_plus_bf16", "torch.add",
     {"input": T([1.0, 2.5, 0.1], dtype=torch.float16), "other": T([0.1, 0.2, 0.3], dtype=torch.bfloat16)})
case("promo_0d_f64_plus_f32", "torch.add", {"input": T(0.1, dtype=f64), "other": T([1.0, 2.0, 1e-8])},
     note="a 0-d f64 does not widen an f32 tensor")
case("promo_int_plus_0d_f64", "torch.add", {"input": T([1, 2]), "other": T(1.5, dtype=f64)},
     note="a 0-d float of a higher category decides")
case("promo_int_plus_0d_f16", "torch.mul", {"input": T([1, 3]), "other": T(0.1, dtype=torch.float16)})
case("promo_f16_plus_0d_f32", "torch.add", {"input": T([1.0, 2.0], dtype=torch.float16), "other": T(0.1)})
case("promo_uint8_mul_0d_int64", "torch.mul", {"input": T([100, 3], dtype=torch.uint8), "other": T(3)})
case("promo_int32_plus_0d_int64", "torch.add", {"input": T([2**31 - 1, 0], dtype=torch.int32), "other": T(1)},
     note="stays int32 and wraps")
case("promo_f16_plus_float_scalar", "torch.add", {"input": T([1.0, 2.0], dtype=torch.float16)}, other=0.1)
case("promo_bf16_mul_f64", "torch.mul", {"input": T([1.5, -2.0], dtype=torch.bfloat16), "other": T([0.1, 0.3], dtype=f64)})

# ---------------------------------------------------------------- sum / mean
case("sum_int32_to_int64", "torch.sum", {"input": T([[2**30, 2**30], [2**30, 5]], dtype=torch.int32)})
case("sum_bool", "torch.sum", {"input": T([[True, False, True], [True, True, True]])})
case("sum_bool_dim1", "torch.sum", {"input": T([[True, False, True], [True, True, True]])}, dim=1)
case("sum_uint8", "torch.sum", {"input": T([200, 200, 200], dtype=torch.uint8)})
case("sum_int64_dims", "torch.sum", {"input": gi(33, -100, 100, 2, 3, 4)}, dim=[0, 2], keepdim=True)
case("sum_f64", "torch.sum", {"input": g(34, 4, 5, dtype=f64)}, dim=0)
case("mean_dims02", "torch.mean", {"input": g(35, 3, 4, 5)}, dim=[0, 2])
case("mean_dims-1-2_keepdim", "torch.mean", {"input": g(36, 2, 3, 4)}, dim=[-1, -2], keepdim=True)
case("mean_dims012", "torch.mean", {"input": g(37, 2, 3, 4)}, dim=[0, 1, 2])
case("mean_f64_dims01", "torch.mean", {"input": g(38, 3, 4, 2, dtype=f64)}, dim=[0, 1])

# ---------------------------------------------------------------- scatter / one_hot / tril / triu
sx0 = g(39, 3, 5)
src = g(40, 2, 5)
case("scatter_dim0", "torch.scatter", {"input": sx0, "index": T([[0, 1, 2, 0, 1], [2, 0, 1, 1, 0]]), "src": src}, dim=0)
case("scatter_dim1", "torch.scatter", {"input": sx0, "index": T([[4, 0], [1, 3], [2, 2 - 2]]), "src": g(41, 3, 3)}, dim=1,
     note="index smaller than src")
case("scatter_value", "torch.scatter", {"input": sx0, "index": T([[0, 1], [2, 3]])}, dim=1, value=-7.5)
case("scatter_value_int", "torch.scatter", {"input": torch.zeros(2, 4, dtype=torch.int64), "index": T([[3], [0]])},
     dim=1, value=9)
case("scatter_neg_dim", "torch.scatter", {"input": sx0, "index": T([[1], [4], [0]]), "src": g(42, 3, 1)}, dim=-1)
case("scatter_add_repeated", "torch.scatter_add",
     {"input": torch.zeros(3, 4), "index": T([[0, 0, 2, 0], [0, 2, 2, 1], [1, 1, 0, 2]]), "src": g(43, 3, 4)}, dim=0)
case("scatter_add_dim1_repeated", "torch.scatter_add",
     {"input": sx0, "index": T([[0, 0, 0], [4, 4, 1], [2, 3, 2]]), "src": g(44, 3, 3)}, dim=1)
case("scatter_add_int", "torch.scatter_add",
     {"input": T([10, 20, 30]), "index": T([0, 0, 2, 0]), "src": T([1, 2, 3, 4])}, dim=0)
case("one_hot_classes", "torch.nn.functional.one_hot", {"input": T([0, 3, 1, 3])}, num_classes=5)
case("one_hot_infer", "torch.nn.functional.one_hot", {"input": T([[0, 2], [1, 1]])})
tx = g(45, 4, 6)
for k in [0, 1, -1, 3, -5]:
    case(f"tril_diag{k}", "torch.tril", {"input": tx}, diagonal=k)
    case(f"triu_diag{k}", "torch.triu", {"input": tx}, diagonal=k)
case("tril_batched_int", "torch.tril", {"input": gi(46, 1, 9, 2, 3, 3)}, diagonal=-1)
case("triu_tall", "torch.triu", {"input": g(47, 5, 3)}, diagonal=1)

# ---------------------------------------------------------------- advanced indexing
ax = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5) * 0.5
getitem("idx_two_broadcast", ax, [T([[0], [2]]), T([1, 3, 0])])
getitem("idx_non_adjacent", ax, [T([0, 2, 1]), slice(None, None, None), T([4, 0, 1])],
        note="separated index tensors: the index dims go first")
getitem("idx_int_slice_tensor", ax, [1, slice(None, None, None), T([0, 4])],
        note="an int selects first (PyTorch, unlike NumPy)")
getitem("idx_bool_mask_full", ax, [ax.remainder(3) == 0])
getitem("idx_bool_mask_2d", ax, [T([[True, False, True, False], [False, False, False, True], [True, True, False, False]])])
getitem("idx_bool_mask_dim1", ax, [slice(None, None, None), T([True, False, False, True])])
getitem("idx_negative", ax, [T([-1, 0, -3])])
getitem("idx_negative_2d_last", ax, [Ellipsis, T([[-1, -5], [2, -2]])])
getitem("idx_slices_mixed", ax, [slice(1, None, None), T([3, -1]), slice(None, None, 2)])
getitem("idx_newaxis_tensor", ax, [None, T([2, 0]), slice(None, 3, None)])
getitem("idx_int64_values", T([10, 20, 30, 40]), [T([[3, 0], [1, 1]])])
case("index_select_neg_dim", "torch.index_select", {"input": ax, "index": T([4, 0, 0, 2])}, dim=-1)
case("index_select_dim1_repeat", "torch.index_select", {"input": ax, "index": T([3, 3, 1])}, dim=1)
error_case("index_select_neg_index", "torch.index_select", {"input": ax, "index": T([-1, 0])}, dim=0,
           note="index_select rejects negative indices")
case("gather_dim-1", "torch.gather", {"input": ax, "index": T([[[4, 0], [1, 1], [2, 3], [0, 0]]] * 3)}, dim=-1)
case("gather_dim-1_smaller", "torch.gather", {"input": g(48, 3, 4), "index": T([[3], [0]])}, dim=-1)

# ---------------------------------------------------------------- factories
case("arange_int", "torch.arange", start=0, end=10, step=3)
case("arange_int_neg_step", "torch.arange", start=10, end=-5, step=-3)
case("arange_float", "torch.arange", start=0.0, end=1.0, step=0.1)
case("arange_float_neg_step", "torch.arange", start=1.0, end=-1.0, step=-0.25)
case("arange_f64", "torch.arange", start=0.5, end=3.0, step=0.3, dtype=f64)
case("arange_int32", "torch.arange", start=-3, end=4, step=2, dtype=torch.int32)
case("arange_int64_float_step", "torch.arange", start=0, end=5.5, step=1.5, dtype=torch.int64,
     note="the step is cast to int64 (1): size 4, values 0..3")
case("arange_end_only", "torch.arange", end=5)
case("linspace_5", "torch.linspace", start=0.0, end=1.0, steps=5)
case("linspace_neg", "torch.linspace", start=-2.0, end=3.0, steps=7)
case("linspace_one", "torch.linspace", start=3.0, end=9.0, steps=1)
case("linspace_f64", "torch.linspace", start=-1.0, end=1.0, steps=11, dtype=f64)
case("linspace_int64", "torch.linspace", start=-1.0, end=1.0, steps=6, dtype=torch.int64)
case("linspace_desc", "torch.linspace", start=5.0, end=-5.0, steps=9)
case("eye_rect_wide", "torch.eye", n=3, m=5)
case("eye_rect_tall", "torch.eye", n=4, m=2)
case("eye_int64", "torch.eye", n=3, dtype=torch.int64)

# ---------------------------------------------------------------- linear algebra
case("dot_f32", "torch.dot", {"input": g(49, 7), "tensor": g(50, 7)})
case("dot_f64", "torch.dot", {"input": g(51, 9, dtype=f64), "tensor": g(52, 9, dtype=f64)})
case("dot_int64", "torch.dot", {"input": T([1, -2, 3]), "tensor": T([4, 5, -6])})
case("outer_f32", "torch.outer", {"input": g(53, 4), "vec2": g(54, 3)})
case("outer_int", "torch.outer", {"input": T([1, 2]), "vec2": T([3, -4, 5])})
case("mv_f32", "torch.mv", {"input": g(55, 3, 5), "vec": g(56, 5)})
case("mv_f64", "torch.mv", {"input": g(57, 4, 2, dtype=f64), "vec": g(58, 2, dtype=f64)})
case("matmul_1d_3d", "torch.matmul", {"input": g(59, 4), "other": g(60, 2, 4, 3)})
case("matmul_3d_1d", "torch.matmul", {"input": g(61, 2, 3, 4), "other": g(62, 4)})
case("matmul_f64", "torch.matmul", {"input": g(63, 5, 7, dtype=f64), "other": g(64, 7, 3, dtype=f64)})
case("matmul_f64_batched_broadcast", "torch.matmul", {"input": g(65, 2, 1, 3, 4, dtype=f64), "other": g(66, 3, 4, 2, dtype=f64)})
case("matmul_int64", "torch.matmul", {"input": gi(67, -5, 6, 3, 4), "other": gi(68, -5, 6, 4, 2)})
case("matmul_int64_batched", "torch.matmul", {"input": gi(69, -5, 6, 2, 3, 4), "other": gi(70, -5, 6, 2, 4, 3)})
case("bmm_f32", "torch.bmm", {"input": g(71, 3, 2, 5), "mat2": g(72, 3, 5, 4)})
case("bmm_f64", "torch.bmm", {"input": g(73, 2, 3, 3, dtype=f64), "mat2": g(74, 2, 3, 2, dtype=f64)})
case("mm_int32", "torch.mm", {"input": gi(75, -5, 6, 2, 3, dtype=torch.int32), "mat2": gi(76, -5, 6, 3, 2, dtype=torch.int32)})

# ---------------------------------------------------------------- softmax f64
smx = g(77, 3, 6, dtype=f64) * 3
case("softmax_f64_dim-1", "torch.softmax", {"input": smx}, dim=-1)
case("softmax_f64_dim0", "torch.softmax", {"input": smx}, dim=0)
case("log_softmax_f64_dim1", "torch.log_softmax", {"input": smx}, dim=1)
case("log_softmax_f64_large", "torch.log_softmax", {"input": T([[1000.0, 0.0, -1000.0], [1e-300, 2e-300, 0.0]], dtype=f64)}, dim=1)
case("softmax_f64_inf", "torch.softmax", {"input": T([[-INF, 0.0, 1.0], [-INF, -INF, 2.0]], dtype=f64)}, dim=-1)

# ---------------------------------------------------------------- f16 / bf16
for dt, nm in [(torch.float16, "f16"), (torch.bfloat16, "bf16")]:
    ha = g(78, 3, 5, dtype=dt)
    hb = g(79, 3, 5, dtype=dt)
    case(f"exp_{nm}", "torch.exp", {"input": ha})
    case(f"add_{nm}", "torch.add", {"input": ha, "other": hb})
    case(f"add_{nm}_alpha", "torch.add", {"input": ha, "other": hb}, alpha=0.5)
    case(f"mul_{nm}", "torch.mul", {"input": ha, "other": hb})
    case(f"mul_{nm}_scalar", "torch.mul", {"input": ha}, other=3.3)
    case(f"sum_{nm}", "torch.sum", {"input": g(80, 64, dtype=dt)})
    case(f"sum_{nm}_dim1", "torch.sum", {"input": g(81, 4, 50, dtype=dt)}, dim=1)
    case(f"mean_{nm}_dim0", "torch.mean", {"input": g(82, 40, 3, dtype=dt)}, dim=0)
    case(f"tanh_{nm}", "torch.tanh", {"input": ha})
    case(f"sqrt_{nm}", "torch.sqrt", {"input": ha.abs()})
    case(f"div_{nm}", "torch.div", {"input": ha, "other": hb})
    case(f"max_{nm}_dim", "torch.max", {"input": ha}, dim=1)

# ---------------------------------------------------------------- casts
cf = T([-2.7, -1.0, -0.5, -0.0, 0.4, 0.9, 1.5, 2.5, 199.99, -127.9])
case("to_int64_trunc", "torch.Tensor.to", {"self": cf}, dtype=torch.int64)
case("to_int32_trunc", "torch.Tensor.to", {"self": cf}, dtype=torch.int32)
case("to_uint8_negative", "torch.Tensor.to", {"self": T([-1.0, -2.7, -0.5, 0.9, 200.5, -255.0])}, dtype=torch.uint8,
     note="negative floats wrap through int64 on x86 (-1.0 -> 255)")
case("to_bool_from_int", "torch.Tensor.to", {"self": T([0, 3, -1, 0])}, dtype=torch.bool)
case("to_bool_from_float", "torch.Tensor.to", {"self": T([0.0, -0.0, 0.1, NAN, INF])}, dtype=torch.bool)
case("to_float_from_bool", "torch.Tensor.to", {"self": T([True, False, True])}, dtype=torch.float32)
case("to_f64_from_bool", "torch.Tensor.to", {"self": T([True, False])}, dtype=f64)
case("to_int_from_bool", "torch.Tensor.to", {"self": T([True, False])}, dtype=torch.int64)
case("to_f16_round", "torch.Tensor.to", {"self": T([0.1, 1.0 / 3, 65504.0, 70000.0, 1e-8, 2049.0, 2051.0, -0.0])},
     dtype=torch.float16)
case("to_bf16_round", "torch.Tensor.to", {"self": T([0.1, 1.0 / 3, 3e38, 1e-40, 257.0, 259.0, NAN])}, dtype=torch.bfloat16)
case("to_f32_from_f64", "torch.Tensor.to", {"self": T([0.1, 1e-50, 1e50, 1.0 / 3], dtype=f64)}, dtype=torch.float32)
case("to_f16_from_int", "torch.Tensor.to", {"self": T([1, 2049, -70000])}, dtype=torch.float16)
case("to_int32_from_int64_wrap", "torch.Tensor.to", {"self": T([2**31, -(2**31) - 1, 5])}, dtype=torch.int32)
case("to_uint8_from_int64_wrap", "torch.Tensor.to", {"self": T([256, -1, 300])}, dtype=torch.uint8)
case("to_f32_from_uint8", "torch.Tensor.to", {"self": T([0, 255], dtype=torch.uint8)}, dtype=torch.float32)
case("to_bf16_from_f16", "torch.Tensor.to", {"self": T([0.1, 1000.5, -3.3], dtype=torch.float16)}, dtype=torch.bfloat16)

# ---------------------------------------------------------------- random
for seed, n in [(0, 3), (1, 16), (42, 17), (123, 100)]:
    seeded(f"rand_{n}_seed{seed}", "torch.rand", seed, size=[n])
    seeded(f"randn_{n}_seed{seed}", "torch.randn", seed, size=[n])
    seeded(f"randint_{n}_seed{seed}", "torch.randint", seed, low=-5, high=20, size=[n])
    seeded(f"normal_{n}_seed{seed}", "torch.normal", seed, mean=2.0, std=0.5, size=[n])
seeded("rand_f64_17", "torch.rand", 7, size=[17], dtype=f64)
seeded("randn_f64_17", "torch.randn", 7, size=[17], dtype=f64)
seeded("randn_f64_5", "torch.randn", 8, size=[5], dtype=f64)
seeded("randn_2d_4x5", "torch.randn", 9, size=[4, 5])
seeded("randint_big_range", "torch.randint", 10, low=0, high=2**40, size=[6])
seeded("randint_int32", "torch.randint", 11, low=0, high=10, size=[2, 3], dtype=torch.int32)

# ---------------------------------------------------------------- views: round trips, chunk, unbind, stack
vx3 = g(83, 2, 3, 4)
chain("permute_contiguous_view", vx3, [("permute", {"dims": [2, 0, 1]}), ("contiguous", {}), ("view", {"size": [4, 6]})])
chain("expand_permute_contiguous", g(84, 3, 1, 4),
      [("expand", {"size": [3, 2, 4]}), ("permute", {"dims": [2, 0, 1]}), ("contiguous", {})])
chain("transpose_reshape", vx3, [("transpose", {"dim0": 0, "dim1": 2}), ("reshape", {"shape": [4, -1]})])
chain("permute_roundtrip", vx3, [("permute", {"dims": [1, 2, 0]}), ("permute", {"dims": [2, 0, 1]}), ("contiguous", {})])
chain("slice_step_exp", vx3, [("__getitem__", {"index": [{"slice": [None, None, None]}, {"slice": [None, None, 2]}, {"slice": [1, None, 2]}]}),
                              ("exp", {})])
chain("permute_cumsum", vx3, [("permute", {"dims": [2, 1, 0]}), ("cumsum", {"dim": 1})])
chain("transpose_sort", vx3, [("transpose", {"dim0": 1, "dim1": 2}), ("sort", {"dim": 1})])
chain("expand_sum", g(85, 1, 3), [("expand", {"size": [4, 3]}), ("sum", {"dim": 0})])
chain("transpose_softmax", vx3, [("transpose", {"dim0": 0, "dim1": 1}), ("softmax", {"dim": 1})])
chain("expand_contiguous_int", T([[1], [2]]), [("expand", {"size": [2, 3]}), ("contiguous", {}), ("view", {"size": [6]})])
case("chunk_uneven_10_3", "torch.chunk", {"input": torch.arange(10.0)}, chunks=3)
case("chunk_uneven_5_3", "torch.chunk", {"input": torch.arange(5.0)}, chunks=3)
case("chunk_6_4_gives_3", "torch.chunk", {"input": torch.arange(6.0)}, chunks=4)
case("chunk_dim1", "torch.chunk", {"input": g(86, 2, 7)}, chunks=3, dim=1)
case("unbind_dim0", "torch.unbind", {"input": g(87, 3, 2)})
case("unbind_dim-1", "torch.unbind", {"input": g(88, 2, 3, 4)}, dim=-1)
list_case("stack_dim-1", "torch.stack", [g(89, 2, 3), g(90, 2, 3)], dim=-1)
list_case("stack_dim-2", "torch.stack", [g(91, 2, 3), g(92, 2, 3), g(93, 2, 3)], dim=-2)
list_case("stack_int_dim-3", "torch.stack", [T([[1, 2]]), T([[3, 4]])], dim=-3)
list_case("cat_mixed_dtypes", "torch.cat", [T([[1, 2]]), T([[0.5, 1.5]], dtype=f64)], dim=0)

# ---------------------------------------------------------------- more dtype edges
# f16 / bf16 conversions go through f32 in PyTorch (c10::Half(float)): f64 and
# int64 values round twice.
dr16 = 1 + 2**-11 + 2**-30
dr_bf = 1 + 2**-8 + 2**-30
case("to_f16_from_f64_double_rounding", "torch.Tensor.to", {"self": T([dr16, -dr16, 0.1, 65519.99], dtype=f64)},
     dtype=torch.float16, note="rounds via f32: 1 + 2^-11 + 2^-30 -> 1.0")
case("to_bf16_from_f64_double_rounding", "torch.Tensor.to", {"self": T([dr_bf, -dr_bf, 0.1], dtype=f64)},
     dtype=torch.bfloat16)
# Bits of an f64 kept by f32 but below the top 20 mantissa bits still count.
case("to_bf16_from_f64_low_bits", "torch.Tensor.to", {"self": T([1 + 2**-8 + 2**-22, -(1 + 2**-8 + 2**-22)], dtype=f64)},
     dtype=torch.bfloat16, note="rounds up: 1.0078125")
case("to_f16_from_f64_low_bits", "torch.Tensor.to", {"self": T([1 + 2**-11 + 2**-22], dtype=f64)}, dtype=torch.float16)
case("full_bf16_low_bits", "torch.full", size=[2], fill_value=1 + 2**-8 + 2**-22, dtype=torch.bfloat16)
case("add_bf16_scalar_low_bits", "torch.add", {"input": T([0.0, 1.0], dtype=torch.bfloat16)}, other=1 + 2**-8 + 2**-22)
case("to_bf16_from_int64_double_rounding", "torch.Tensor.to", {"self": T([2**24 + 2**16 + 1, 3, -(2**24 + 2**16 + 1)])},
     dtype=torch.bfloat16)
case("to_bf16_from_int32", "torch.Tensor.to", {"self": T([2**24 + 2**16 + 1, 7], dtype=torch.int32)}, dtype=torch.bfloat16)
case("full_f16_double_rounding", "torch.full", size=[3], fill_value=dr16, dtype=torch.float16)
case("full_bf16", "torch.full", size=[2, 2], fill_value=dr_bf, dtype=torch.bfloat16)
case("full_int_default", "torch.full", size=[2], fill_value=7)
case("full_bool", "torch.full", size=[2], fill_value=True)
case("masked_fill_f16_scalar", "torch.Tensor.masked_fill", {"self": T([1.0, 2.0, 3.0], dtype=torch.float16),
                                                            "mask": T([True, False, True])}, value=dr16)
case("where_f16_scalar", "torch.where", {"condition": T([True, False]), "input": T([1.5, 2.5], dtype=torch.float16)},
     other=dr16)
case("add_f16_scalar_edge", "torch.add", {"input": T([1.0, 0.0, -1.0], dtype=torch.float16)}, other=dr16)
case("arange_f16", "torch.arange", start=0.0, end=1.0, step=0.1, dtype=torch.float16)
case("arange_bf16", "torch.arange", start=-2.0, end=2.0, step=0.3, dtype=torch.bfloat16)
case("linspace_int64_fractional", "torch.linspace", start=-0.9, end=3.9, steps=4, dtype=torch.int64,
     note="start and end become integers first (0 and 3): [0, 1, 2, 3]")
case("linspace_zero_steps", "torch.linspace", start=0.0, end=1.0, steps=0)
case("linspace_two", "torch.linspace", start=-3.0, end=7.0, steps=2)
case("sum_int32_dtype_f64", "torch.sum", {"input": T([[1, 2], [3, 4]], dtype=torch.int32)}, dim=1, dtype=f64)
case("sum_f16_dtype_f32", "torch.sum", {"input": g(94, 50, dtype=torch.float16)}, dtype=torch.float32)
case("cumsum_f16", "torch.cumsum", {"input": g(95, 20, dtype=torch.float16)}, dim=0)
case("prod_f16", "torch.prod", {"input": 1 + 0.2 * g(96, 10, dtype=torch.float16)})
case("var_bf16_dim1", "torch.var", {"input": g(97, 3, 20, dtype=torch.bfloat16)}, dim=1)
case("softmax_f16", "torch.softmax", {"input": g(98, 3, 7, dtype=torch.float16)}, dim=-1)
case("log_softmax_bf16", "torch.log_softmax", {"input": g(99, 3, 7, dtype=torch.bfloat16)}, dim=1)
case("matmul_f16", "torch.matmul", {"input": g(100, 3, 8, dtype=torch.float16), "other": g(101, 8, 2, dtype=torch.float16)})
case("matmul_bf16", "torch.matmul", {"input": g(102, 3, 8, dtype=torch.bfloat16), "other": g(103, 8, 2, dtype=torch.bfloat16)})
case("matmul_int32", "torch.matmul", {"input": gi(104, -5, 6, 2, 3, dtype=torch.int32), "other": gi(105, -5, 6, 3, 4, dtype=torch.int32)})
case("sort_f16_desc", "torch.sort", {"input": T([0.5, NAN, -1.0, 0.5, INF], dtype=torch.float16)}, descending=True, stable=True)
case("sort_bool", "torch.sort", {"input": T([True, False, True, False])}, stable=True)
case("argmax_bf16_ties", "torch.argmax", {"input": T([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]], dtype=torch.bfloat16)}, dim=1)
case("topk_uint8", "torch.topk", {"input": T([5, 200, 3, 17], dtype=torch.uint8)}, k=2)
case("max_dim_bool_first", "torch.max", {"input": T([True, False, True])}, dim=0)
case("amax_bool", "torch.amax", {"input": T([[True, False], [False, False]])}, dim=1)
case("cumprod_bool", "torch.cumprod", {"input": T([True, False, True])}, dim=0)
case("maximum_nan_mixed", "torch.maximum", {"input": T([1.0, NAN, 3.0]), "other": T([2, 0, -1])})
case("minimum_int32_int64", "torch.minimum", {"input": T([1, 5, -3], dtype=torch.int32), "other": T([2, 0, -1])})
case("maximum_f16_f64", "torch.maximum", {"input": T([1.0, -2.0], dtype=torch.float16), "other": T([0.5, -1.0], dtype=f64)})
case("logsumexp_f64_neg_inf_row", "torch.logsumexp", {"input": T([[-INF, -INF], [1.0, 2.0]], dtype=f64)}, dim=1)
case("logsumexp_int", "torch.logsumexp", {"input": T([[1, 2, 3], [0, 0, 0]])}, dim=1, note="int -> float32")
case("clamp_nan_bound", "torch.clamp", {"input": T([1.0, -2.0, 3.0])}, min=NAN)
case("clamp_int_nan_bound", "torch.clamp", {"input": T([1, 2])}, max=NAN, note="int + float bound -> float32, all NaN")
case("clamp_f16", "torch.clamp", {"input": g(106, 6, dtype=torch.float16)}, min=-0.3, max=0.7)
case("logical_not_f16", "torch.logical_not", {"input": T([0.0, 2.0, -0.0, NAN], dtype=torch.float16)})
case("pow_f16_scalar", "torch.pow", {"input": g(107, 6, dtype=torch.float16).abs()}, exponent=1.7)
case("abs_int_min", "torch.abs", {"input": T([-(2**63), -5, 3])}, note="wraps like C++")
case("neg_uint8", "torch.neg", {"input": T([0, 1, 200], dtype=torch.uint8)}, note="wraps")
for seed, dt, n in [(3, torch.float16, 5), (4, torch.float16, 16), (5, torch.bfloat16, 5), (6, torch.bfloat16, 20)]:
    nm = DTYPE_NAMES[dt]
    seeded(f"rand_{nm}_{n}", "torch.rand", seed, size=[n], dtype=dt)
    seeded(f"randn_{nm}_{n}", "torch.randn", seed, size=[n], dtype=dt)
for seed, dt, n in [(13, torch.float16, 17), (14, torch.float16, 100), (15, torch.bfloat16, 33)]:
    seeded(f"randn_{DTYPE_NAMES[dt]}_{n}", "torch.randn", seed, size=[n], dtype=dt)
seeded("normal_float16_20", "torch.normal", 16, mean=1.0, std=2.0, size=[20], dtype=torch.float16)
seeded("rand_bfloat16_rounds_to_one", "torch.rand", 50, size=[30], dtype=torch.bfloat16,
       note="a sample that rounds to 1 becomes 0")
seeded("rand_float16_rounds_to_one", "torch.rand", 68, size=[30], dtype=torch.float16)
# Seeds where rounding an f32 sample to bf16 needs its lowest 3 mantissa bits.
seeded("rand_bfloat16_low_bits", "torch.rand", 756, size=[16], dtype=torch.bfloat16)
seeded("randn_bfloat16_low_bits", "torch.randn", 2549, size=[16], dtype=torch.bfloat16)
seeded("bernoulli_p", "torch.bernoulli", 12, input=T([0.0, 0.25, 0.5, 0.75, 1.0, 0.5, 0.5, 0.1]))

# ---------------------------------------------------------------- empty and 0-d tensors, range edges
case("sum_empty_dim0", "torch.sum", {"input": torch.ones(0, 3)}, dim=0)
case("prod_empty", "torch.prod", {"input": torch.ones(0)})
case("mean_empty", "torch.mean", {"input": torch.ones(0)})
case("all_empty", "torch.all", {"input": torch.ones(0)})
case("any_empty", "torch.any", {"input": torch.ones(0)})
case("norm_empty", "torch.norm", {"input": torch.ones(0)})
case("logsumexp_empty_dim", "torch.logsumexp", {"input": torch.ones(2, 0)}, dim=1)
case("var_single_element", "torch.var", {"input": T([1.0])}, note="n - correction = 0 -> nan")
case("std_single_corr0", "torch.std", {"input": T([2.0])}, correction=0)
case("amax_empty_kept_dim", "torch.amax", {"input": torch.ones(2, 0)}, dim=0)
case("cumsum_empty", "torch.cumsum", {"input": torch.ones(0, 2)}, dim=0)
case("sort_0d", "torch.sort", {"input": T(3.0)})
case("topk_0d", "torch.topk", {"input": T(3.0)}, k=1)
case("topk_k0", "torch.topk", {"input": T([1.0, 2.0])}, k=0)
case("cumsum_0d_int", "torch.cumsum", {"input": T(3)}, dim=0)
case("max_dim_0d", "torch.max", {"input": T(3.0)}, dim=0)
case("argmax_0d", "torch.argmax", {"input": T(3.0)})
case("gather_0d", "torch.gather", {"input": T(3.0), "index": T(0)}, dim=0)
case("one_hot_0d", "torch.nn.functional.one_hot", {"input": T(2)}, num_classes=4)
case("chunk_more_than_size", "torch.chunk", {"input": torch.arange(3.0)}, chunks=5)
getitem("idx_empty_long", torch.arange(6.0).view(2, 3), [T([], dtype=torch.long)])
getitem("idx_mask_all_false", torch.arange(6.0).view(2, 3), [torch.arange(6.0).view(2, 3) > 10])
getitem("idx_empty_long_dim1", torch.arange(6.0).view(2, 3), [slice(None, None, None), T([], dtype=torch.long)])
list_case("cat_skips_empty_1d", "torch.cat", [torch.ones(0), g(108, 2, 2)], dim=0)
case("eye_empty", "torch.eye", n=0)
case("eye_2x0", "torch.eye", n=2, m=0)
case("arange_float_size_round_up", "torch.arange", start=1.0, end=1.3, step=0.1,
     note="(1.3 - 1) / 0.1 = 3.0000000000000004 -> 4 values, as PyTorch")
case("arange_float_size_exact", "torch.arange", start=0.0, end=0.3, step=0.1)
case("clamp_uint8_negative_min", "torch.clamp", {"input": T([0, 5, 200], dtype=torch.uint8)}, min=-1,
     note="bounds are not wrapped to uint8")
case("clamp_uint8_max_300", "torch.clamp", {"input": T([0, 5, 200], dtype=torch.uint8)}, max=300)
case("clamp_int32_big_max", "torch.clamp", {"input": T([1, 2], dtype=torch.int32)}, max=2**40)
case("max_int32_dim", "torch.max", {"input": gi(109, -9, 9, 3, 4, dtype=torch.int32)}, dim=0)
case("amax_uint8", "torch.amax", {"input": T([[3, 250], [7, 1]], dtype=torch.uint8)}, dim=0)
case("amin_f16", "torch.amin", {"input": g(110, 3, 4, dtype=torch.float16)}, dim=1)

# ---------------------------------------------------------------- strided (non-contiguous) inputs
sx3 = g(111, 3, 4, 5)
tr = ("transpose", {"dim0": 0, "dim1": 2})
chain("strided_topk", sx3, [tr, ("topk", {"k": 2, "dim": 1})])
chain("strided_argmin", sx3, [tr, ("argmin", {"dim": 0})])
chain("strided_prod", sx3, [tr, ("prod", {"dim": 1})])
chain("strided_cumprod", sx3, [tr, ("cumprod", {"dim": 2})])
chain("strided_norm", sx3, [tr, ("norm", {"p": 3.0, "dim": [0, 2]})])
chain("strided_var", sx3, [tr, ("var", {"dim": 1, "correction": 0})])
chain("strided_all", sx3 > 0, [tr, ("all", {"dim": 0})])
chain("strided_clamp", sx3, [tr, ("clamp", {"min": -0.5, "max": 0.5})])
chain("strided_round", sx3 * 3, [tr, ("round", {})])
chain("strided_erf", sx3, [tr, ("erf", {})])
chain("strided_to_int", sx3 * 4, [tr, ("to", {"dtype": torch.int32})])
chain("strided_to_f16", sx3, [tr, ("to", {"dtype": torch.float16})])
chain("strided_tril", sx3, [("transpose", {"dim0": 1, "dim1": 2}), ("tril", {"diagonal": -1})])
chain("strided_softmax_f64", sx3.double(), [tr, ("log_softmax", {"dim": 0})])
chain("strided_matmul", g(112, 4, 3), [("t", {}), ("matmul", {}, ["other"])], others={"other": g(113, 4, 2)})
chain("strided_gather", sx3, [tr, ("gather", {"dim": 1}, ["index"])],
      others={"index": gi(114, 0, 4, 5, 2, 3)})
chain("strided_index_select", sx3, [tr, ("index_select", {"dim": 2}, ["index"])], others={"index": T([2, 0, 2])})
chain("strided_scatter_add", sx3, [tr, ("scatter_add", {"dim": 0}, ["index", "src"])],
      others={"index": gi(115, 0, 5, 5, 4, 3), "src": g(116, 5, 4, 3)})
chain("strided_getitem_tensor", sx3, [tr, ("__getitem__", {"index": [{"tensor": 1}, {"slice": [None, None, 2]}, {"tensor": 2}]},
                                           ["i0", "i1"])],
      others={"i0": T([[4], [0]]), "i1": T([2, -1])})
chain("strided_getitem_mask", sx3, [tr, ("__getitem__", {"index": [{"tensor": 1}]}, ["mask"])],
      others={"mask": T([True, False, True, True, False])})
chain("expanded_cumsum", g(117, 1, 4), [("expand", {"size": [3, 4]}), ("cumsum", {"dim": 0})])
chain("expanded_sort", g(118, 3, 1), [("expand", {"size": [3, 4]}), ("sort", {"dim": 0, "descending": True, "stable": True})])
chain("expanded_prod", g(119, 1, 3), [("expand", {"size": [5, 3]}), ("prod", {"dim": 0})])
chain("sliced_add_alpha", sx3, [("__getitem__", {"index": [{"slice": [None, None, 2]}, 1]}), ("add", {"alpha": 2.0}, ["other"])],
      others={"other": g(120, 5)})
chain("sliced_where", sx3, [("__getitem__", {"index": [1, {"slice": [None, None, 2]}]}), ("where", {"other": 0.0}, ["condition"])],
      others={"condition": T([[True, False, True, False, True]])})

# ---------------------------------------------------------------- more promotion and index dtypes
x23 = torch.arange(6.0).view(2, 3)
i32 = T([1, 0], dtype=torch.int32)
getitem("idx_int32", x23, [i32])
getitem("idx_bool_0d", x23, [T(True)], note="a 0-d True adds a dim of size 1")
getitem("idx_int_0d_tensor", x23, [T(1)])
getitem("idx_bool_0d_false", x23, [slice(None, None, None), T(False)])
getitem("idx_0d_int_tensor_selects", ax, [T(0), slice(None, None, None), T([4, 0, 1])],
        note="a 0-d int tensor is a select, so the index dims are adjacent to nothing")
getitem("idx_0d_bool_with_tensor", ax, [T(True), T([2, 0])])
case("index_select_int32", "torch.index_select", {"input": x23, "index": i32}, dim=1)
case("gather_int32_index", "torch.gather", {"input": x23, "index": T([[1, 0, 1]], dtype=torch.int32)}, dim=0)
case("scatter_int32_index", "torch.scatter", {"input": x23, "index": T([[1, 0, 1]], dtype=torch.int32)}, dim=0, value=5.0)
case("clamp_bool_int_bound", "torch.clamp", {"input": T([True, False])}, min=0, note="bool with an int bound -> int64")
case("pow_bool_int", "torch.pow", {"input": T([True, False])}, exponent=2)
case("lt_int_0d_f64", "torch.lt", {"input": T([1, 2, 3]), "other": T(2.5, dtype=f64)})
case("eq_nan_scalar", "torch.eq", {"input": T([NAN, 1.0])}, other=NAN)
case("where_0d_f64_branch", "torch.where", {"condition": T([True, False]), "input": T(1.5, dtype=f64), "other": T([1.0, 2.0])})
case("div_floor_int_0d_f64", "torch.div", {"input": T([7, -7]), "other": T(2.0, dtype=f64)}, rounding_mode="floor")
case("mul_bool_bool", "torch.mul", {"input": T([True, False, True]), "other": T([True, True, False])})
case("sign_uint8", "torch.sign", {"input": T([0, 3], dtype=torch.uint8)})
case("argmax_multi_nan", "torch.argmax", {"input": T([1.0, NAN, 5.0, NAN])})
case("argmin_multi_nan", "torch.argmin", {"input": T([1.0, NAN, -5.0, NAN])})
case("norm_p-1_zero", "torch.norm", {"input": T([1.0, 0.0, 2.0])}, p=-1.0)
case("norm_p0.5", "torch.norm", {"input": T([1.0, 0.0, 2.0])}, p=0.5)
case("topk_int32", "torch.topk", {"input": T([3, 1, 2], dtype=torch.int32)}, k=2)
for op in ["erf", "log1p", "expm1", "rsqrt", "reciprocal"]:
    case(f"{op}_f16", f"torch.{op}", {"input": g(121, 8, dtype=torch.float16).abs() + 0.1})
    case(f"{op}_bf16", f"torch.{op}", {"input": g(122, 8, dtype=torch.bfloat16).abs() + 0.1})
case("softplus_bf16", "torch.nn.functional.softplus", {"input": g(123, 8, dtype=torch.bfloat16) * 5})
error_case("err_neg_bool", "torch.neg", {"input": T([True])})
error_case("err_abs_bool", "torch.abs", {"input": T([True])})

# ---------------------------------------------------------------- accuracy sweeps over wide ranges
mag = torch.logspace(-8, 2, 31, dtype=f64)
sweep = torch.cat([-mag.flip(0), T([0.0], dtype=f64), mag])
for op in ["exp", "expm1", "log1p", "erf", "tanh", "sigmoid", "rsqrt", "reciprocal", "sin", "cos"]:
    xs = sweep.clamp(min=-0.99) if op == "log1p" else sweep
    xs = xs.abs() if op == "rsqrt" else xs
    # (expm1 above 88 is expm1_large, a known failure)
    xs = xs.clamp(max=80.0) if op in ("exp", "expm1") else xs
    case(f"sweep_{op}_f32", f"torch.{op}", {"input": xs.float()})
    if op in ("expm1", "log1p", "erf", "tanh", "sigmoid"):
        case(f"sweep_{op}_f64", f"torch.{op}", {"input": xs})
case("sweep_softplus_f32", "torch.nn.functional.softplus", {"input": sweep.float()})
case("sweep_log_f32", "torch.log", {"input": mag.float()})
case("sweep_sqrt_f64", "torch.sqrt", {"input": mag})

# ---------------------------------------------------------------- errors (PyTorch raises)
error_case("err_gather_oob", "torch.gather", {"input": T([1, 2, 3]), "index": T([3])}, dim=0)
error_case("err_gather_negative", "torch.gather", {"input": T([1, 2, 3]), "index": T([-1])}, dim=0)
error_case("err_scatter_oob", "torch.scatter", {"input": T([1, 2, 3]), "index": T([5]), "src": T([9])}, dim=0)
error_case("err_index_select_oob", "torch.index_select", {"input": T([1, 2]), "index": T([2])}, dim=0)
error_case("err_topk_k_too_large", "torch.topk", {"input": T([1.0, 2.0])}, k=3)
error_case("err_topk_bool", "torch.topk", {"input": T([True, False])}, k=1)
error_case("err_one_hot_negative", "torch.nn.functional.one_hot", {"input": T([-1, 0])}, num_classes=3)
error_case("err_one_hot_too_big", "torch.nn.functional.one_hot", {"input": T([3, 0])}, num_classes=3)
error_case("err_argmax_bool", "torch.argmax", {"input": T([True, False])})
error_case("err_mean_int", "torch.mean", {"input": T([1, 2])})
error_case("err_var_int", "torch.var", {"input": T([1, 2])})
error_case("err_norm_int", "torch.norm", {"input": T([1, 2])})
error_case("err_softmax_int", "torch.softmax", {"input": T([1, 2])}, dim=0)
error_case("err_pow_int_negative", "torch.pow", {"input": T([1, 2])}, exponent=-1)
error_case("err_div_int_zero_trunc", "torch.div", {"input": T([1, 2]), "other": T([0, 1])}, rounding_mode="trunc")
error_case("err_div_int_zero_floor", "torch.div", {"input": T([1, 2])}, other=0, rounding_mode="floor")
error_case("err_sub_bool", "torch.sub", {"input": T([True]), "other": T([False])})
error_case("err_clamp_no_bounds", "torch.clamp", {"input": T([1.0])})
error_case("err_matmul_dtype", "torch.matmul", {"input": torch.ones(2, 3), "other": torch.ones(3, 2, dtype=f64)})
error_case("err_matmul_shape", "torch.matmul", {"input": torch.ones(2, 3), "other": torch.ones(2, 3)})
error_case("err_max_empty", "torch.max", {"input": torch.ones(0)})
error_case("err_stack_sizes", "torch.stack", {"tensors": [torch.ones(2), torch.ones(3)]})
chain_error("err_view_non_contiguous", torch.ones(2, 3), [("t", {}), ("view", {"size": [6]})])
error_case("err_expand_bad", "torch.Tensor.expand", {"self": torch.ones(2, 3)}, size=[3, 3])
error_case("err_reshape_bad", "torch.reshape", {"input": torch.ones(2, 3)}, shape=[4, -1])

write(OUT, "core")
