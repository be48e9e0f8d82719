"""PyTorch side of bench/: the same workloads as src/main.rs, timed the same way.

Prints one line per figure: figure<TAB>threads<TAB>seconds_per_iteration.
Usage: python torch_ref.py --threads N [--filter SUBSTRING[,SUBSTRING...]]
"""
import argparse
import time

import torch


def time_it(f):
    warm = time.perf_counter()
    while time.perf_counter() - warm < 0.2:
        f()
    blocks = []
    while len(blocks) < 5:
        start = time.perf_counter()
        iters = 0
        while time.perf_counter() - start < 0.1:
            f()
            iters += 1
        blocks.append((time.perf_counter() - start) / iters)
    blocks.sort()
    return blocks[len(blocks) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--filter", default="")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    def run(name, f):
        if any(f in name for f in args.filter.split(",")):
            print(f"{name}\t{args.threads}\t{time_it(f):.9e}", flush=True)

    autograd_figures(run)
    with torch.inference_mode():
        for n in (256, 512, 1024, 2048):
            a, b = torch.randn(n, n), torch.randn(n, n)
            run(f"sgemm_{n}", lambda: torch.mm(a, b))
        n = 10_000_000
        a, b = torch.randn(n), torch.randn(n)
        run("add_1e7", lambda: a + b)
        run("mul_1e7", lambda: a * b)
        run("exp_1e7", lambda: torch.exp(a))
        side = 3163
        x, y = torch.randn(side, side), torch.randn(side, side)
        run("add_transposed_1e7", lambda: x.t() + y)
        run("exp_transposed_1e7", lambda: torch.exp(x.t()))
        m = torch.randn(4096, 4096)
        run("sum_rows_4096", lambda: m.sum(dim=1))
        run("softmax_rows_4096", lambda: torch.softmax(m, dim=1))
        s1, s2 = torch.randn(1), torch.randn(1)
        run("add_1elem_overhead", lambda: s1 + s2)


def autograd_figures(run):
    import torch.nn.functional as F

    a = torch.randn(16, requires_grad=True)
    b = torch.randn(16, requires_grad=True)
    run("mul_sum_backward_16", lambda: (a * b).sum().backward())

    x = torch.randn(1, requires_grad=True)

    def chain():
        y = x
        for i in range(50):
            k = i % 5
            if k == 0:
                y = y * 1.01
            elif k == 1:
                y = y + 0.1
            elif k == 2:
                y = torch.sin(y)
            elif k == 3:
                y = y * y
            else:
                y = torch.tanh(y)
        y.sum().backward()

    run("chain50_backward_1elem", chain)

    def p(o, i):
        w = (torch.randn(o, i) / i**0.5).requires_grad_()
        return w, torch.zeros(o, requires_grad=True)

    w1, b1 = p(256, 784)
    w2, b2 = p(256, 256)
    w3, b3 = p(10, 256)
    xb = torch.randn(128, 784)
    yb = torch.randint(0, 10, (128,))
    params = [w1, b1, w2, b2, w3, b3]

    def mlp():
        h = F.relu(F.linear(xb, w1, b1))
        h = F.relu(F.linear(h, w2, b2))
        loss = F.cross_entropy(F.linear(h, w3, b3), yb)
        loss.backward()
        for t in params:
            t.grad = None

    run("mlp_fwd_bwd_b128", mlp)


if __name__ == "__main__":
    main()
