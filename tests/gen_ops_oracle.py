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

write(OUT, "ops")
