"""PyTorch side of bench/ddp_overlap.sh: the step of bench/examples/ddp_step.rs
(the mnist MLP at batch 128, or the gpt figure's model at 16 x 64 tokens,
AdamW lr 1e-3), on one process or, under torchrun, in DDP over Gloo with the
same per-rank batch. Rank 0 prints `step_ms MEDIAN` (5 warm-up steps, then
the median of --steps).

Usage: [torchrun --nproc-per-node 2] python ddp_step.py --model mlp|gpt [--steps 40]
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import _Gpt  # noqa: E402  (the gpt example's model)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    ddp = "WORLD_SIZE" in os.environ
    if ddp:
        dist.init_process_group("gloo")
    nn = torch.nn
    if a.model == "gpt":
        model = _Gpt(65, 64, 4, 4, 128)
        x, y = torch.randint(0, 65, (16, 64)), torch.randint(0, 65, (16, 64))
    else:
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 10))
        x, y = torch.randn(128, 1, 28, 28), torch.randint(0, 10, (128,))
    if ddp:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out.view(-1, out.shape[-1]), y.view(-1))
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    if not ddp or dist.get_rank() == 0:
        print(f"step_ms {times[len(times) // 2]:.3f}")
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
