"""Writes tests/oracle_extra/random.json: PyTorch's samples for the random
ops (same seed, same numbers): the in-place fills (uniform_, normal_,
bernoulli_, random_, exponential_, geometric_, cauchy_, log_normal_) for
every dtype, sizes around the 16-element blocks of normal_, non-contiguous
targets, generator sequences (the normal cache), randperm, multinomial
(with and without replacement, ties), poisson, bernoulli with a
probability tensor, normal with tensor mean / std, and the errors.

Run with the benchmark venv (PyTorch 2.15.0, CPU; one thread):

    bench/.venv/bin/python tests/gen_random_oracle.py

Case forms (see tests/oracle_extra/README.md): `seed` in kwargs means
`torch.manual_seed(seed)` right before the call; in-place fills take a
zero `self` of the dtype; a chain whose later random steps carry no `seed`
continues with the same generator.
"""

import os
import warnings

from oracle_common import *  # noqa: F401,F403
from oracle_common import add_case, enc_out

torch.set_num_threads(1)
warnings.filterwarnings("ignore", message=r".*out of bounds \[")

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle_extra", "random.json")

T = torch.tensor
FL = ["float32", "float64", "float16", "bfloat16"]
INTS = ["bool", "uint8", "int32", "int64"]
ALL = INTS + FL
SIZES = [1, 3, 15, 16, 17, 33, 100]
SEEDS = [0, 42, 2**32 + 7, 123456789, 7, 2024]


def D(name):
    return DTYPES[name]


def seed_for(*parts):
    """A seed from SEEDS picked by the case's parameters (reproducible)."""
    return SEEDS[sum(ord(c) for c in repr(parts)) % len(SEEDS)]


def call_method(x, method, kw):
    return getattr(torch.Tensor, method)(x, **kw)


def fill(name, method, shape, dtype, seed, **kw):
    """torch.manual_seed(seed); torch.zeros(shape, dtype).<method>(**kw)."""
    x = torch.zeros(shape, dtype=D(dtype))
    torch.manual_seed(seed)
    r = call_method(x.clone(), method, kw)
    add_case(name, "torch.Tensor." + method, [x], enc_out(r), dict(kw, seed=seed), ["self"])


def fill_with(name, method, shape, dtype, seed, others, **kw):
    """Like `fill`, with tensor arguments `others` (name -> tensor)."""
    x = torch.zeros(shape, dtype=D(dtype))
    torch.manual_seed(seed)
    r = call_method(x.clone(), method, dict(kw, **others))
    add_case(name, "torch.Tensor." + method, [x] + list(others.values()), enc_out(r), dict(kw, seed=seed),
             ["self"] + list(others.keys()))


def seq(name, x, steps, others=None):
    """A chain on x: (method, kwargs[, names of `others`]); a kwargs `seed`
    is torch.manual_seed(seed) before that step (the later steps continue
    on the same generator)."""
    others = others or {}
    r = x.clone()
    full = []
    for step in steps:
        method, kw = step[0], dict(step[1])
        names = list(step[2]) if len(step) > 2 else []
        if "seed" in kw:
            torch.manual_seed(kw["seed"])
        call_kw = {k: v for k, v in kw.items() if k != "seed"}
        if method == "__getitem__":
            items = [slice(*it["slice"]) if isinstance(it, dict) else it for it in call_kw["index"]]
            r = r[tuple(items)]
        else:
            r = getattr(torch.Tensor, method)(r, **call_kw, **{n: others[n] for n in names})
        full.append(("torch.Tensor." + method, kw, ["self"] + names))
    add_case(name, "chain", [x] + list(others.values()), enc_out(r), {}, ["self"] + list(others.keys()), None,
             kind="chain", steps=full)


def fn(name, op, seed, inputs=None, **kw):
    """torch.manual_seed(seed); op(**inputs, **kw)."""
    inputs = inputs or {}
    torch.manual_seed(seed)
    r = resolve(op)(**inputs, **kw)
    add_case(name, op, list(inputs.values()), enc_out(r), dict(kw, seed=seed), list(inputs.keys()))


def err(name, op, inputs=None, seed=0, **kw):
    """A call PyTorch rejects; `op` is torch.<fn> or torch.Tensor.<method>
    (then `inputs` holds `self`)."""
    inputs = inputs or {}
    torch.manual_seed(seed)
    try:
        if op.startswith("torch.Tensor."):
            rest = dict(inputs)
            resolve(op)(rest.pop("self").clone(), **rest, **kw)
        else:
            resolve(op)(**inputs, **kw)
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0]
    else:
        raise AssertionError(f"{name}: PyTorch accepted the call")
    add_case(name, op, list(inputs.values()), None, dict(kw, seed=seed), list(inputs.keys()), kind="error",
             error=msg)


def Z(shape, dtype):
    return torch.zeros(shape, dtype=D(dtype))


def vals(dtype, values):
    return T(values, dtype=torch.float64).to(D(dtype))


# ------------------------------------------------------------------ uniform_
for dt in FL:
    for n in SIZES:
        for lo, hi in [(0.0, 1.0), (-1.3, 2.7), (-3.0, 1e-3)]:
            fill(f"uniform_{dt}_{n}_{lo}_{hi}", "uniform_", [n], dt, seed_for("u", dt, n, lo), **{"from": lo, "to": hi})
fill("uniform_float16_near_max", "uniform_", [500], "float16", 3, **{"from": 60000.0, "to": 65504.0})
fill("uniform_bfloat16_rounds_to_to", "uniform_", [500], "bfloat16", 4, **{"from": 1.0, "to": 1.01})
fill("uniform_float32_rounds_to_to", "uniform_", [300], "float32", 5, **{"from": 1.0, "to": 1.0000001})
fill("uniform_empty", "uniform_", [0, 3], "float32", 1)
fill("uniform_2d", "uniform_", [4, 5], "float64", 6, **{"from": -2.0, "to": 2.0})

# ------------------------------------------------------------------- normal_
for dt in FL:
    for n in SIZES + [31, 32, 257]:
        for mean, std in ([(0.0, 1.0), (1.5, 0.3)] if n in (3, 17, 257) else [(0.0, 1.0)]):
            fill(f"normal_{dt}_{n}_{mean}_{std}", "normal_", [n], dt, seed_for("n", dt, n, mean), mean=mean, std=std)
fill("normal_float32_4099", "normal_", [4099], "float32", 77)
fill("normal_float32_2d_5x7", "normal_", [5, 7], "float32", 9)
fill("normal_std0", "normal_", [20], "float32", 10, mean=2.0, std=0.0)
fill("normal_empty_int64", "normal_", [0], "int64", 1)
for dt in FL:
    fn(f"randn_{dt}_33", "torch.randn", 11, size=[33], dtype=D(dt))
    fn(f"rand_{dt}_33", "torch.rand", 12, size=[33], dtype=D(dt))
    fn(f"normal_factory_{dt}_40", "torch.normal", 13, mean=-1.0, std=3.0, size=[40], dtype=D(dt))
fn("randint_2pow28_minus_1", "torch.randint", 14, low=0, high=2**28 - 1, size=[40])
fn("randint_2pow28", "torch.randint", 15, low=0, high=2**28, size=[40])
fn("randint_2pow32", "torch.randint", 16, low=-2**31, high=2**31, size=[40])
fn("randint_int32", "torch.randint", 17, low=-3, high=3, size=[40], dtype=torch.int32)
fn("randint_float32", "torch.randint", 18, low=5, high=6, size=[10], dtype=torch.float32)

# ---------------------------------------------------------------- bernoulli
for dt in ALL:
    for p in [0.0, 0.3, 1.0]:
        fill(f"bernoulli_scalar_{dt}_{p}", "bernoulli_", [100], dt, seed_for("b", dt, p), p=p)
pv = torch.rand(50, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
pv[:3] = T([0.0, 1.0, 0.5], dtype=torch.float64)
for pdt in FL:
    for odt in ["bool", "int64", "float32", "float16", "uint8"]:
        fill_with(f"bernoulli_tensor_{odt}_p_{pdt}", "bernoulli_", [3, 50], odt, seed_for("bt", odt, pdt),
                  {"p": pv.to(D(pdt))})
    fn(f"bernoulli_fn_{pdt}", "torch.bernoulli", seed_for("bf", pdt), {"input": pv.to(D(pdt)).reshape(5, 10)})
fill_with("bernoulli_tensor_p_column", "bernoulli_", [4, 6], "float32", 3, {"p": pv[:4].reshape(4, 1).float()})

# ------------------------------------------------------------------ random_
for dt in ALL:
    for n in [1, 17, 100]:
        fill(f"random_{dt}_{n}", "random_", [n], dt, seed_for("r", dt, n))
for dt in ALL:
    for to in [1, 2, 10, 100, 2049]:
        if dt == "bool" and to > 2 or dt == "uint8" and to > 256:
            continue
        fill(f"random_to_{dt}_{to}", "random_", [100], dt, seed_for("rt", dt, to), to=to)
for dt, frm, to in [("int64", -5, 5), ("int64", 0, 2**28 - 1), ("int64", 0, 2**28), ("int64", -2**40, 2**40),
                    ("int64", -2**63, 2**63 - 1), ("int32", -2**31, 2**31 - 1), ("int32", -300, 300),
                    ("uint8", 3, 200), ("uint8", 0, 256), ("bool", 0, 2), ("float32", -2**24, 2**24),
                    ("float32", 0, 2**30), ("float32", 3, 2**24 + 4), ("float64", -2**53, 2**53),
                    ("float16", 0, 65504), ("float16", -2048, 2049), ("float16", 1000, 3001),
                    ("bfloat16", -256, 257), ("bfloat16", 0, 2**20), ("bfloat16", 300, 2**12 + 3)]:
    fill(f"random_from_to_{dt}_{frm}_{to}", "random_", [100], dt, seed_for("rft", dt, frm, to), **{"from": frm, "to": to})
for dt, frm in [("int64", 0), ("int64", -7), ("int32", 0), ("int32", -2**31), ("uint8", 0), ("uint8", 17),
                ("bool", 0), ("float32", 0), ("float64", 0), ("float16", 0), ("float16", 2047), ("bfloat16", 0),
                ("int64", -2**63), ("float64", -2**63), ("float32", -2**63), ("bfloat16", -2**63)]:
    fill(f"random_from_{dt}_{frm}", "random_", [100], dt, seed_for("rf", dt, frm), **{"from": frm, "to": None})

# ------------------------------------- exponential_, geometric_, cauchy_, log_normal_
for dt in FL:
    for n in [1, 3, 17, 100]:
        for lam in [1.0, 0.5, 3.7]:
            fill(f"exponential_{dt}_{n}_{lam}", "exponential_", [n], dt, seed_for("e", dt, n, lam), lambd=lam)
        fill(f"cauchy_{dt}_{n}", "cauchy_", [n], dt, seed_for("c", dt, n), median=0.5, sigma=2.5)
        fill(f"log_normal_{dt}_{n}", "log_normal_", [n], dt, seed_for("l", dt, n), mean=1.0, std=2.0)
        fill(f"log_normal_small_{dt}_{n}", "log_normal_", [n], dt, seed_for("ls", dt, n), mean=-0.5, std=0.25)
for dt in FL + ["int64", "int32", "uint8"]:
    for p in [0.2, 0.9, 1e-6, 1e-12]:
        fill(f"geometric_{dt}_{p}", "geometric_", [100], dt, seed_for("g", dt, p), p=p)

# -------------------------------------------------------------- non-contiguous
for dt in ["float32", "float64", "float16", "int64"]:
    x = Z([8, 4], dt)
    if dt != "int64":
        seq(f"uniform_transposed_{dt}", x, [("t", {}), ("uniform_", {"from": -1.0, "to": 1.0, "seed": 78})])
        seq(f"normal_transposed_{dt}", x, [("t", {}), ("normal_", {"seed": 10})])
        seq(f"exponential_transposed_{dt}", x, [("t", {}), ("exponential_", {"lambd": 2.0, "seed": 11})])
        seq(f"log_normal_transposed_{dt}", x, [("t", {}), ("log_normal_", {"seed": 12})])
        seq(f"cauchy_sliced_{dt}", x, [("__getitem__", {"index": [{"slice": [None, None, 2]}]}),
                                       ("cauchy_", {"seed": 13})])
        seq(f"normal_sliced_{dt}", Z([40, 2], dt), [("__getitem__", {"index": [{"slice": [None, None, 2]}]}),
                                                   ("normal_", {"seed": 14})])
    seq(f"random_transposed_{dt}", x, [("t", {}), ("random_", {"to": 50, "seed": 15})])
    seq(f"bernoulli_transposed_{dt}", x, [("t", {}), ("bernoulli_", {"p": 0.4, "seed": 16})])
    seq(f"geometric_permuted_{dt}", Z([2, 3, 4], dt), [("permute", {"dims": [2, 0, 1]}),
                                                       ("geometric_", {"p": 0.3, "seed": 17})])
    seq(f"bernoulli_tensor_transposed_{dt}", x, [("t", {}), ("bernoulli_", {"seed": 18}, ["p"])],
        others={"p": pv[:8].float()})
# A contiguous view of 16+ elements after a slice with an offset: the block path.
seq("normal_offset_view_float32", Z([40], "float32"), [("__getitem__", {"index": [{"slice": [5, 37, None]}]}),
                                                        ("normal_", {"seed": 19})])

# ------------------------------------------------- generator sequences (normal cache)
seq("cache_normal_then_log_normal_f64", Z([5], "float64"),
    [("normal_", {"seed": 20}), ("__getitem__", {"index": [{"slice": [0, 3, None]}]}), ("log_normal_", {})])
seq("cache_normal3_then_normal1_f32", Z([3], "float32"),
    [("normal_", {"seed": 21}), ("__getitem__", {"index": [{"slice": [0, 1, None]}]}), ("normal_", {})])
seq("cache_block_path_keeps_cache", Z([20], "float64"),
    [("__getitem__", {"index": [{"slice": [0, 1, None]}]}), ("normal_", {"seed": 22}),
     ("expand", {"size": [1]}), ("__getitem__", {"index": [{"slice": [0, 1, None]}]}), ("normal_", {})])
seq("cache_cleared_by_seed", Z([3], "float64"),
    [("normal_", {"seed": 23}), ("normal_", {"seed": 23})])
seq("sequence_uniform_normal_random", Z([20], "float32"),
    [("uniform_", {"seed": 24}), ("normal_", {}), ("exponential_", {}), ("random_", {"to": 7})])

# ------------------------------------------------------------------ randperm
for dt in ["int64", "int32", "uint8", "float32", "float64", "float16", "bfloat16"]:
    for n in [0, 1, 2, 15, 16, 17, 200] + ([2049] if dt == "float16" else []):
        fn(f"randperm_{dt}_{n}", "torch.randperm", seed_for("rp", dt, n), n=n, dtype=D(dt))
fn("randperm_uint8_256", "torch.randperm", 3, n=256, dtype=torch.uint8)
fn("randperm_bfloat16_3000_duplicates", "torch.randperm", 4, n=3000, dtype=torch.bfloat16)
fn("randperm_int64_3000", "torch.randperm", 5, n=3000)

# --------------------------------------------------------------- multinomial
rsm = np.random.RandomState(2)
for dt in FL:
    for shape in [(7,), (3, 10), (2, 100)]:
        pr = rsm.uniform(0, 1, shape)
        pr[..., 0] = 0  # a zero category
        prt = T(pr).to(D(dt))
        for ns, rep in [(1, False), (1, True), (3, True), (3, False), (5, True), (shape[-1] - 1, False),
                        (shape[-1], False), (2 * shape[-1], True)]:
            if not rep and ns > shape[-1]:
                continue
            fn(f"multinomial_{dt}_{'x'.join(map(str, shape))}_{ns}_{rep}", "torch.multinomial",
               seed_for("m", dt, shape, ns, rep), {"input": prt}, num_samples=ns, replacement=rep)
for dt in ["float16", "bfloat16"]:  # exact ties among p / q (zeros too): libstdc++'s order matters
    pr = rsm.uniform(0, 1, (2, 600))
    pr[:, ::2] = 0
    prt = T(pr).to(D(dt))
    for ns in [9, 10, 350, 599]:  # partial_sort up to 600 / 64 samples, nth_element + sort beyond
        fn(f"multinomial_ties_{dt}_{ns}", "torch.multinomial", 40 + ns, {"input": prt}, num_samples=ns)
pz = T([0.0, 0.5, 0, 0, 0.5, 0, 0] * 3)
for ns in [2, 5, 10, 21]:
    fn(f"multinomial_zeros_picked_{ns}", "torch.multinomial", ns, {"input": pz}, num_samples=ns)
fn("multinomial_empty_rows", "torch.multinomial", 1, {"input": torch.ones(0, 3)}, num_samples=2)
seq("multinomial_transposed", torch.rand(6, 5, generator=torch.Generator().manual_seed(3)),
    [("t", {}), ("multinomial", {"num_samples": 3, "seed": 25})])
seq("multinomial_transposed_replacement", torch.rand(6, 5, generator=torch.Generator().manual_seed(3)),
    [("t", {}), ("multinomial", {"num_samples": 4, "replacement": True, "seed": 26})])

# ------------------------------------------------------------------- poisson
rates = T([0.0, 0.1, 1.0, 4.5, 9.99, 10.0, 12.3, 50.0, 1000.0, 1e6] * 10, dtype=torch.float64)
for dt in FL:
    rv = rates.clamp(max=6e4) if dt == "float16" else rates
    fn(f"poisson_{dt}", "torch.poisson", seed_for("p", dt), {"input": rv.to(D(dt)).reshape(10, 10)})

# ------------------------------------------------------- normal with tensors
rs = np.random.RandomState(0)
for dt in FL:
    for n in [5, 16, 17, 40]:
        mean = T(rs.uniform(-2, 2, n)).to(D(dt))
        std = T(rs.uniform(0, 3, n)).to(D(dt))
        fn(f"normal_tensor_tensor_{dt}_{n}", "torch.normal", seed_for("ntt", dt, n), {"mean": mean, "std": std})
        fn(f"normal_tensor_float_{dt}_{n}", "torch.normal", seed_for("ntf", dt, n), {"mean": mean}, std=0.7)
        fn(f"normal_float_tensor_{dt}_{n}", "torch.normal", seed_for("nft", dt, n), {"std": std}, mean=-0.3)
fn("normal_tensor_tensor_broadcast", "torch.normal", 3,
   {"mean": T(rs.uniform(-1, 1, (4, 1))).float(), "std": T(rs.uniform(0, 1, (1, 5))).float()})
fn("normal_tensor_tensor_mixed_f32_f64", "torch.normal", 4,
   {"mean": T(rs.uniform(-1, 1, 20)).float(), "std": T(rs.uniform(0, 1, 20))})

# -------------------------------------------------------------------- errors
err("err_randperm_negative", "torch.randperm", n=-1)
err("err_randperm_float16_3000", "torch.randperm", n=3000, dtype=torch.float16)
err("err_randperm_uint8_300", "torch.randperm", n=300, dtype=torch.uint8)
err("err_randperm_bool", "torch.randperm", n=3, dtype=torch.bool)
err("err_randperm_float32_big", "torch.randperm", n=2**24 + 2, dtype=torch.float32)
for p in [1.5, -0.1, NAN]:
    err(f"err_bernoulli_p_{p}", "torch.Tensor.bernoulli_", {"self": Z([3], "float32")}, p=p)
err("err_bernoulli_tensor_p_out_of_range", "torch.Tensor.bernoulli_", {"self": Z([3], "float32"), "p": T([0.5, 1.5, 0.2])})
err("err_bernoulli_tensor_p_f64_nan", "torch.Tensor.bernoulli_",
    {"self": Z([3], "float32"), "p": T([0.5, NAN, 0.2], dtype=torch.float64)})
err("err_bernoulli_tensor_p_int", "torch.Tensor.bernoulli_", {"self": Z([3], "float32"), "p": T([0, 1, 1])})
err("err_bernoulli_tensor_p_shape", "torch.Tensor.bernoulli_", {"self": Z([3], "float32"), "p": torch.ones(4)})
err("err_bernoulli_fn_int", "torch.bernoulli", {"input": T([0, 1])})
for p in [0.0, 1.0, NAN, -0.5]:
    err(f"err_geometric_{p}", "torch.Tensor.geometric_", {"self": Z([3], "float32")}, p=p)
err("err_geometric_bool", "torch.Tensor.geometric_", {"self": Z([3], "bool")}, p=0.5)
for lam in [0.0, -1.0, NAN]:
    err(f"err_exponential_{lam}", "torch.Tensor.exponential_", {"self": Z([3], "float32")}, lambd=lam)
err("err_exponential_int64", "torch.Tensor.exponential_", {"self": Z([3], "int64")})
err("err_exponential_int64_lambda0", "torch.Tensor.exponential_", {"self": Z([3], "int64")}, lambd=0.0)
err("err_cauchy_int64", "torch.Tensor.cauchy_", {"self": Z([3], "int64")})
err("err_cauchy_bool_empty", "torch.Tensor.cauchy_", {"self": Z([0], "bool")})
err("err_cauchy_sigma0", "torch.Tensor.cauchy_", {"self": Z([3], "float32")}, median=0.0, sigma=0.0)
err("err_log_normal_std0", "torch.Tensor.log_normal_", {"self": Z([3], "float32")}, mean=1.0, std=0.0)
err("err_log_normal_int64", "torch.Tensor.log_normal_", {"self": Z([3], "int64")})
err("err_normal_int64", "torch.Tensor.normal_", {"self": Z([3], "int64")})
err("err_normal_std_negative", "torch.Tensor.normal_", {"self": Z([3], "float32")}, mean=0.0, std=-1.0)
err("err_uniform_int64", "torch.Tensor.uniform_", {"self": Z([3], "int64")})
err("err_uniform_from_gt_to", "torch.Tensor.uniform_", {"self": Z([3], "float32")}, **{"from": 2.0, "to": 1.0})
err("err_uniform_span", "torch.Tensor.uniform_", {"self": Z([3], "float32")}, **{"from": -3e38, "to": 3e38})
err("err_uniform_f16_bound", "torch.Tensor.uniform_", {"self": Z([3], "float16")}, **{"from": 0.0, "to": 1e5})
err("err_uniform_nan", "torch.Tensor.uniform_", {"self": Z([3], "float32")}, **{"from": NAN, "to": 1.0})
err("err_random_5_5", "torch.Tensor.random_", {"self": Z([3], "float32")}, **{"from": 5, "to": 5})
err("err_random_uint8_300", "torch.Tensor.random_", {"self": Z([3], "uint8")}, **{"from": 0, "to": 300})
err("err_random_uint8_negative", "torch.Tensor.random_", {"self": Z([3], "uint8")}, **{"from": -1, "to": 5})
err("err_random_bool_3", "torch.Tensor.random_", {"self": Z([3], "bool")}, **{"from": 0, "to": 3})
err("err_random_to_0", "torch.Tensor.random_", {"self": Z([3], "int64")}, to=0)
err("err_random_int32_full_range", "torch.Tensor.random_", {"self": Z([3], "int32")}, **{"from": -2**63, "to": None})
err("err_random_f16_to", "torch.Tensor.random_", {"self": Z([3], "float16")}, **{"from": 0, "to": 2**20})
err("err_random_f16_from_none", "torch.Tensor.random_", {"self": Z([3], "float16")}, **{"from": 2048, "to": None})
err("err_random_f16_casted", "torch.Tensor.random_", {"self": Z([3], "float16")}, **{"from": 2050, "to": 2052})
err("err_poisson_negative", "torch.poisson", {"input": T([1.0, -1.0])})
err("err_poisson_nan", "torch.poisson", {"input": T([NAN])})
err("err_poisson_int64", "torch.poisson", {"input": T([1, 2])})
err("err_multinomial_negative", "torch.multinomial", {"input": T([0.5, -0.1])}, num_samples=1)
err("err_multinomial_negative_replacement", "torch.multinomial", {"input": T([0.5, -0.1])}, num_samples=2,
    replacement=True)
err("err_multinomial_inf", "torch.multinomial", {"input": T([0.5, INF])}, num_samples=1)
err("err_multinomial_inf_replacement", "torch.multinomial", {"input": T([0.5, INF])}, num_samples=2, replacement=True)
err("err_multinomial_nan", "torch.multinomial", {"input": T([0.5, NAN])}, num_samples=1)
err("err_multinomial_nan_replacement", "torch.multinomial", {"input": T([0.5, NAN])}, num_samples=2,
    replacement=True)
err("err_multinomial_zero_row", "torch.multinomial", {"input": T([[1.0, 2.0], [0.0, 0.0]])}, num_samples=1)
err("err_multinomial_zero_row_replacement", "torch.multinomial", {"input": T([[1.0, 2.0], [0.0, 0.0]])},
    num_samples=2, replacement=True)
err("err_multinomial_too_many", "torch.multinomial", {"input": torch.ones(3)}, num_samples=4)
err("err_multinomial_zero_samples", "torch.multinomial", {"input": torch.ones(3)}, num_samples=0)
err("err_multinomial_3d", "torch.multinomial", {"input": torch.ones(2, 2, 2)}, num_samples=1)
err("err_multinomial_int", "torch.multinomial", {"input": T([1, 2])}, num_samples=1)
err("err_multinomial_no_categories", "torch.multinomial", {"input": torch.ones(2, 0)}, num_samples=2,
    replacement=True)
err("err_multinomial_no_categories_one", "torch.multinomial", {"input": torch.ones(2, 0)}, num_samples=1,
    replacement=True)
err("err_normal_tensor_std_negative", "torch.normal", {"mean": torch.zeros(2), "std": T([1.0, -1.0])})
err("err_normal_tensor_std_nan", "torch.normal", {"mean": torch.zeros(2), "std": T([1.0, NAN])})
err("err_normal_tensor_float_std_negative", "torch.normal", {"mean": torch.zeros(2)}, std=-1.0)
err("err_normal_float_tensor_std_negative", "torch.normal", {"std": T([1.0, -1.0])}, mean=0.0)
err("err_normal_tensor_int_mean", "torch.normal", {"mean": T([0, 1]), "std": T([1.0, 1.0])})
err("err_normal_tensor_shapes", "torch.normal", {"mean": torch.zeros(3), "std": torch.ones(4)})

write(OUT, "random")
