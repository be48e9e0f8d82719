"""The loop of crates/distributed/examples/allreduce_bw.rs in PyTorch:
all_reduce of f32 tensors from --min to --max bytes (x4 each step) on the
process group torchrun started; rank 0 prints `size_bytes time_us busbw_GB/s`."""
import argparse
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--backend", default="gloo")
p.add_argument("--min-bytes", type=int, default=4096)
p.add_argument("--max-bytes", type=int, default=1 << 28)
a = p.parse_args()
torch.set_num_threads(1)
dist.init_process_group(a.backend)
rank, n = dist.get_rank(), dist.get_world_size()
size = a.min_bytes
while size <= a.max_bytes:
    x = torch.ones(size // 4)
    iters = max(5, min(200, -(-(1 << 30) // size)))
    for _ in range(2):
        dist.all_reduce(x)
    best = float("inf")
    for _ in range(3):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        best = min(best, (time.perf_counter() - t0) / iters)
    if rank == 0:
        busbw = size / best * 2 * (n - 1) / n / 1e9
        print(f"{size} {best * 1e6:.1f} {busbw:.3f}", flush=True)
    size *= 4
dist.destroy_process_group()
