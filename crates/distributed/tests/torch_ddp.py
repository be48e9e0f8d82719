"""PyTorch's side of tests/ddp.rs's comparison: DistributedDataParallel on
gloo, started by torchrun, with weights and batches given by formulas that
the Rust side computes to the same bits; rank 0 writes its loss per step
as JSON to the path in argv[1]."""
import json
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS, B = 50, 4


def value(a, b, c, m, shift, scale):
    return ((a + b + c) % m - shift) / scale


def init(layer, fan_out, fan_in):
    w = [[value(i * 7, j * 3, layer * 11, 17, 8, 40.0) for j in range(fan_in)] for i in range(fan_out)]
    b = [value(i * 5, layer * 3, 0, 13, 6, 50.0) for i in range(fan_out)]
    return torch.tensor(w, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)


def batch(step, n):
    x = [[value(step * 13, r * 5, k * 3, 23, 11, 10.0) for k in range(8)] for r in range(n * B)]
    y = [[value(step * 7, r * 11, k * 5, 19, 9, 10.0) for k in range(3)] for r in range(n * B)]
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))
    with torch.no_grad():
        for layer, lin in enumerate([model[0], model[2], model[4]]):
            w, b = init(layer, lin.out_features, lin.in_features)
            lin.weight.copy_(w)
            lin.bias.copy_(b)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(STEPS):
        x, y = batch(step, n)
        xs, ys = x[rank * B:(rank + 1) * B], y[rank * B:(rank + 1) * B]
        opt.zero_grad()
        loss = ((ddp(xs) - ys) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if rank == 0:
        with open(sys.argv[1], "w") as f:
            json.dump(losses, f)
    # Both ranks reach here before either tears gloo down: a rank that
    # destroys its pairs while its peer still uses them can abort in gloo's
    # threads ("terminate called without an active exception").
    dist.barrier()
    del ddp
    dist.destroy_process_group()


main()
