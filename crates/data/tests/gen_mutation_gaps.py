"""Reference values for crates/data/tests/mutation_gaps.rs, from PyTorch 2.15.

Run with the bench venv:
    /work/main/bench/.venv/bin/python crates/data/tests/gen_mutation_gaps.py
It rewrites crates/data/tests/data/mutation_gaps.json (deterministic).
"""

import json
import os

import torch
from torch.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    get_worker_info,
    random_split,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mutation_gaps.json")

# Items each worker's shard of the uneven stream has (worker 1 ends early).
SHARD = [10, 2, 10]


class Uneven(IterableDataset):
    def __iter__(self):
        w = get_worker_info()
        return iter([100 * w.id + i for i in range(SHARD[w.id])])


class WorkerId(Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, i):
        return get_worker_info().id


def main():
    out = {"torch": torch.__version__}

    # Stream over 3 workers whose middle one ends first: the round robin
    # skips it from then on.
    out["uneven_stream"] = {}
    for pf in [1, 2]:
        loader = DataLoader(Uneven(), batch_size=2, num_workers=3, prefetch_factor=pf)
        out["uneven_stream"][str(pf)] = [b.tolist() for b in loader]
    out["shard"] = SHARD

    # Map-style over 3 workers: which worker loads each batch.
    loader = DataLoader(WorkerId(), batch_size=2, num_workers=3)
    out["worker_of_batch"] = [b.tolist() for b in loader]

    # Normalize with one mean/std per channel (torchvision's F.normalize:
    # mean and std as tensors of the input's dtype, viewed (-1, 1, 1)).
    x = (torch.arange(12, dtype=torch.float32) / 10).reshape(3, 2, 2)
    mean, std = [0.1, 0.2, 0.3], [0.5, 0.25, 2.0]
    m = torch.as_tensor(mean, dtype=x.dtype).view(-1, 1, 1)
    s = torch.as_tensor(std, dtype=x.dtype).view(-1, 1, 1)
    out["normalize"] = dict(x=x.flatten().tolist(), mean=mean, std=std,
                            y=x.sub(m).div(s).flatten().tolist())

    # random_split with fractions that do not add up to 1.
    try:
        random_split(range(3), [0.3, 0.3])
        out["split_03_03"] = "ok"
    except ValueError as e:
        out["split_03_03"] = str(e)

    # Lengths and attributes of samplers.
    rs = RandomSampler(range(10), replacement=True, num_samples=25)
    srs = SubsetRandomSampler([5, 9, 2])
    wrs = WeightedRandomSampler([0.1, 0.9, 0.4], 7, replacement=True)
    bs = BatchSampler(SubsetRandomSampler(list(range(10))), 4, False)
    bsd = BatchSampler(SubsetRandomSampler(list(range(10))), 4, True)
    out["sampler_lens"] = dict(
        random_num_samples=rs.num_samples, random_len=len(rs),
        subset_random_len=len(srs), weighted_len=len(wrs),
        batch_len=len(bs), batch_drop_last_len=len(bsd), batch_size=bs.batch_size,
        sequential_batch_len=len(BatchSampler(SequentialSampler(range(7)), 3, False)),
    )

    # Unbatched (batch_size=None) items of a TensorDataset: each item as is.
    xs = torch.arange(6).reshape(3, 2)
    ys = torch.tensor([10, 11, 12])
    items = list(DataLoader(TensorDataset(xs, ys), batch_size=None))
    out["unbatched_tensor_dataset"] = [[a.tolist(), b.tolist()] for a, b in items]

    # ConcatDataset of two TensorDatasets.
    a = TensorDataset(torch.arange(3))
    b = TensorDataset(torch.arange(10, 15))
    c = ConcatDataset([a, b])
    out["concat"] = dict(cumulative_sizes=c.cumulative_sizes, len=len(c),
                         items=[c[i][0].item() for i in range(len(c))])

    with open(OUT, "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
