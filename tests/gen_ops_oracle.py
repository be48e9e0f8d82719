"""Writes tests/oracle_extra/ops.json: PyTorch reference values (forward
outputs, gradients, errors) for the everyday ops of the op-coverage work:
elementwise math, bitwise ops, clamp with tensor bounds, lerp,
nan_to_num, float classification, ...

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_ops_oracle.py
"""

import os

from oracle_common import *  # noqa: F401,F403

torch.set_num_threads(1)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle_extra", "ops.json")

T = torch.tensor
f64 = torch.float64
f16 = torch.float16
bf16 = torch.bfloat16
i32 = torch.int32
u8 = torch.uint8

# ------------------------------------------------------------ binary float math
special = T([0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 2.5, -3.5, 1e-30, 1e30, 7.0])
special2 = T([0.0, 0.0, -0.0, -2.0, INF, INF, 1.0, -1.5, 2.0, -INF, 1e30, NAN])
for op in ["atan2", "hypot", "logaddexp", "logaddexp2", "copysign", "remainder", "fmod"]:
    a, b = g(1, 3, 4), g(2, 3, 4)
    grad_case(f"{op}_f32", f"torch.{op}", {"input": a, "other": b}, ["input", "other"])
    grad_case(f"{op}_f64_bcast", f"torch.{op}", {"input": g(3, 3, 1, dtype=f64), "other": g(4, 4, dtype=f64)},
              ["input", "other"])
    case(f"{op}_special", f"torch.{op}", {"input": special, "other": special2})
    case(f"{op}_f16", f"torch.{op}", {"input": g(5, 7, dtype=f16), "other": g(6, 7, dtype=f16)})
    case(f"{op}_bf16", f"torch.{op}", {"input": g(7, 7, dtype=bf16), "other": g(8, 7, dtype=bf16)})
    if op in ("copysign", "remainder", "fmod"):
        grad_case(f"{op}_scalar", f"torch.{op}", {"input": g(9, 5)}, ["input"], other=-1.5)
    case(f"{op}_f32_f64_promote", f"torch.{op}", {"input": g(10, 4), "other": g(11, 4, dtype=f64)})
for op in ["atan2", "copysign"]:
    case(f"{op}_int_to_float", f"torch.{op}", {"input": gi(12, -5, 6, 6), "other": gi(13, -5, 6, 6, dtype=i32)})
    case(f"{op}_int_f16", f"torch.{op}", {"input": gi(14, -5, 6, 6, dtype=i32), "other": g(15, 6, dtype=f16)})
for op in ["hypot", "logaddexp", "logaddexp2"]:
    error_case(f"err_{op}_int", f"torch.{op}", {"input": T([3, 4]), "other": T([4, 3])})
    error_case(f"err_{op}_shape", f"torch.{op}", {"input": g(1, 2, 3), "other": g(2, 4)})
# remainder / fmod on integers, scalars, signs and zero divisors
ia, ib = T([-7, 7, -7, 7, 0, -9223372036854775808, 5]), T([2, -2, -2, 2, 3, -1, 7])
for op in ["remainder", "fmod"]:
    case(f"{op}_int64", f"torch.{op}", {"input": ia, "other": ib})
    case(f"{op}_int32", f"torch.{op}", {"input": ia[:5].to(i32), "other": ib[:5].to(i32)})
    case(f"{op}_uint8", f"torch.{op}", {"input": T([253, 3, 200], dtype=u8), "other": T([2, 200, 7], dtype=u8)})
    case(f"{op}_int_float_scalar", f"torch.{op}", {"input": T([5, -7])}, other=2.5)
    case(f"{op}_int_scalar_neg", f"torch.{op}", {"input": T([5, -7, 9])}, other=-4)
    error_case(f"err_{op}_int_zero", f"torch.{op}", {"input": T([5, 6]), "other": T([1, 0])})
    error_case(f"err_{op}_bool", f"torch.{op}", {"input": T([True]), "other": T([True])})
    case(f"{op}_float_zero_div", f"torch.{op}", {"input": T([-3.0, 3.0, 0.0]), "other": T([0.0, -0.0, 0.0])})
# ------------------------------------------------------------ bitwise and shifts
bi, bj = gi(20, -100, 100, 3, 4), gi(21, -100, 100, 4)
for op in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
    case(f"{op}_int64", f"torch.{op}", {"input": bi, "other": bj})
    case(f"{op}_int32", f"torch.{op}", {"input": bi.to(i32), "other": bj.to(i32)})
    case(f"{op}_uint8", f"torch.{op}", {"input": gi(22, 0, 256, 9, dtype=u8), "other": gi(23, 0, 256, 9, dtype=u8)})
    case(f"{op}_bool", f"torch.{op}", {"input": T([True, True, False, False]), "other": T([True, False, True, False])})
    case(f"{op}_uint8_scalar_wraps", f"torch.{op}", {"input": T([3, 255, 17], dtype=u8)}, other=300)
    case(f"{op}_uint8_scalar_neg", f"torch.{op}", {"input": T([3, 255, 17], dtype=u8)}, other=-1)
    case(f"{op}_bool_int_scalar", f"torch.{op}", {"input": T([True, False])}, other=2)
    case(f"{op}_mixed_int32_int64", f"torch.{op}", {"input": bi.to(i32), "other": bj})
    case(f"{op}_bool_uint8", f"torch.{op}", {"input": T([True, False, True]), "other": T([6, 7, 8], dtype=u8)})
    error_case(f"err_{op}_float", f"torch.{op}", {"input": T([1.0]), "other": T([1])})
sh = T([-8, 8, 1, -1, 5, 100, -100])
amt = T([1, 40, -1, 64, 0, 3, 63])
for op in ["bitwise_left_shift", "bitwise_right_shift"]:
    case(f"{op}_int64", f"torch.{op}", {"input": sh, "other": amt})
    case(f"{op}_int32", f"torch.{op}", {"input": sh.to(i32), "other": T([1, 40, -1, 31, 32, 3, 5], dtype=i32)})
    case(f"{op}_uint8", f"torch.{op}", {"input": T([200, 8, 1, 255], dtype=u8), "other": T([1, 9, 7, 8], dtype=u8)})
    case(f"{op}_scalar", f"torch.{op}", {"input": T([200, 8, 3], dtype=u8)}, other=1)
    case(f"{op}_scalar_big", f"torch.{op}", {"input": T([1, 2, -3])}, other=70)
    case(f"{op}_mixed", f"torch.{op}", {"input": sh.to(i32), "other": amt.to(u8)})
    error_case(f"err_{op}_bool", f"torch.{op}", {"input": T([True]), "other": T([True])})
    error_case(f"err_{op}_float", f"torch.{op}", {"input": T([1.5]), "other": T([1])})
case("bitwise_not_int64", "torch.bitwise_not", {"input": bi})
case("bitwise_not_uint8", "torch.bitwise_not", {"input": T([0, 1, 200, 255], dtype=u8)})
case("bitwise_not_int32", "torch.bitwise_not", {"input": bi.to(i32)})
case("bitwise_not_bool", "torch.bitwise_not", {"input": T([True, False])})
error_case("err_bitwise_not_float", "torch.bitwise_not", {"input": T([1.0])})
# logical ops on any dtype
for op in ["logical_and", "logical_or", "logical_xor"]:
    case(f"{op}_float_int", f"torch.{op}", {"input": T([0.0, 2.0, NAN, -0.0]), "other": T([1, 0, 1, 1])})
case("logical_not_float", "torch.logical_not", {"input": T([0.0, 2.0, NAN, -0.0])})
case("logical_not_int", "torch.logical_not", {"input": T([0, 3, -1], dtype=i32)})
# ------------------------------------------------------------ lerp
s_, e_ = g(30, 3, 4), g(31, 3, 4)
w_ = torch.rand(3, 4, generator=torch.Generator().manual_seed(32)) * 1.6 - 0.3
grad_case("lerp_scalar_small", "torch.lerp", {"input": s_, "end": e_}, ["input", "end"], weight=0.3)
grad_case("lerp_scalar_large", "torch.lerp", {"input": s_, "end": e_}, ["input", "end"], weight=0.7)
grad_case("lerp_tensor", "torch.lerp", {"input": s_, "end": e_, "weight": w_}, ["input", "end", "weight"])
grad_case("lerp_tensor_bcast", "torch.lerp", {"input": g(33, 4), "end": g(34, 3, 1), "weight": w_[0]},
          ["input", "end", "weight"])
grad_case("lerp_f64", "torch.lerp", {"input": s_.double(), "end": e_.double(), "weight": w_.double()},
          ["input", "end", "weight"])
case("lerp_f16", "torch.lerp", {"input": g(35, 9, dtype=f16), "end": g(36, 9, dtype=f16)}, weight=0.3)
case("lerp_bf16_tensor", "torch.lerp", {"input": g(37, 9, dtype=bf16), "end": g(38, 9, dtype=bf16),
                                        "weight": w_.flatten()[:9].to(bf16)})
case("lerp_big", "torch.lerp", {"input": g(39, 100), "end": g(40, 100)}, weight=0.6)
error_case("err_lerp_dtype", "torch.lerp", {"input": T([1.0]), "end": T([2.0], dtype=f64)}, weight=0.5)
error_case("err_lerp_weight_dtype", "torch.lerp", {"input": T([1.0]), "end": T([2.0]), "weight": T([0.5], dtype=f64)})
error_case("err_lerp_int", "torch.lerp", {"input": T([1]), "end": T([2])}, weight=0.5)
# ------------------------------------------------------------ clamp with tensor bounds
cx = T([1.0, NAN, 3.0, 2.0, 5.0, -1.0])
lo = T([2.0, 2.0, NAN, 2.0, 1.0, 0.0])
hi = T([4.0, 4.0, 4.0, 2.0, 0.5, NAN])
case("clamp_tensor_nan", "torch.clamp", {"input": cx, "min": lo, "max": hi})
case("clamp_tensor_min_nan", "torch.clamp", {"input": cx, "min": lo})
case("clamp_tensor_max_nan", "torch.clamp", {"input": cx, "max": hi})
xa = T([[1.0, 2.0, 3.0, 4.0], [0.0, 2.5, 5.0, -1.0], [3.0, 3.0, 1.0, 1.0]])
grad_case("clamp_tensor_ties", "torch.clamp", {"input": xa, "min": T([1.0, 2.0, 2.0, 0.0]), "max": T([[3.0], [2.5], [1.0]])},
          ["input", "min", "max"])
grad_case("clamp_tensor_min_only", "torch.clamp", {"input": xa, "min": T([1.0, 2.0, 2.0, 0.0])}, ["input", "min"])
grad_case("clamp_tensor_max_only", "torch.clamp", {"input": xa, "max": T([[3.0], [2.5], [1.0]])}, ["input", "max"])
grad_case("clamp_tensor_min_gt_max", "torch.clamp", {"input": xa, "min": T([2.0]), "max": T([1.0])},
          ["input", "min", "max"])
grad_case("clamp_min_tensor", "torch.clamp_min", {"input": xa, "min": T([1.0, 2.0, 2.0, 0.0])}, ["input", "min"])
grad_case("clamp_max_tensor", "torch.clamp_max", {"input": xa, "max": T([1.0, 2.0, 2.0, 0.0])}, ["input", "max"])
import itertools
grid = list(itertools.product([0.0, 1.0, 2.0, NAN], repeat=3))
gx, glo, ghi = (T([v[k] for v in grid]) for k in range(3))
grad_case("clamp_tensor_grid", "torch.clamp", {"input": gx, "min": glo, "max": ghi}, ["input", "min", "max"])
grad_case("clamp_tensor_grid_min", "torch.clamp", {"input": gx, "min": glo}, ["input", "min"])
grad_case("clamp_tensor_grid_max", "torch.clamp", {"input": gx, "max": ghi}, ["input", "max"])
grad_case("maximum_ties_nan", "torch.maximum", {"input": gx, "other": glo}, ["input", "other"])
grad_case("minimum_ties_nan", "torch.minimum", {"input": gx, "other": ghi}, ["input", "other"])
case("clamp_tensor_int_float_bound", "torch.clamp", {"input": T([1, 5, 3]), "min": T([2.5]), "max": T([4])})
case("clamp_tensor_int_uint8", "torch.clamp", {"input": T([1, 5, 3]), "min": T([2]), "max": T([4], dtype=u8)})
case("clamp_tensor_bool", "torch.clamp", {"input": T([True, False]), "min": T([False, True])})
error_case("err_clamp_tensor_shape", "torch.clamp", {"input": T([1, 2]), "min": T([1, 2, 3])})
# ------------------------------------------------------------ nan_to_num / classification
nn_in = T([NAN, INF, -INF, 1.5, -0.0])
grad_case("nan_to_num_default", "torch.nan_to_num", {"input": nn_in}, ["input"])
grad_case("nan_to_num_values", "torch.nan_to_num", {"input": nn_in}, ["input"], nan=2.0, posinf=10.0, neginf=-5.0)
case("nan_to_num_f16", "torch.nan_to_num", {"input": nn_in.half()})
case("nan_to_num_f16_overflow", "torch.nan_to_num", {"input": nn_in.half()}, nan=1e10, posinf=-1e6)
case("nan_to_num_bf16", "torch.nan_to_num", {"input": nn_in.bfloat16()})
case("nan_to_num_f64", "torch.nan_to_num", {"input": nn_in.double()}, posinf=1e300)
case("nan_to_num_int", "torch.nan_to_num", {"input": T([1, 2])}, nan=1.5)
for op in ["isnan", "isinf", "isposinf", "isneginf", "isfinite"]:
    case(f"{op}_f32", f"torch.{op}", {"input": special})
    case(f"{op}_f16", f"torch.{op}", {"input": special.half()})
    case(f"{op}_int", f"torch.{op}", {"input": T([1, -2])})
    case(f"{op}_bool", f"torch.{op}", {"input": T([True, False])})


# ------------------------------------------------------------ order statistics (ties resolve as PyTorch)
def tied(seed, *shape, hi=4, dtype=torch.float32):
    return gi(seed, 0, hi, *shape).to(dtype)


for n in [5, 16, 17, 50, 200]:
    x = tied(100 + n, n)
    for k in sorted({1, 2, n // 3 + 1, (n + 1) // 2, n}):
        case(f"kthvalue_ties_n{n}_k{k}", "torch.kthvalue", {"input": x}, k=k, dim=0)
    case(f"median_dim_ties_n{n}", "torch.median", {"input": x}, dim=0)
    case(f"mode_ties_n{n}", "torch.mode", {"input": x}, dim=0)
    case(f"median_all_n{n}", "torch.median", {"input": x})
    for k in sorted({1, 2, n // 3 + 1, n}):
        case(f"topk_ties_n{n}_k{k}", "torch.topk", {"input": x}, k=k)
        case(f"topk_ties_small_n{n}_k{k}", "torch.topk", {"input": x}, k=k, largest=False)
big = tied(120, 1000, hi=7)
for k in [1, 5, 15, 16, 17, 300]:
    case(f"topk_ties_n1000_k{k}", "torch.topk", {"input": big}, k=k)
    case(f"kthvalue_ties_n1000_k{k}", "torch.kthvalue", {"input": big}, k=k)
case("mode_ties_n1000", "torch.mode", {"input": big})
case("median_dim_n1000", "torch.median", {"input": big}, dim=0)
m2 = tied(121, 6, 9)
case("kthvalue_2d_dim0_keepdim", "torch.kthvalue", {"input": m2}, k=3, dim=0, keepdim=True)
case("kthvalue_2d_dim1", "torch.kthvalue", {"input": m2}, k=4, dim=1)
case("median_2d_dim0", "torch.median", {"input": m2}, dim=0)
case("nanmedian_2d_dim1_keepdim", "torch.nanmedian", {"input": m2}, dim=1, keepdim=True)
case("mode_2d_dim0", "torch.mode", {"input": m2}, dim=0)
case("mode_2d_dim1_keepdim", "torch.mode", {"input": m2}, dim=1, keepdim=True)
withnan = T([[3.0, NAN, 1.0, 2.0, NAN], [NAN, NAN, NAN, NAN, NAN], [1.0, 1.0, NAN, -0.0, 0.0], [2.0, 1.0, 3.0, 1.0, 2.0]])
allnan = torch.full((3, 20), NAN)
for dim in [0, 1]:
    case(f"median_nan_dim{dim}", "torch.median", {"input": withnan}, dim=dim)
    case(f"nanmedian_nan_dim{dim}", "torch.nanmedian", {"input": withnan}, dim=dim)
    case(f"kthvalue_nan_dim{dim}", "torch.kthvalue", {"input": withnan}, k=2, dim=dim)
    case(f"mode_nan_dim{dim}", "torch.mode", {"input": withnan}, dim=dim)
case("nanmedian_allnan_rows", "torch.nanmedian", {"input": allnan}, dim=1)
case("median_all_nan", "torch.median", {"input": withnan})
case("nanmedian_all", "torch.nanmedian", {"input": withnan})
case("nanmedian_all_allnan", "torch.nanmedian", {"input": allnan})
case("median_all_signed_zero", "torch.median", {"input": T([0.0, -0.0, 1.0, -0.0, 0.0])})
case("median_empty", "torch.median", {"input": torch.ones(0)})
for dt in [torch.int64, i32, u8, f16, bf16, f64]:
    xd = tied(130, 3, 11, hi=5, dtype=dt)
    nm = str(dt).split(".")[1]
    case(f"kthvalue_{nm}", "torch.kthvalue", {"input": xd}, k=5)
    case(f"median_dim_{nm}", "torch.median", {"input": xd}, dim=1)
    case(f"median_all_{nm}", "torch.median", {"input": xd})
    case(f"mode_{nm}", "torch.mode", {"input": xd})
case("mode_bool", "torch.mode", {"input": T([[True, False, True], [False, False, True]])})
case("kthvalue_0d", "torch.kthvalue", {"input": T(2.5)}, k=1)
case("median_0d_dim", "torch.median", {"input": T(2.5)}, dim=0)
case("mode_0d", "torch.mode", {"input": T(2.5)})
grad_case("kthvalue_grad", "torch.kthvalue", {"input": g(140, 4, 6)}, ["input"], k=3, dim=1)
grad_case("median_dim_grad", "torch.median", {"input": g(141, 4, 6)}, ["input"], dim=0, keepdim=True)
grad_case("nanmedian_dim_grad", "torch.nanmedian", {"input": withnan}, ["input"], dim=1)
grad_case("mode_grad", "torch.mode", {"input": tied(142, 3, 9)}, ["input"], dim=1)
grad_case("median_all_grad_ties", "torch.median", {"input": T([1.0, 2.0, 2.0, 3.0, 2.0])}, ["input"])
grad_case("median_all_grad_nan", "torch.median", {"input": T([1.0, NAN, 2.0, NAN])}, ["input"])
grad_case("nanmedian_all_grad", "torch.nanmedian", {"input": T([1.0, NAN, 2.0, 2.0, 3.0])}, ["input"])
error_case("err_kthvalue_k0", "torch.kthvalue", {"input": g(1, 3)}, k=0)
error_case("err_kthvalue_k_big", "torch.kthvalue", {"input": g(1, 3)}, k=4)
error_case("err_kthvalue_empty", "torch.kthvalue", {"input": torch.ones(0)}, k=1)
error_case("err_kthvalue_bool", "torch.kthvalue", {"input": T([True])}, k=1)
error_case("err_median_dim_empty", "torch.median", {"input": torch.ones(2, 0)}, dim=1)
error_case("err_median_bool", "torch.median", {"input": T([True])})
error_case("err_mode_empty", "torch.mode", {"input": torch.ones(0)})
error_case("err_kthvalue_dim", "torch.kthvalue", {"input": g(1, 3)}, k=1, dim=2)

# ------------------------------------------------------------ unique
uq = T([5, 3, 5, 1, 3, 9, 1, -2, 5])
case("unique_int", "torch.unique", {"input": uq})
case("unique_int_inv_counts", "torch.unique", {"input": uq}, return_inverse=True, return_counts=True)
case("unique_unsorted", "torch.unique", {"input": uq}, sorted=False, return_inverse=True)
case("unique_2d_inverse_shape", "torch.unique", {"input": uq[:8].reshape(2, 4)}, return_inverse=True)
fq = T([1.0, NAN, 0.5, NAN, -0.0, 0.0, 0.5, -INF, INF, -1.5])
case("unique_float_nan_zero", "torch.unique", {"input": fq}, return_inverse=True, return_counts=True)
case("unique_float_zero_first", "torch.unique", {"input": T([0.0, -0.0, 1.0])}, return_inverse=True)
case("unique_float_negzero_first", "torch.unique", {"input": T([-0.0, 0.0, 1.0])}, return_counts=True)
for dt in [i32, u8, f16, bf16, f64, torch.bool]:
    nm = str(dt).split(".")[1]
    case(f"unique_{nm}", "torch.unique", {"input": gi(150, 0, 4, 30).to(dt)}, return_inverse=True, return_counts=True)
big_u = gi(151, -1000, 1000, 5000)
case("unique_big_radix", "torch.unique", {"input": big_u}, return_inverse=True, return_counts=True)
wide = torch.randint(-2**62, 2**62, (3000,), generator=torch.Generator().manual_seed(152))
wide[::7] = wide[3]
case("unique_wide_int64", "torch.unique", {"input": wide}, return_counts=True)
case("unique_big_float", "torch.unique", {"input": (g(153, 4000) * 3).round()}, return_inverse=True, return_counts=True)
case("unique_empty", "torch.unique", {"input": torch.ones(0)}, return_inverse=True, return_counts=True)
case("unique_0d", "torch.unique", {"input": T(5)}, return_inverse=True, return_counts=True)
rows = T([[1, 2], [1, 2], [0, 5], [3, 1], [0, 5], [1, 1]])
case("unique_dim0", "torch.unique", {"input": rows}, dim=0, return_inverse=True, return_counts=True)
case("unique_dim1", "torch.unique", {"input": T([[3, 1, 3], [2, 1, 2], [3, 1, 3]])}, dim=1, return_inverse=True,
     return_counts=True)
case("unique_dim_nan_rows", "torch.unique", {"input": T([[1.0, 2.0], [NAN, 2.0], [1.0, 2.0], [0.0, 1.0]])}, dim=0,
     return_inverse=True, return_counts=True)
case("unique_dim_3d", "torch.unique", {"input": gi(154, 0, 2, 3, 4, 2)}, dim=1, return_inverse=True, return_counts=True)
case("unique_dim_many", "torch.unique", {"input": gi(155, 0, 3, 40, 2)}, dim=0, return_inverse=True,
     return_counts=True)
case("unique_dim_empty_selected", "torch.unique", {"input": torch.ones(0, 3)}, dim=0, return_inverse=True,
     return_counts=True)
error_case("err_unique_dim_empty_other", "torch.unique", {"input": torch.ones(2, 0)}, dim=0)
error_case("err_unique_dim_range", "torch.unique", {"input": torch.ones(2, 3)}, dim=2)
ucq = T([1, 1, 2, 2, 3, 1, 1, 2])
case("unique_consecutive", "torch.unique_consecutive", {"input": ucq}, return_inverse=True, return_counts=True)
case("unique_consecutive_float", "torch.unique_consecutive", {"input": T([1.0, NAN, NAN, -0.0, 0.0, 0.0])},
     return_inverse=True, return_counts=True)
case("unique_consecutive_dim0", "torch.unique_consecutive", {"input": T([[1, 1], [1, 1], [2, 3], [1, 1]])}, dim=0,
     return_inverse=True, return_counts=True)
case("unique_consecutive_2d_flat", "torch.unique_consecutive", {"input": T([[1, 1], [2, 2]])}, return_inverse=True)
# ------------------------------------------------------------ nan reductions, aminmax, var_mean
nx = T([[1.0, NAN, 3.0], [NAN, NAN, NAN], [0.5, -2.0, 4.0]])
grad_case("nansum_all", "torch.nansum", {"input": nx}, ["input"])
grad_case("nansum_dim1", "torch.nansum", {"input": nx}, ["input"], dim=1)
grad_case("nansum_dim0_keepdim", "torch.nansum", {"input": nx}, ["input"], dim=0, keepdim=True)
case("nansum_int", "torch.nansum", {"input": T([1, 2, 3], dtype=i32)})
case("nansum_bool", "torch.nansum", {"input": T([True, True, False])})
case("nansum_f16", "torch.nansum", {"input": nx.half()}, dim=1)
case("nansum_dims", "torch.nansum", {"input": g(160, 2, 3, 4)}, dim=[0, 2])
grad_case("nanmean_all", "torch.nanmean", {"input": nx}, ["input"])
grad_case("nanmean_dim1", "torch.nanmean", {"input": nx}, ["input"], dim=1)
case("nanmean_dim0_keepdim_f64", "torch.nanmean", {"input": nx.double()}, dim=0, keepdim=True)
error_case("err_nanmean_int", "torch.nanmean", {"input": T([1, 2])})
cz = T([[0.0, 1.0, -0.0], [NAN, 0.0, 2.0]])
case("count_nonzero_all", "torch.count_nonzero", {"input": cz})
case("count_nonzero_dim", "torch.count_nonzero", {"input": cz}, dim=1)
case("count_nonzero_dims", "torch.count_nonzero", {"input": gi(161, 0, 2, 2, 3, 4)}, dim=[0, 2])
case("count_nonzero_bool", "torch.count_nonzero", {"input": T([True, False, True])})
case("aminmax_all", "torch.aminmax", {"input": g(162, 3, 4)})
case("aminmax_dim", "torch.aminmax", {"input": g(163, 3, 4)}, dim=1)
case("aminmax_dim_keepdim", "torch.aminmax", {"input": g(164, 3, 4)}, dim=0, keepdim=True)
case("aminmax_all_keepdim", "torch.aminmax", {"input": g(165, 3, 4)}, keepdim=True)
case("aminmax_int", "torch.aminmax", {"input": gi(166, -9, 9, 5)})
case("aminmax_nan", "torch.aminmax", {"input": T([1.0, NAN, -1.0])})
grad_case("aminmax_grad", "torch.aminmax", {"input": T([[1.0, 3.0, 3.0], [0.0, -1.0, -1.0]])}, ["input"], dim=1)
error_case("err_aminmax_empty", "torch.aminmax", {"input": torch.ones(0)})
for fn in ["var_mean", "std_mean"]:
    grad_case(f"{fn}_all", f"torch.{fn}", {"input": g(167, 3, 4)}, ["input"])
    grad_case(f"{fn}_dim_correction0", f"torch.{fn}", {"input": g(168, 3, 4)}, ["input"], dim=1, correction=0)
    case(f"{fn}_dims_keepdim_f64", f"torch.{fn}", {"input": g(169, 2, 3, 4, dtype=f64)}, dim=[0, 2], keepdim=True)
    error_case(f"err_{fn}_int", f"torch.{fn}", {"input": T([1, 2])})
# ------------------------------------------------------------ scans
sx = T([3.0, 1.0, 3.0, 2.0, 5.0, 5.0, NAN, 7.0, 1.0])
for fn in ["cummax", "cummin"]:
    case(f"{fn}_ties_nan", f"torch.{fn}", {"input": sx}, dim=0)
    grad_case(f"{fn}_2d", f"torch.{fn}", {"input": (g(170, 3, 6) * 2).round()}, ["input"], dim=1)
    case(f"{fn}_2d_dim0", f"torch.{fn}", {"input": gi(171, 0, 4, 5, 3)}, dim=0)
    case(f"{fn}_bool", f"torch.{fn}", {"input": T([False, True, False, True])}, dim=0)
    case(f"{fn}_uint8", f"torch.{fn}", {"input": T([3, 7, 7, 1], dtype=u8)}, dim=0)
    case(f"{fn}_0d", f"torch.{fn}", {"input": T(1.5)}, dim=0)
grad_case("logcumsumexp_dim1", "torch.logcumsumexp", {"input": g(172, 3, 5)}, ["input"], dim=1)
grad_case("logcumsumexp_dim0_f64", "torch.logcumsumexp", {"input": g(173, 4, 3, dtype=f64)}, ["input"], dim=0)
case("logcumsumexp_inf_nan", "torch.logcumsumexp", {"input": T([-INF, -INF, 1.0, INF, INF, NAN, 2.0])}, dim=0)
case("logcumsumexp_big", "torch.logcumsumexp", {"input": g(174, 200) * 50}, dim=0)
case("logcumsumexp_f16", "torch.logcumsumexp", {"input": g(175, 10, dtype=f16)}, dim=0)
case("logcumsumexp_bf16", "torch.logcumsumexp", {"input": g(176, 10, dtype=bf16)}, dim=0)
error_case("err_logcumsumexp_int", "torch.logcumsumexp", {"input": T([1, 2])}, dim=0)
dx = g(177, 3, 5)
grad_case("diff_default", "torch.diff", {"input": dx}, ["input"])
grad_case("diff_n2_dim0", "torch.diff", {"input": dx}, ["input"], n=2, dim=0)
grad_case("diff_prepend_append", "torch.diff", {"input": dx, "prepend": g(178, 3, 2), "append": g(179, 3, 1)},
          ["input", "prepend", "append"], dim=1)
case("diff_bool", "torch.diff", {"input": T([True, True, False, True])})
case("diff_int", "torch.diff", {"input": T([1, 4, 9, 16], dtype=i32)}, n=2)
case("diff_n_big", "torch.diff", {"input": T([1.0, 2.0, 4.0])}, n=5)
case("diff_n0", "torch.diff", {"input": T([1.0, 2.0, 4.0])}, n=0)
error_case("err_diff_0d", "torch.diff", {"input": T(1.0)})
# ------------------------------------------------------------ dtype arguments
ix = gi(180, -5, 6, 3, 4, dtype=i32)
case("cumsum_dtype_f64", "torch.cumsum", {"input": ix}, dim=1, dtype=f64)
case("cumsum_dtype_i32", "torch.cumsum", {"input": ix}, dim=0, dtype=i32)
case("cumprod_dtype_f32", "torch.cumprod", {"input": ix}, dim=1, dtype=torch.float32)
case("prod_dtype_f64", "torch.prod", {"input": ix}, dtype=f64)
case("prod_dim_dtype_i32", "torch.prod", {"input": ix}, dim=1, dtype=i32)
case("mean_dtype_int", "torch.mean", {"input": ix}, dtype=f64)
case("mean_dim_dtype", "torch.mean", {"input": g(181, 3, 4)}, dim=1, dtype=f64)
case("sum_int_default_int64", "torch.sum", {"input": ix})
error_case("err_mean_int", "torch.mean", {"input": ix})

# ------------------------------------------------------------ default (unstable) sort: PyTorch's tie order
for n in [10, 16, 17, 40, 300]:
    xs = tied(190 + n, n)
    xs[::5] = NAN
    case(f"sort_default_ties_n{n}", "torch.sort", {"input": xs})
    case(f"sort_default_ties_desc_n{n}", "torch.sort", {"input": xs}, descending=True)
    case(f"argsort_default_ties_n{n}", "torch.argsort", {"input": tied(191 + n, n, dtype=torch.int64)})
case("sort_default_2d_dim0", "torch.sort", {"input": tied(195, 40, 3)}, dim=0)
case("sort_default_int32_desc", "torch.sort", {"input": tied(196, 3, 50, dtype=i32)}, dim=1, descending=True)
case("sort_stable_ties_n300", "torch.sort", {"input": tied(197, 300)}, stable=True)
nanu = T([-5.5, -0.96, -3.0, NAN, -2.5, -INF, -0.15, -2.21, -2.28, NAN, -1.5, -2.5, 0.035, -1.5, -2.03, -1.14,
          -2.5, 1.28, -6.0, -1.68, NAN, -2.0, -2.5, 0.0, -5.5], dtype=f64)
case("unique_nan_order", "torch.unique", {"input": nanu}, return_inverse=True, return_counts=True)
zs_ = T([0.0, -0.0, 1.0] * 10 + [-0.0, 2.0])
case("unique_signed_zeros_many", "torch.unique", {"input": zs_}, return_inverse=True, return_counts=True)
case("unique_consecutive_0d_nan", "torch.unique_consecutive", {"input": T(NAN)}, return_inverse=True,
     return_counts=True)
case("cummax_empty_dim", "torch.cummax", {"input": torch.ones(2, 0, 3)}, dim=1)
case("median_empty_bool", "torch.median", {"input": torch.ones(0, dtype=torch.bool)})
error_case("err_unique_0d_dim", "torch.unique", {"input": T(5)}, dim=0)

# ------------------------------------------------------------ shape and indexing
def star_case(name, op, tensors, **kwargs):
    """op(*tensors, **kwargs): inputs named "tensors" (a list)."""
    r = resolve(op)(*tensors, **kwargs)
    add_case(name, op, tensors, enc_out(r), kwargs, ["tensors"] * len(tensors), None, input_list="tensors")


sx2 = g(200, 3, 4)
case("tile", "torch.tile", {"input": sx2}, dims=(2, 1, 2))
case("tile_short", "torch.tile", {"input": sx2}, dims=(2,))
grad_case("repeat_interleave_int_dim", "torch.repeat_interleave", {"input": sx2}, ["input"], repeats=2, dim=1)
case("repeat_interleave_flat", "torch.repeat_interleave", {"input": sx2}, repeats=3)
grad_case("repeat_interleave_tensor", "torch.repeat_interleave", {"input": sx2, "repeats": T([1, 0, 2])}, ["input"],
          dim=0)
error_case("err_repeat_interleave_neg", "torch.repeat_interleave", {"input": sx2}, repeats=-1)
error_case("err_repeat_interleave_len", "torch.repeat_interleave", {"input": sx2, "repeats": T([1, 2])}, dim=0)
x4 = g(201, 2, 3, 4, 5)
case("movedim_int", "torch.movedim", {"input": x4}, source=0, destination=2)
case("movedim_list", "torch.movedim", {"input": x4}, source=[0, 3], destination=[3, 1])
case("moveaxis_neg", "torch.moveaxis", {"input": x4}, source=-1, destination=0)
case("swapaxes", "torch.swapaxes", {"input": x4}, axis0=1, axis1=3)
grad_case("take_along_dim", "torch.take_along_dim", {"input": sx2, "indices": T([[0], [3], [1]])}, ["input"], dim=1)
case("take_along_dim_bcast", "torch.take_along_dim", {"input": sx2, "indices": T([[0, 2, 1, 0]])}, dim=0)
case("take_along_dim_flat", "torch.take_along_dim", {"input": sx2, "indices": T([0, 11, 5])})
case("argwhere", "torch.argwhere", {"input": T([[0, 1, 0], [2, 0, 3]])})
case("nonzero_as_tuple", "torch.nonzero", {"input": T([[0, 1, 0], [2, 0, 3]])}, as_tuple=True)
star_case("meshgrid_ij", "torch.meshgrid", [T([1, 2, 3]), T([4, 5])], indexing="ij")
star_case("meshgrid_xy", "torch.meshgrid", [T([1, 2, 3]), T([4, 5]), T([6, 7])], indexing="xy")
star_case("cartesian_prod", "torch.cartesian_prod", [T([1, 2, 3]), T([4, 5])])
star_case("broadcast_tensors", "torch.broadcast_tensors", [g(202, 3, 1), g(203, 4)])
star_case("atleast_3d_1d", "torch.atleast_3d", [T([1.0, 2.0])])
star_case("atleast_2d_0d", "torch.atleast_2d", [T(1.0)])
star_case("atleast_3d_2d", "torch.atleast_3d", [sx2])
case("tril_indices", "torch.tril_indices", {}, row=4, col=3, offset=-1)
case("triu_indices", "torch.triu_indices", {}, row=3, col=5, offset=1)
grad_case("roll_dims", "torch.roll", {"input": sx2}, ["input"], shifts=(1, -2), dims=(0, 1))
case("roll_flat", "torch.roll", {"input": sx2}, shifts=5)
case("roll_big_shift", "torch.roll", {"input": sx2}, shifts=-7, dims=1)
grad_case("diagonal_offset", "torch.diagonal", {"input": x4}, ["input"], offset=1, dim1=1, dim2=3)
grad_case("diagonal_neg", "torch.diagonal", {"input": g(204, 4, 3)}, ["input"], offset=-1)
case("diagonal_empty", "torch.diagonal", {"input": g(205, 2, 3)}, offset=5)
grad_case("diag_embed", "torch.diag_embed", {"input": sx2}, ["input"], offset=1, dim1=0, dim2=2)
grad_case("diag_1d", "torch.diag", {"input": T([1.0, 2.0, 3.0])}, ["input"], diagonal=-1)
grad_case("diag_2d", "torch.diag", {"input": sx2}, ["input"], diagonal=1)
grad_case("trace", "torch.trace", {"input": sx2}, ["input"])
case("trace_int", "torch.trace", {"input": T([[1, 2], [3, 4]], dtype=i32)})
error_case("err_trace_1d", "torch.trace", {"input": T([1.0])})
star_case("block_diag", "torch.block_diag", [g(206, 2, 2), g(207, 3), g(208, 1, 2), T(4.0)])
star_case("block_diag_promote", "torch.block_diag", [T([[1, 2]]), T([0.5])])
grad_case("unfold_overlap", "torch.Tensor.unfold", {"self": g(209, 3, 7)}, ["self"], dimension=1, size=3, step=2)
grad_case("unfold_dim0", "torch.Tensor.unfold", {"self": g(210, 6, 2)}, ["self"], dimension=0, size=2, step=1)
error_case("err_unfold_size", "torch.Tensor.unfold", {"self": g(210, 6, 2)}, dimension=1, size=3, step=1)
mk = T([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
grad_case("masked_select", "torch.masked_select", {"input": sx2, "mask": mk}, ["input"])
grad_case("masked_select_bcast", "torch.masked_select", {"input": g(211, 4), "mask": mk}, ["input"])
grad_case("masked_scatter", "torch.Tensor.masked_scatter", {"self": sx2, "mask": mk, "source": g(212, 4, 4)},
          ["self", "source"])
error_case("err_masked_scatter_short", "torch.Tensor.masked_scatter", {"self": sx2, "mask": mk, "source": g(212, 3)})
grad_case("take", "torch.take", {"input": sx2, "index": T([[0, -1], [5, 5]])}, ["input"])
error_case("err_take_range", "torch.take", {"input": sx2, "index": T([12])})
ia_src = g(213, 4, 4)
ia_idx = T([2, 0, 2, 1])
grad_case("index_add", "torch.Tensor.index_add", {"self": sx2, "index": ia_idx, "source": ia_src}, ["self", "source"],
          dim=0)
grad_case("index_add_alpha_dim1", "torch.Tensor.index_add", {"self": sx2, "index": T([3, 3, 0]),
          "source": g(214, 3, 3)}, ["self", "source"], dim=1, alpha=-2.5)
case("index_add_int", "torch.Tensor.index_add", {"self": T([1, 2, 3]), "index": T([0, 0]), "source": T([5, 7])},
     dim=0, alpha=2)
grad_case("index_copy", "torch.Tensor.index_copy", {"self": sx2, "index": T([2, 0]), "source": g(215, 2, 4)},
          ["self", "source"], dim=0)
grad_case("index_fill", "torch.Tensor.index_fill", {"self": sx2, "index": T([1, -1])}, ["self"], dim=1, value=-3.0)
error_case("err_index_add_range", "torch.Tensor.index_add", {"self": sx2, "index": T([3]), "source": g(1, 1, 4)}, dim=0)
error_case("err_index_add_count", "torch.Tensor.index_add", {"self": sx2, "index": T([0, 1]), "source": g(1, 1, 4)},
           dim=0)
error_case("err_index_add_dtype", "torch.Tensor.index_add", {"self": sx2, "index": T([0]),
           "source": g(1, 1, 4, dtype=f64)}, dim=0)

# ------------------------------------------------------------ searchsorted, bucketize, bincount, histc
seq = T([1.0, 3.0, 3.0, 5.0, 7.0])
qv = T([[0.0, 3.0, 6.0], [7.0, 8.0, NAN]])
case("searchsorted_left", "torch.searchsorted", {"sorted_sequence": seq, "input": qv})
case("searchsorted_right", "torch.searchsorted", {"sorted_sequence": seq, "input": qv}, right=True)
case("searchsorted_side", "torch.searchsorted", {"sorted_sequence": seq, "input": qv}, side="right")
case("searchsorted_nan_seq", "torch.searchsorted", {"sorted_sequence": T([1.0, NAN, 5.0]),
     "input": T([NAN, 2.0, 6.0])})
case("searchsorted_nd", "torch.searchsorted", {"sorted_sequence": T([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]),
     "input": T([[3.0, 0.0], [3.0, 9.0]])}, right=True)
case("searchsorted_int_float", "torch.searchsorted", {"sorted_sequence": T([1, 3, 5]), "input": T([2.5, 3.0])})
case("searchsorted_sorter", "torch.searchsorted", {"sorted_sequence": T([5.0, 1.0, 3.0]), "input": T([3.0, 4.0]),
     "sorter": T([1, 2, 0])})
case("searchsorted_int32", "torch.searchsorted", {"sorted_sequence": seq, "input": T([3.0])}, out_int32=True)
error_case("err_searchsorted_nd", "torch.searchsorted", {"sorted_sequence": T([[1.0, 3.0], [2.0, 4.0]]),
           "input": T([[3.0]])})
case("bucketize", "torch.bucketize", {"input": T([[1, 5], [3, 9]]), "boundaries": T([1, 3, 5, 7])})
case("bucketize_right", "torch.bucketize", {"input": T([[1, 5], [3, 9]]), "boundaries": T([1, 3, 5, 7])}, right=True)
error_case("err_bucketize_2d", "torch.bucketize", {"input": T([1]), "boundaries": T([[1, 3]])})
bc = gi(220, 0, 6, 40)
case("bincount", "torch.bincount", {"input": bc})
case("bincount_minlength", "torch.bincount", {"input": bc}, minlength=10)
case("bincount_w_f32", "torch.bincount", {"input": bc, "weights": g(221, 40)})
case("bincount_w_f64", "torch.bincount", {"input": bc, "weights": g(222, 40, dtype=f64)})
case("bincount_w_int", "torch.bincount", {"input": bc, "weights": gi(223, -3, 3, 40)})
case("bincount_uint8", "torch.bincount", {"input": T([0, 2, 2], dtype=u8)})
case("bincount_empty", "torch.bincount", {"input": torch.zeros(0, dtype=torch.int64)}, minlength=3)
error_case("err_bincount_neg", "torch.bincount", {"input": T([0, -1])})
error_case("err_bincount_float", "torch.bincount", {"input": T([0.0, 1.0])})
error_case("err_bincount_2d", "torch.bincount", {"input": T([[0, 1]])})
hx = g(224, 500) * 2
case("histc", "torch.histc", {"input": hx}, bins=7, min=-3, max=3)
case("histc_auto", "torch.histc", {"input": hx}, bins=13)
case("histc_f64", "torch.histc", {"input": T([0.1, 0.2, 0.3, 0.7, 1.0, 0.0], dtype=f64)}, bins=10, min=0, max=1)
case("histc_same", "torch.histc", {"input": T([2.0, 2.0])}, bins=3)
case("histc_nan", "torch.histc", {"input": T([1.0, NAN, 2.0])}, bins=3, min=0, max=3)
case("histc_edges", "torch.histc", {"input": torch.linspace(0, 1, 101)}, bins=10, min=0, max=1)
error_case("err_histc_int", "torch.histc", {"input": T([1, 2])}, bins=3)
error_case("err_histc_range", "torch.histc", {"input": T([1.0, 2.0])}, bins=3, min=3, max=1)
error_case("err_histc_inf", "torch.histc", {"input": T([1.0, INF])}, bins=3)
# ------------------------------------------------------------ constructors
error_case("err_full_uint8_overflow", "torch.full", {}, size=[2], fill_value=300, dtype=u8)
error_case("err_full_int32_overflow", "torch.full", {}, size=[2], fill_value=2**40, dtype=i32)
error_case("err_full_f16_overflow", "torch.full", {}, size=[2], fill_value=1e6, dtype=f16)
case("full_float_to_int", "torch.full", {}, size=[2], fill_value=1.5, dtype=torch.int64)
case("full_bool_2", "torch.full", {}, size=[2], fill_value=2, dtype=torch.bool)
# ------------------------------------------------------------ erfinv (nn.init.trunc_normal_)
grid = torch.linspace(-1.0, 1.0, 801)
case("erfinv_f32_grid", "torch.erfinv", {"input": torch.cat([grid, T([0.7, -0.7, 0.70000005, 1.5, NAN, -0.0])])})
case("erfinv_f64_grid", "torch.erfinv", {"input": torch.linspace(-1.0, 1.0, 401, dtype=f64)})
case("erfinv_int", "torch.erfinv", {"input": T([-1, 0, 1])})
grad_case("erfinv_grad", "torch.erfinv", {"input": g(300, 3, 4, dtype=f64).clamp(-0.95, 0.95)}, ["input"])

write(OUT, "ops")
