"""Reference orders of torch.utils.data for the tests in reference.rs.

Run with the bench venv (torch 2.15):
    /work/main/bench/.venv/bin/python crates/data/tests/gen_data_ref.py
It rewrites crates/data/tests/data/*.json. Every case fixes its seed, so
the files are the same on every run.
"""

import json
import os

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    RandomSampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)
from torch.utils.data.distributed import DistributedSampler

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def dump(name, cases):
    with open(os.path.join(OUT, name), "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, indent=None)
        f.write("\n")


def random_sampler():
    cases = []
    for seed in [0, 1, 42]:
        for n in [1, 10, 37, 100]:
            for replacement in [False, True]:
                for num_samples in [None, 7, 70]:
                    for use_gen in [False, True]:
                        torch.manual_seed(seed)
                        if use_gen:
                            g = torch.Generator().manual_seed(seed)
                            s = RandomSampler(range(n), replacement, num_samples, generator=g)
                        else:
                            s = RandomSampler(range(n), replacement, num_samples)
                        epochs = [list(s) for _ in range(2)]
                        # What the global generator gives next: shows how much
                        # the sampler drew from it.
                        after = torch.randint(0, 1000, (3,)).tolist()
                        cases.append(
                            dict(seed=seed, n=n, replacement=replacement,
                                 num_samples=num_samples, generator=use_gen,
                                 epochs=epochs, global_after=after)
                        )
    dump("random_sampler.json", cases)


def dataloader_shuffle():
    cases = []
    for seed in [0, 3]:
        for n, batch_size, drop_last in [(23, 5, False), (23, 5, True), (8, 3, False)]:
            for use_gen in [False, True]:
                for num_workers, persistent in [(0, False), (2, False), (2, True)]:
                    ds = TensorDataset(torch.arange(n))
                    torch.manual_seed(seed)
                    g = torch.Generator().manual_seed(seed) if use_gen else None
                    loader = DataLoader(ds, batch_size=batch_size, shuffle=True,
                                        drop_last=drop_last, generator=g,
                                        num_workers=num_workers,
                                        persistent_workers=persistent)
                    epochs = []
                    for _ in range(2):
                        epochs.append([b[0].tolist() for b in loader])
                    after = torch.randint(0, 1000, (3,)).tolist()
                    cases.append(dict(seed=seed, n=n, batch_size=batch_size,
                                      drop_last=drop_last, generator=use_gen,
                                      num_workers=num_workers,
                                      persistent_workers=persistent,
                                      len=len(loader), epochs=epochs,
                                      global_after=after))
    dump("dataloader_shuffle.json", cases)


def random_split_cases():
    cases = []
    specs = [
        (10, [3, 7]),
        (30, [0.3, 0.3, 0.4]),
        (10, [0.33, 0.33, 0.34]),
        (11, [0.5, 0.5]),
        (7, [0.1, 0.1, 0.1, 0.7]),
        (100, [60, 20, 20]),
        (5, [0.0, 1.0]),
    ]
    for seed in [0, 42]:
        for n, lengths in specs:
            for use_gen in [False, True]:
                if use_gen:
                    parts = random_split(range(n), lengths, generator=torch.Generator().manual_seed(seed))
                else:
                    torch.manual_seed(seed)
                    parts = random_split(range(n), lengths)
                cases.append(dict(seed=seed, n=n, lengths=lengths,
                                  fractions=any(isinstance(x, float) for x in lengths),
                                  generator=use_gen,
                                  splits=[list(p.indices) for p in parts]))
    dump("random_split.json", cases)


def distributed():
    cases = []
    for n in [10, 11, 13, 2, 12]:
        for num_replicas in [3, 4]:
            for shuffle in [True, False]:
                for drop_last in [False, True]:
                    for seed in [0, 7]:
                        for epoch in [0, 1, 5]:
                            for rank in range(num_replicas):
                                s = DistributedSampler(range(n), num_replicas=num_replicas,
                                                       rank=rank, shuffle=shuffle,
                                                       seed=seed, drop_last=drop_last)
                                s.set_epoch(epoch)
                                cases.append(dict(n=n, num_replicas=num_replicas, rank=rank,
                                                  shuffle=shuffle, drop_last=drop_last,
                                                  seed=seed, epoch=epoch, len=len(s),
                                                  total_size=s.total_size,
                                                  indices=list(s)))
    dump("distributed_sampler.json", cases)


def weighted():
    cases = []
    weight_sets = [
        [0.1, 0.9, 0.4, 0.7, 3.0, 0.6],
        [0.9, 0.4, 0.05, 0.2, 0.3, 0.1],
        [1.0] * 40,
    ]
    for seed in [0, 5]:
        for weights in weight_sets:
            for num_samples, replacement in [(5, True), (5, False), (20, True), (6, False)]:
                for use_gen in [False, True]:
                    if use_gen:
                        g = torch.Generator().manual_seed(seed)
                        s = WeightedRandomSampler(weights, num_samples, replacement, generator=g)
                    else:
                        torch.manual_seed(seed)
                        s = WeightedRandomSampler(weights, num_samples, replacement)
                    epochs = [list(s) for _ in range(2)]
                    cases.append(dict(seed=seed, weights=weights, num_samples=num_samples,
                                      replacement=replacement, generator=use_gen,
                                      epochs=epochs))
    dump("weighted_sampler.json", cases)


def subset_random():
    cases = []
    for seed in [0, 9]:
        for indices in [[5, 9, 2, 14, 7, 3], list(range(100, 140))]:
            for use_gen in [False, True]:
                if use_gen:
                    s = SubsetRandomSampler(indices, generator=torch.Generator().manual_seed(seed))
                else:
                    torch.manual_seed(seed)
                    s = SubsetRandomSampler(indices)
                epochs = [list(s) for _ in range(2)]
                batched = list(BatchSampler(s, 4, False))
                cases.append(dict(seed=seed, indices=indices, generator=use_gen,
                                  epochs=epochs, batched_third=batched))
    dump("subset_random_sampler.json", cases)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    random_sampler()
    dataloader_shuffle()
    random_split_cases()
    distributed()
    weighted()
    subset_random()
