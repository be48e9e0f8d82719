"""The `ferrotorch` command against PyTorch: `convert` and `inspect`.

1. PyTorch saves a model's state dict (Linear, BatchNorm1d with its int64
   num_batches_tracked, Embedding, LayerNorm), tensors of every dtype of the
   core, views sharing one storage, and a training checkpoint holding the
   state dict; a safetensors file is written by hand (the venv has no
   safetensors package) with __metadata__.
2. `ferrotorch convert` turns the .pt files into safetensors and back, and
   the safetensors file into a .pt file.
3. PyTorch reads the results (torch.load(weights_only=True), the hand
   reader for safetensors) and compares dtypes, shapes and values bit for
   bit; the model loads the converted state dict with strict=True.
   `ferrotorch inspect --json` must list the names, dtypes and shapes
   PyTorch has.

Run with the bench venv:  bench/.venv/bin/python bench/check_cli_convert.py
(builds the binary with CARGO_TARGET_DIR / CARGO_BUILD_JOBS from the
environment). Exit status 0 when everything matches.
"""

import collections
import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pt_compat import DTYPES, read_safetensors, values, write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
failures = []
checks = 0


def binary():
    env = dict(os.environ)
    env.setdefault("CARGO_BUILD_JOBS", "1")
    subprocess.run(["cargo", "build", "--quiet", "--release", "--bin", "ferrotorch"], cwd=ROOT, env=env, check=True)
    target = env.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "ferrotorch")


def cli(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"ferrotorch {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def bitwise(a, b):
    """Same dtype, shape and bytes."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = a.contiguous(), b.contiguous()
    return a.numel() == 0 or torch.equal(a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8))


def compare(what, want, got):
    global checks
    checks += 1
    if list(want) != list(got) and set(want) != set(got):
        failures.append(f"{what}: names {sorted(got)} != {sorted(want)}")
        return
    for k, w in want.items():
        if not bitwise(w, got[k]):
            failures.append(f"{what}: tensor {k}: {got[k].dtype} {tuple(got[k].shape)} differs from {w.dtype} {tuple(w.shape)}")


def model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 4), torch.nn.LayerNorm(4)
    )
    m.train()
    m(torch.randn(5, 8)).sum().backward()
    return torch.nn.ModuleDict({"body": m, "emb": torch.nn.Embedding(10, 3)})


def main():
    global checks
    exe = binary()
    d = os.environ.get("KEEP_DIR") or tempfile.mkdtemp(prefix="cli_convert_")
    os.makedirs(d, exist_ok=True)
    net = model()
    # A copy: the optimizer step below changes the parameters in place.
    sd = collections.OrderedDict((k, v.clone()) for k, v in net.state_dict().items())
    base = torch.arange(24.0).reshape(4, 6)
    mixed = {str(dt).removeprefix("torch."): values(dt) for dt in DTYPES}
    mixed.update({"base": base, "t": base.t(), "slice": base[1:, 2:5], "specials": torch.tensor([float("nan"), -0.0, float("inf")])})
    torch.save(sd, f"{d}/model.pt")
    torch.save(mixed, f"{d}/mixed.pt")
    opt = torch.optim.AdamW(net.parameters())
    opt.step()
    torch.save({"epoch": 3, "model_state_dict": sd, "optimizer_state_dict": opt.state_dict()}, f"{d}/ckpt.pt")

    # .pt -> safetensors -> .pt
    for name, want in (("model", sd), ("mixed", mixed)):
        cli(exe, "convert", f"{d}/{name}.pt", f"{d}/{name}.safetensors")
        cli(exe, "convert", f"{d}/{name}.safetensors", f"{d}/{name}_back.pt")
        st, meta = read_safetensors(f"{d}/{name}.safetensors")
        compare(f"{name}.safetensors", want, st)
        if meta != {"format": "pt"}:
            failures.append(f"{name}.safetensors: metadata {meta}")
        back = torch.load(f"{d}/{name}_back.pt", weights_only=True)
        if type(back) is not collections.OrderedDict:
            failures.append(f"{name}_back.pt: a {type(back).__name__}, not an OrderedDict")
        compare(f"{name}_back.pt", want, back)
    fresh = model()
    fresh.load_state_dict(torch.load(f"{d}/model_back.pt", weights_only=True), strict=True)
    compare("model reloaded", sd, fresh.state_dict())

    # A training checkpoint: --key picks the state dict.
    cli(exe, "convert", "--key", "model_state_dict", f"{d}/ckpt.pt", f"{d}/ckpt_model.safetensors")
    compare("ckpt_model.safetensors", sd, read_safetensors(f"{d}/ckpt_model.safetensors")[0])

    # safetensors (written by hand) -> .pt
    st_in = {"w": torch.randn(3, 5), "i": torch.arange(7), "h": torch.randn(4).to(torch.bfloat16), "b": torch.tensor([True, False])}
    write_safetensors(f"{d}/hand.safetensors", st_in, {"note": "by hand"})
    cli(exe, "convert", f"{d}/hand.safetensors", f"{d}/hand.pt")
    compare("hand.pt", st_in, torch.load(f"{d}/hand.pt", weights_only=True))

    # inspect lists what PyTorch has.
    for name, want in (("mixed.pt", mixed), ("model.safetensors", sd)):
        checks += 1
        listing = json.loads(cli(exe, "inspect", "--json", f"{d}/{name}"))
        got = {e["name"]: (e["dtype"], e["shape"]) for e in listing["entries"]}
        expect = {k: (str(v.dtype).removeprefix("torch."), list(v.shape)) for k, v in want.items()}
        if got != expect:
            failures.append(f"inspect {name}: {got} != {expect}")
    ckpt = json.loads(cli(exe, "inspect", "--json", f"{d}/ckpt.pt"))
    names = [e["name"] for e in ckpt["entries"]]
    if "optimizer_state_dict.state.0.exp_avg" not in names or "model_state_dict.body.1.num_batches_tracked" not in names:
        failures.append(f"inspect ckpt.pt: names {names}")

    for f in failures:
        print("FAIL", f)
    print(f"{checks - len(failures)} passed, {len(failures)} failed")
    print(f"files in {d}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
