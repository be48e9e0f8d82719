"""Writes tests/data/rng_state.json: torch.get_rng_state() after
manual_seed(seed) and a draw, and the draws that follow, for the
rng_state test. Run with the bench venv's PyTorch:
    bench/.venv/bin/python tests/gen_rng_state.py
"""
import json

import torch

cases = []


def rec(name, seed, draw):
    torch.manual_seed(seed)
    draw()
    st = torch.get_rng_state()
    cases.append(dict(
        name=name,
        seed=seed,
        state=bytes(st.tolist()).hex(),
        next_rand_f64=torch.rand(5, dtype=torch.float64).tolist(),
        next_randn_f64=torch.randn(3, dtype=torch.float64).tolist(),
        next_randn_f32=torch.randn(3).tolist(),
    ))


rec("fresh_seed0", 0, lambda: None)
rec("seed42_rand7", 42, lambda: torch.rand(7))
rec("seed7_randn3", 7, lambda: torch.randn(3))
rec("seed7_randn3_f64", 7, lambda: torch.randn(3, dtype=torch.float64))
rec("seed3_624_draws", 3, lambda: torch.randint(0, 1000, (624,)))
rec("seed5_bernoulli", 5, lambda: torch.empty(1000).bernoulli_(0.9))
json.dump(dict(torch_version=torch.__version__,
               note="torch.get_rng_state() bytes (hex) after manual_seed(seed) and a draw, then the next draws",
               cases=cases),
          open("tests/data/rng_state.json", "w"), indent=1)
