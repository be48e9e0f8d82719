"""Writes tests/nn_data/idioms.json: everyday PyTorch models, each built
right after `torch.manual_seed(seed)`, run on inputs drawn in Python, with
their outputs and a gradient; tests/nn_idioms.rs writes the same Python
line by line with ferrotorch's nn API and compares.

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_nn_idioms.py
"""

import json
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_data", "idioms.json")


def enc(t):
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "data": t.detach().to(torch.float64).flatten().tolist()}


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


@case
def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    x = torch.randn(4, 3, 4)
    y = torch.tensor([0, 2, 1, 2])
    loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
    loss.backward()
    return {"x": enc(x), "y": enc(y)}, {"loss": enc(loss), "grad": enc(model[1].weight.grad)}


@case
def cnn():
    torch.manual_seed(1)
    conv = nn.Conv2d(1, 4, 3, padding=1)
    fc = nn.Linear(4 * 3 * 3, 5)
    x = torch.randn(2, 1, 6, 6)
    h = F.max_pool2d(F.relu(conv(x)), 2)
    h = torch.flatten(h, 1)
    out = fc(F.gelu(h))
    out.sum().backward()
    return {"x": enc(x)}, {"out": enc(out), "grad": enc(conv.weight.grad)}


@case
def lstm_classifier():
    torch.manual_seed(2)
    emb = nn.Embedding(20, 8, padding_idx=0)
    lstm = nn.LSTM(8, 6, num_layers=2, batch_first=True)
    fc = nn.Linear(6, 3)
    ids = torch.tensor([[3, 5, 0, 0], [7, 1, 19, 2]])
    out, (h, c) = lstm(emb(ids))
    logits = fc(h[-1])
    logits.sum().backward()
    return {"ids": enc(ids)}, {"out": enc(out), "logits": enc(logits), "c": enc(c),
                               "grad": enc(emb.weight.grad)}


@case
def gru_with_state():
    torch.manual_seed(3)
    gru = nn.GRU(5, 4, bidirectional=True)
    x = torch.randn(3, 2, 5)
    h0 = torch.randn(2, 2, 4)
    out, hn = gru(x, h0)
    return {"x": enc(x), "h0": enc(h0)}, {"out": enc(out), "hn": enc(hn)}


@case
def attention():
    torch.manual_seed(4)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    q = torch.randn(2, 3, 8)
    kv = torch.randn(2, 5, 8)
    mask = torch.tensor([[False, False, False, True, True], [False] * 5])
    out, w = mha(q, kv, kv, key_padding_mask=mask)
    out2, none = mha(q, kv, kv, need_weights=False)
    assert none is None
    return {"q": enc(q), "kv": enc(kv), "mask": enc(mask)}, {"out": enc(out), "w": enc(w), "out2": enc(out2)}


@case
def transformer_encoder():
    torch.manual_seed(5)
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    x = torch.randn(2, 4, 8)
    pad = torch.tensor([[False, False, False, True], [False] * 4])
    y = encoder(x, src_key_padding_mask=pad)
    y0 = layer(x)
    return {"x": enc(x), "pad": enc(pad)}, {"y": enc(y), "y0": enc(y0)}


@case
def norms_and_joins():
    torch.manual_seed(6)
    ln = nn.LayerNorm(7)
    bn = nn.BatchNorm1d(7)
    bil = nn.Bilinear(7, 3, 2)
    a = torch.randn(4, 7)
    b = torch.randn(4, 3)
    h = bn(ln(a))
    z = bil(h, b)
    parts = [z, z * 2, z + 1]
    s = torch.stack(parts, 1)
    bn.eval()
    e = bn(a)
    return {"a": enc(a), "b": enc(b)}, {"s": enc(s), "e": enc(e), "rm": enc(bn.running_mean)}


if __name__ == "__main__":
    out = {}
    for name, fn in CASES.items():
        inputs, outputs = fn()
        out[name] = {"inputs": inputs, "outputs": outputs}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f)
    print("wrote", OUT, len(out), "cases")
