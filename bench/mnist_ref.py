"""The seeds' MNIST training script (seed 003) in PyTorch, as the `mnist`
example runs it: the same data files (data/mnist, read here without
torchvision, which the bench venv does not install; per-item ToTensor and
Normalize as torchvision's transforms compute them), MLP or CNN, AdamW,
CosineAnnealingLR per epoch, test loss and accuracy per epoch.

Run by bench/mnist_compare.sh next to `cargo run --release --example mnist`.
"""

import argparse
import gzip
import struct
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, rows, cols)
    return np.frombuffer(data, np.uint8, offset=8)


class MNIST(Dataset):
    def __init__(self, root, train):
        kind = "train" if train else "t10k"
        self.images = read_idx(f"{root}/{kind}-images-idx3-ubyte.gz")
        self.labels = read_idx(f"{root}/{kind}-labels-idx1-ubyte.gz")

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        # transforms.ToTensor() then transforms.Normalize((0.1307,), (0.3081,))
        img = torch.from_numpy(self.images[i].copy()).unsqueeze(0).float().div(255)
        img = (img - 0.1307) / 0.3081
        return img, int(self.labels[i])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--data-dir", default="data/mnist")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    start = time.perf_counter()
    train_set, test_set = MNIST(args.data_dir, True), MNIST(args.data_dir, False)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    test_loader = DataLoader(test_set, batch_size=1000, num_workers=args.workers)
    if args.model == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 10))
    else:
        model = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10),
        )
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    acc = 0.0
    for epoch in range(args.epochs):
        model.train()
        total_loss = 0.0
        t0 = time.perf_counter()
        for images, labels in train_loader:
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            total_loss += loss.item()
        scheduler.step()
        model.eval()
        correct, test_loss = 0, 0.0
        with torch.no_grad():
            for images, labels in test_loader:
                out = model(images)
                test_loss += criterion(out, labels).item() * len(labels)
                correct += (out.argmax(1) == labels).sum().item()
        acc = correct / len(test_set) * 100
        print(f"Epoch {epoch + 1}/{args.epochs} | Loss: {total_loss / len(train_loader):.4f} | "
              f"Test loss: {test_loss / len(test_set):.4f} | Acc: {acc:.2f}% | {time.perf_counter() - t0:.1f} s",
              flush=True)
    print(f"total time {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {acc:.2f}%")


if __name__ == "__main__":
    main()
