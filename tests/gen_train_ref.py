"""Writes tests/nn_data/train_ref.json: 100 steps of training an MNIST MLP
in PyTorch, for tests/train_reference.rs to repeat with ferrotorch.

Run with the bench venv from the repository root:
    bench/.venv/bin/python tests/gen_train_ref.py

The run: torch.manual_seed(0); Flatten-Linear(784, 256)-ReLU-Linear(256, 10);
the first 100 * 128 training images in order (batch 128, no shuffle), each
through ToTensor + Normalize((0.1307,), (0.3081,)) (torchvision's
arithmetic: `img.float().div(255)`, then `sub(mean).div(std)` with mean and
std as float32 tensors); CrossEntropyLoss; AdamW(lr=1e-3) with
CosineAnnealingLR(T_max=100) stepped after every optimizer step.

Recorded: the loss at every step (before the update), the learning rate
after every scheduler step, and per parameter (in `parameters()` order) an
exact checksum of its initial and final bits (sum over i of
bits(w[i]) * (i + 1), wrapping in u64) and float64 sums of the final
values. Step 0's input batch, first-layer output, logits and gradients are summarised
too, to tell which op differs if the losses do.
"""

import gzip
import json
import os

import numpy as np
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS, BATCH = 100, 128


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def bits_checksum(t):
    b = t.detach().contiguous().view(-1).numpy().view(np.uint32).astype(np.uint64)
    k = np.arange(1, b.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return int(np.sum(b * k, dtype=np.uint64))


def sums(t):
    v = t.detach().double()
    return {"sum": v.sum().item(), "abs_sum": v.abs().sum().item()}


def main():
    torch.set_num_threads(1)
    n = STEPS * BATCH
    images = idx(os.path.join(ROOT, "data/mnist/train-images-idx3-ubyte.gz"))[:n]
    labels = idx(os.path.join(ROOT, "data/mnist/train-labels-idx1-ubyte.gz"))[:n]
    # ToTensor: [N, 1, 28, 28] float32, / 255; Normalize: (x - mean) / std.
    x = torch.from_numpy(images.copy()).unsqueeze(1).float().div(255)
    mean = torch.as_tensor([0.1307], dtype=torch.float32).view(-1, 1, 1)
    std = torch.as_tensor([0.3081], dtype=torch.float32).view(-1, 1, 1)
    x = x.sub(mean).div(std)
    y = torch.from_numpy(labels.astype(np.int64))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    initial = [bits_checksum(p) for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS)
    loss_fn = nn.CrossEntropyLoss()

    losses, lrs, step0 = [], [], None
    for step in range(STEPS):
        xb, yb = x[step * BATCH : (step + 1) * BATCH], y[step * BATCH : (step + 1) * BATCH]
        opt.zero_grad()
        out = model(xb)
        loss = loss_fn(out, yb)
        loss.backward()
        if step == 0:
            with torch.no_grad():
                hidden = model[1](model[0](xb))
            step0 = {
                "input_bits": bits_checksum(xb),
                "hidden_bits": bits_checksum(hidden),
                "logits": sums(out),
                "logits_bits": bits_checksum(out),
                "grads": [sums(p.grad) for p in model.parameters()],
                "grads_bits": [bits_checksum(p.grad) for p in model.parameters()],
            }
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(sched.get_last_lr()[0])

    ref = {
        "torch": torch.__version__,
        "steps": STEPS,
        "batch": BATCH,
        "losses": losses,
        "lrs": lrs,
        "initial_bits": initial,
        "final_bits": [bits_checksum(p) for p in model.parameters()],
        "final": [sums(p) for p in model.parameters()],
        "step0": step0,
    }
    out = os.path.join(ROOT, "tests/nn_data/train_ref.json")
    with open(out, "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    print(f"wrote {out}: loss {losses[0]:.6f} -> {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
