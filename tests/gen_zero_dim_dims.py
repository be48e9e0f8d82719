"""Every op with a dim argument, on a 0-d tensor, with dims -2..1, in PyTorch:
its result or its error. Writes tests/zero_dim_dims.json, which
tests/zero_dim_dims.rs replays (PyTorch wraps the dims of a 0-d tensor as if it
had one dim: -1 and 0 are valid).

    bench/.venv/bin/python tests/gen_zero_dim_dims.py
"""
import json
import os
import warnings

import torch

warnings.simplefilter("ignore")


def enc(v):
    """A value as JSON: nan and the infinities as strings."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    return v

x = torch.tensor(2.5)
idx = torch.tensor(0)
cases = {
 "sum_dim": lambda d: x.sum(d), "sum_dim_keep": lambda d: x.sum(d, keepdim=True),
 "mean_dim": lambda d: x.mean(d), "prod_dim": lambda d: x.prod(d), "amax": lambda d: x.amax(d), "amin": lambda d: x.amin(d),
 "all_dim": lambda d: x.all(d), "any_dim": lambda d: x.any(d), "logsumexp": lambda d: x.logsumexp(d),
 "var_dim": lambda d: x.var(d), "std_dim": lambda d: x.std(d), "var_mean": lambda d: torch.var_mean(x, d), "nansum_dim": lambda d: x.nansum(d), "nanmean_dim": lambda d: x.nanmean(d),
 "count_nonzero": lambda d: x.count_nonzero(d), "norm_dim": lambda d: x.norm(2, d), "vector_norm": lambda d: torch.linalg.vector_norm(x, 2, d),
 "argmax": lambda d: x.argmax(d), "argmin": lambda d: x.argmin(d), "max_dim": lambda d: x.max(d), "min_dim": lambda d: x.min(d),
 "aminmax": lambda d: torch.aminmax(x, dim=d), "median_dim": lambda d: x.median(d), "nanmedian_dim": lambda d: x.nanmedian(d), "mode": lambda d: x.mode(d),
 "kthvalue": lambda d: x.kthvalue(1, d), "sort": lambda d: x.sort(d), "argsort": lambda d: x.argsort(d), "topk": lambda d: x.topk(1, d),
 "cumsum": lambda d: x.cumsum(d), "cumprod": lambda d: x.cumprod(d), "cummax": lambda d: x.cummax(d), "cummin": lambda d: x.cummin(d), "logcumsumexp": lambda d: x.logcumsumexp(d),
 "softmax": lambda d: x.softmax(d), "log_softmax": lambda d: x.log_softmax(d),
 "squeeze_dim": lambda d: x.squeeze(d), "unsqueeze": lambda d: x.unsqueeze(d), "flatten": lambda d: x.flatten(d, d), "transpose": lambda d: x.transpose(d, d),
 "select": lambda d: x.select(d, 0), "narrow": lambda d: x.narrow(d, 0, 1), "index_select": lambda d: x.index_select(d, idx),
 "gather": lambda d: x.gather(d, idx), "scatter": lambda d: x.scatter(d, idx, torch.tensor(7.0)), "scatter_add": lambda d: x.scatter_add(d, idx, torch.tensor(7.0)),
 "index_add": lambda d: x.index_add(d, idx.reshape(1), torch.tensor(7.0)), "index_copy": lambda d: x.index_copy(d, idx.reshape(1), torch.tensor(7.0)), "index_fill": lambda d: x.index_fill(d, idx.reshape(1), 7.0),
 "chunk": lambda d: x.chunk(1, d), "split": lambda d: x.split(1, d), "unbind": lambda d: x.unbind(d),
 "cat": lambda d: torch.cat([x, x], d), "stack": lambda d: torch.stack([x, x], d),
 "flip": lambda d: x.flip(d), "roll": lambda d: x.roll(1, d), "movedim": lambda d: x.movedim(d, 0), "diff": lambda d: x.diff(dim=d),
 "repeat_interleave": lambda d: x.repeat_interleave(2, d), "take_along_dim": lambda d: torch.take_along_dim(x, idx, d),
 "unflatten": lambda d: x.unflatten(d, (1,)), "unfold": lambda d: x.unfold(d, 1, 1), "size": lambda d: x.size(d), "stride": lambda d: x.stride(d),
 "permute": lambda d: x.permute(d), "squeeze_dims": lambda d: x.squeeze((d,)), "sum_dtype": lambda d: x.sum(d, dtype=torch.float64),
 "cumsum_dtype": lambda d: x.cumsum(d, dtype=torch.float64), "mean_dtype": lambda d: x.mean(d, dtype=torch.float64), "std_mean": lambda d: torch.std_mean(x, d),
 "swapdims": lambda d: x.swapdims(d, 0),
 "diagonal": lambda d: x.diagonal(0, d, d + 1), "diag_embed": lambda d: x.diag_embed(0, d, d + 1), "cross": lambda d: torch.linalg.cross(x, x, dim=d),
 "unique_dim": lambda d: torch.unique(x, dim=d), "split_sizes": lambda d: x.split([1], d), 
}
out = []
for name, f in cases.items():
    for d in [-2, -1, 0, 1]:
        try:
            r = f(d)
            if isinstance(r, (tuple, list)): r = list(r)
            else: r = [r]
            res = []
            for t in r:
                if isinstance(t, int): res.append({"int": t})
                else: res.append({"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "data": [enc(v) for v in t.reshape(-1).tolist()]})
            out.append({"op": name, "dim": d, "ok": res})
        except Exception as e:
            out.append({"op": name, "dim": d, "error": str(e).split("\nException raised from")[0].split("\n")[-1]})
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zero_dim_dims.json")
with open(path + ".part", "w") as f:
    json.dump({"torch": torch.__version__, "cases": out}, f, indent=0)
os.replace(path + ".part", path)
print(f"{len(out)} cases in {path}")
