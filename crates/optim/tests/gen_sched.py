"""Learning-rate schedules computed by PyTorch, for `tests/schedulers.rs`.

Run with the bench venv (PyTorch 2.15):

    /work/main/bench/.venv/bin/python crates/optim/tests/gen_sched.py

writes `crates/optim/tests/data/schedulers.json`: for several
configurations of each scheduler, the learning rates of every param group
after construction and after each of 100 `step()`s (and the momentum /
beta1 for OneCycleLR, the metric fed to ReduceLROnPlateau), the
scheduler's final `state_dict()` and the optimizer's final param groups.
"""

import json
import math
import os
import warnings

import torch
from torch.optim import lr_scheduler as L

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 100


def jsonable(v):
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return {"tuple": [jsonable(x) for x in v]}
    if isinstance(v, list):
        return [jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, torch.Tensor):
        return v.tolist()
    return v


def make_opt(kind, lrs):
    params = [torch.nn.Parameter(torch.zeros(2)) for _ in lrs]
    groups = [{"params": [p], "lr": lr} for p, lr in zip(params, lrs)]
    if kind == "SGD":
        return torch.optim.SGD(groups, lr=lrs[0], momentum=0.9)
    return torch.optim.Adam(groups, lr=lrs[0])


def momenta(opt):
    out = []
    for g in opt.param_groups:
        out.append(g["betas"][0] if "betas" in g else g["momentum"])
    return out


def record(name, kind, config, optimizer="SGD", lrs=(0.1,), metrics=None, build=None):
    opt = make_opt(optimizer, list(lrs))
    sched = build(opt)
    lr_seq = [[g["lr"] for g in opt.param_groups]]
    mom_seq = [momenta(opt)]
    last = [list(sched.get_last_lr())]
    for s in range(STEPS):
        opt.step()
        if metrics is not None:
            sched.step(metrics[s])
        else:
            sched.step()
        lr_seq.append([g["lr"] for g in opt.param_groups])
        mom_seq.append(momenta(opt))
        last.append(list(sched.get_last_lr()))
    assert all(a == b for a, b in zip(lr_seq, last))
    sd = sched.state_dict()
    if "_schedulers" in sd:
        sd = dict(sd)
    case = {
        "name": name,
        "scheduler": kind,
        "optimizer": optimizer,
        "lrs": list(lrs),
        "config": config,
        "lr": lr_seq,
        "momentum": mom_seq,
        "state_dict": jsonable(sd),
        "param_groups": [
            {k: jsonable(v) for k, v in g.items() if k != "params"} for g in opt.param_groups
        ],
    }
    if metrics is not None:
        case["metrics"] = metrics
    return case


def plateau_metrics(seed, mode):
    g = torch.Generator().manual_seed(seed)
    base = [1.0 / (1 + 0.2 * min(s, 30)) for s in range(STEPS)]
    noise = torch.rand(STEPS, generator=g, dtype=torch.float64).tolist()
    m = [b + 0.01 * n for b, n in zip(base, noise)]
    return m if mode == "min" else [-x for x in m]


cases = []

for cfg in [{"step_size": 7, "gamma": 0.5}, {"step_size": 3, "gamma": 0.1}, {"step_size": 30, "gamma": 0.9}]:
    cases.append(
        record(f"step_{cfg['step_size']}", "StepLR", cfg, lrs=(0.1, 0.05), build=lambda o, c=cfg: L.StepLR(o, **c))
    )
for cfg in [{"milestones": [10, 30, 30, 60], "gamma": 0.3}, {"milestones": [50, 5], "gamma": 0.5}]:
    cases.append(
        record(
            f"multistep_{len(cfg['milestones'])}", "MultiStepLR", cfg, lrs=(0.1, 0.03),
            build=lambda o, c=cfg: L.MultiStepLR(o, **c),
        )
    )
for cfg in [{"gamma": 0.95}, {"gamma": 0.7}]:
    cases.append(record(f"exp_{cfg['gamma']}", "ExponentialLR", cfg, build=lambda o, c=cfg: L.ExponentialLR(o, **c)))
for cfg in [{"T_max": 20, "eta_min": 0.001}, {"T_max": 100, "eta_min": 0.0}, {"T_max": 7, "eta_min": 0.0}, {"T_max": 33, "eta_min": 1e-5}]:
    cases.append(
        record(
            f"cosine_{cfg['T_max']}", "CosineAnnealingLR", cfg, lrs=(0.1, 0.02),
            build=lambda o, c=cfg: L.CosineAnnealingLR(o, **c),
        )
    )
for cfg in [
    {"start_factor": 1.0 / 3, "end_factor": 1.0, "total_iters": 5},
    {"start_factor": 0.5, "end_factor": 0.1, "total_iters": 30},
    {"start_factor": 1.0, "end_factor": 0.0, "total_iters": 50},
    {"start_factor": 0.01, "end_factor": 1.0, "total_iters": 100},
]:
    cases.append(
        record(
            f"linear_{cfg['total_iters']}", "LinearLR", cfg, lrs=(0.1, 0.07),
            build=lambda o, c=cfg: L.LinearLR(o, **c),
        )
    )
# LinearLR(optimizer) with PyTorch's defaults (`LinearLR::default_for`).
cases.append(record("linear_default", "LinearLR", {}, lrs=(0.1, 0.07), build=lambda o: L.LinearLR(o)))
cases.append(record("lambda_pow", "LambdaLR", {"lambda": "pow095"}, build=lambda o: L.LambdaLR(o, lambda e: 0.95**e)))
cases.append(
    record(
        "lambda_per_group", "LambdaLR", {"lambda": ["pow095", "inverse"]}, lrs=(0.1, 0.2),
        build=lambda o: L.LambdaLR(o, [lambda e: 0.95**e, lambda e: 1 / (1 + e)]),
    )
)
# MultiplicativeLR, which ferrotorch has no type for: the test builds it as
# a custom rule with `Scheduler::with_rule`.
cases.append(
    record(
        "multiplicative_per_group", "MultiplicativeLR", {"lambda": ["pow095", "inverse"]}, lrs=(0.1, 0.2),
        build=lambda o: L.MultiplicativeLR(o, [lambda e: 0.95**e, lambda e: 1 / (1 + e)]),
    )
)
ONE_CYCLE = [
    ("onecycle_cos_sgd", "SGD", {"max_lr": 0.1, "total_steps": 100}),
    ("onecycle_linear_adam", "Adam", {"max_lr": 0.01, "total_steps": 100, "anneal_strategy": "linear"}),
    ("onecycle_three_phase", "SGD", {"max_lr": [0.1, 0.5], "epochs": 10, "steps_per_epoch": 10, "three_phase": True}),
    (
        "onecycle_factors",
        "Adam",
        {"max_lr": 0.05, "total_steps": 120, "pct_start": 0.25, "div_factor": 10.0, "final_div_factor": 100.0,
         "base_momentum": 0.8, "max_momentum": 0.9},
    ),
    ("onecycle_no_momentum", "SGD", {"max_lr": 0.3, "total_steps": 100, "cycle_momentum": False, "pct_start": 0.4}),
]
for name, optim, cfg in ONE_CYCLE:
    lrs = (0.1, 0.2) if isinstance(cfg["max_lr"], list) else (0.1,)
    cases.append(record(name, "OneCycleLR", cfg, optimizer=optim, lrs=lrs, build=lambda o, c=cfg: L.OneCycleLR(o, **c)))
PLATEAU = [
    ("plateau_default", {}, "min"),
    ("plateau_patience_cooldown", {"patience": 3, "cooldown": 2, "factor": 0.5, "min_lr": 1e-4}, "min"),
    ("plateau_max_abs", {"mode": "max", "threshold_mode": "abs", "threshold": 0.01, "patience": 2, "factor": 0.3}, "max"),
    ("plateau_min_lr_list", {"patience": 1, "factor": 0.2, "min_lr": [1e-3, 1e-5], "eps": 1e-6}, "min"),
    # Thresholds large enough that some improvements do not count.
    ("plateau_max_rel", {"mode": "max", "threshold": 0.05, "patience": 1, "factor": 0.5}, "max"),
    ("plateau_min_abs", {"threshold_mode": "abs", "threshold": 0.02, "patience": 1, "factor": 0.5}, "min"),
]
for name, cfg, mode in PLATEAU:
    metrics = plateau_metrics(len(name), mode)
    cases.append(
        record(
            name, "ReduceLROnPlateau", cfg, lrs=(0.1, 0.05), metrics=metrics,
            build=lambda o, c=cfg: L.ReduceLROnPlateau(o, **c),
        )
    )
cases.append(
    record(
        "sequential_warmup_cosine", "SequentialLR",
        {"schedulers": [["LinearLR", {"start_factor": 0.1, "end_factor": 1.0, "total_iters": 10}],
                        ["CosineAnnealingLR", {"T_max": 90, "eta_min": 0.0}]], "milestones": [10]},
        lrs=(0.1, 0.05),
        build=lambda o: L.SequentialLR(
            o, [L.LinearLR(o, start_factor=0.1, total_iters=10), L.CosineAnnealingLR(o, T_max=90)], milestones=[10]
        ),
    )
)
cases.append(
    record(
        "sequential_three", "SequentialLR",
        {"schedulers": [["ExponentialLR", {"gamma": 0.9}], ["StepLR", {"step_size": 5, "gamma": 0.5}],
                        ["LinearLR", {"start_factor": 0.5, "end_factor": 1.0, "total_iters": 20}]],
         "milestones": [20, 50]},
        build=lambda o: L.SequentialLR(
            o, [L.ExponentialLR(o, 0.9), L.StepLR(o, 5, 0.5), L.LinearLR(o, 0.5, 1.0, 20)], milestones=[20, 50]
        ),
    )
)

# Schedulers without a closed form after a milestone: SequentialLR restarts
# them with `step(0)`, which runs their `get_lr` at epoch 0.
cases.append(
    record(
        "sequential_lambda_second", "SequentialLR",
        {"schedulers": [["LinearLR", {"start_factor": 0.1, "end_factor": 1.0, "total_iters": 5}],
                        ["LambdaLR", {"lambda": "pow095"}]], "milestones": [5]},
        build=lambda o: L.SequentialLR(
            o, [L.LinearLR(o, start_factor=0.1, total_iters=5), L.LambdaLR(o, lambda e: 0.95**e)], milestones=[5]
        ),
    )
)
cases.append(
    record(
        "sequential_multiplicative_second", "SequentialLR",
        {"schedulers": [["ExponentialLR", {"gamma": 0.9}],
                        ["MultiplicativeLR", {"lambda": ["pow095", "inverse"]}]], "milestones": [7]},
        lrs=(0.1, 0.2),
        build=lambda o: L.SequentialLR(
            o, [L.ExponentialLR(o, 0.9), L.MultiplicativeLR(o, [lambda e: 0.95**e, lambda e: 1 / (1 + e)])],
            milestones=[7],
        ),
    )
)

# A SequentialLR inside a SequentialLR, as the first scheduler (it takes the
# initial step). After a milestone PyTorch cannot restart one
# (`_update_lr(0)` raises NotImplementedError): ferrotorch refuses it with a
# clear error, tested in `schedulers.rs`.
INNER = {"schedulers": [["LinearLR", {"start_factor": 0.5, "end_factor": 1.0, "total_iters": 5}],
                        ["StepLR", {"step_size": 3, "gamma": 0.5}]], "milestones": [5]}
cases.append(
    record(
        "sequential_nested_first", "SequentialLR",
        {"schedulers": [["SequentialLR", INNER], ["ExponentialLR", {"gamma": 0.9}]], "milestones": [12]},
        build=lambda o: L.SequentialLR(
            o, [L.SequentialLR(o, [L.LinearLR(o, 0.5, 1.0, 5), L.StepLR(o, 3, 0.5)], [5]), L.ExponentialLR(o, 0.9)],
            milestones=[12],
        ),
    )
)

out = {"torch_version": torch.__version__.split("+")[0], "steps": STEPS, "cases": cases}
path = os.path.join(HERE, "data", "schedulers.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print(f"wrote {len(cases)} cases to {path}")
