"""PyTorch's values for `tests/mutation_gaps.rs`: scheduler paths the
full-run schedules of `gen_sched.py` do not reach.

Run with the bench venv (PyTorch 2.15):

    /work/main/bench/.venv/bin/python crates/optim/tests/gen_mutation_gaps.py

writes `crates/optim/tests/data/mutation_gaps.json`:

- `closed_form`: the closed forms (`scheduler._update_lr(epoch)`, what
  SequentialLR uses at a milestone) at epochs other than 0, for StepLR,
  MultiStepLR, ExponentialLR, CosineAnnealingLR and LinearLR;
- `cosine_epoch0_restart`: CosineAnnealingLR loaded with `last_epoch=-1`,
  `_step_count=0` and stepped (its `get_lr` at epoch 0 outside the initial
  step);
- `plateau`: ReduceLROnPlateau fed metrics exactly at the threshold of each
  mode, and reductions smaller than or equal to `eps`;
- `errors`: PyTorch's messages for per-group lists of the wrong length.
"""

import json
import os
import warnings

import torch
from torch.optim import lr_scheduler as L

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))


def make_opt(lrs, momentum=0.9):
    params = [torch.nn.Parameter(torch.zeros(2)) for _ in lrs]
    groups = [{"params": [p], "lr": lr} for p, lr in zip(params, lrs)]
    return torch.optim.SGD(groups, lr=lrs[0], momentum=momentum)


def lrs_of(opt):
    return [g["lr"] for g in opt.param_groups]


EPOCHS = [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 13, 15, 20, 3, 0]
CLOSED = [
    ("StepLR", {"step_size": 3, "gamma": 0.5}, lambda o: L.StepLR(o, step_size=3, gamma=0.5)),
    ("MultiStepLR", {"milestones": [2, 5, 5, 9], "gamma": 0.3}, lambda o: L.MultiStepLR(o, [2, 5, 5, 9], 0.3)),
    ("ExponentialLR", {"gamma": 0.9}, lambda o: L.ExponentialLR(o, 0.9)),
    ("CosineAnnealingLR", {"T_max": 10, "eta_min": 0.01}, lambda o: L.CosineAnnealingLR(o, T_max=10, eta_min=0.01)),
    (
        "LinearLR",
        {"start_factor": 0.25, "end_factor": 0.75, "total_iters": 8},
        lambda o: L.LinearLR(o, start_factor=0.25, end_factor=0.75, total_iters=8),
    ),
]
closed = []
for kind, cfg, build in CLOSED:
    opt = make_opt([0.1, 0.05])
    s = build(opt)
    seq = []
    for e in EPOCHS:
        s._update_lr(e)
        seq.append({"epoch": e, "lr": lrs_of(opt), "last_lr": list(s.get_last_lr()), "last_epoch": s.last_epoch})
    closed.append({"scheduler": kind, "config": cfg, "lrs": [0.1, 0.05], "steps": seq})

opt = make_opt([0.1])
s = L.CosineAnnealingLR(opt, 10, 0.01)
sd = s.state_dict()
sd["last_epoch"] = -1
sd["_step_count"] = 0
s.load_state_dict(sd)
restart = []
for _ in range(4):
    s.step()
    restart.append(lrs_of(opt))
cosine_restart = {"T_max": 10, "eta_min": 0.01, "lr": 0.1, "lrs": restart}

PLATEAU = [
    ("min_rel_at_threshold", 0.1, {"threshold": 0.5, "patience": 0, "factor": 0.5}, [1.0, 0.5, 0.25, 0.2, 0.125, 0.125]),
    (
        "min_abs_at_threshold", 0.1, {"threshold_mode": "abs", "threshold": 0.25, "patience": 0, "factor": 0.5},
        [1.0, 0.75, 0.5, 0.4, 0.25, 0.25],
    ),
    ("max_rel_at_threshold", 0.1, {"mode": "max", "threshold": 0.5, "patience": 0, "factor": 0.5},
     [1.0, 1.5, 2.25, 2.0, 3.375, 3.375]),
    (
        "max_abs_at_threshold", 0.1,
        {"mode": "max", "threshold_mode": "abs", "threshold": 0.25, "patience": 0, "factor": 0.5},
        [1.0, 1.25, 1.5, 1.6, 1.75, 1.75],
    ),
    # A reduction of exactly `eps` is skipped.
    ("reduction_equal_to_eps", 1.0, {"patience": 0, "factor": 0.5, "eps": 0.5}, [1.0, 1.0, 1.0]),
    # A reduction smaller than `eps` (down to a `min_lr` just below) is skipped.
    ("reduction_below_eps", 0.1, {"patience": 0, "factor": 0.5, "min_lr": 0.0999999, "eps": 1e-6}, [1.0, 1.0, 1.0]),
    # Cooldown with mode max, abs threshold.
    (
        "max_abs_cooldown", 0.1,
        {"mode": "max", "threshold_mode": "abs", "threshold": 0.1, "patience": 1, "cooldown": 2, "factor": 0.5},
        [0.0, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.2, 0.2, 0.2, 0.2],
    ),
]
plateau = []
for name, lr, cfg, metrics in PLATEAU:
    opt = make_opt([lr])
    s = L.ReduceLROnPlateau(opt, **cfg)
    seq = []
    for m in metrics:
        s.step(m)
        seq.append(
            {"lr": lrs_of(opt), "best": s.best, "num_bad_epochs": s.num_bad_epochs,
             "cooldown_counter": s.cooldown_counter, "last_epoch": s.last_epoch}
        )
    plateau.append({"name": name, "lr": lr, "config": cfg, "metrics": metrics, "steps": seq})

errors = {}
try:
    L.OneCycleLR(make_opt([0.1]), max_lr=[0.1, 0.2], total_steps=10)
except ValueError as e:
    errors["onecycle_max_lr"] = str(e)
try:
    L.OneCycleLR(make_opt([0.1, 0.2]), max_lr=0.1, total_steps=10, max_momentum=[0.9, 0.95, 0.99])
except ValueError as e:
    errors["onecycle_max_momentum"] = str(e)
try:
    L.OneCycleLR(make_opt([0.1, 0.2]), max_lr=0.1, total_steps=10, base_momentum=[0.8])
except ValueError as e:
    errors["onecycle_base_momentum"] = str(e)
try:
    L.ReduceLROnPlateau(make_opt([0.1]), min_lr=[0.1, 0.2])
except ValueError as e:
    errors["plateau_min_lr"] = str(e)
assert len(errors) == 4, errors

out = {
    "torch_version": torch.__version__.split("+")[0],
    "closed_form": closed,
    "cosine_epoch0_restart": cosine_restart,
    "plateau": plateau,
    "errors": errors,
}
path = os.path.join(HERE, "data", "mutation_gaps.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print(f"wrote {path}")
