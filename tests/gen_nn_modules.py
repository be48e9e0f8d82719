"""Writes tests/nn_data/modules.json: what PyTorch gives for modules built
right after `torch.manual_seed(seed)`: state-dict keys, shapes and values
(in full, or for big tensors their f64 sum and every 997th element),
named_modules, reprs, and a few forward outputs (dropout masks).

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_nn_modules.py
"""

import json
import os

import torch
from torch import nn

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_data", "modules.json")
FULL_LIMIT = 4096
STRIDE = 997


def tensor_summary(t):
    d = {"shape": list(t.shape)}
    t = t.detach().to(torch.float64).flatten()
    if t.numel() <= FULL_LIMIT:
        d["data"] = t.tolist()
    else:
        d["sum"] = float(t.sum())
        d["every"] = STRIDE
        d["samples"] = t[::STRIDE].tolist()
    return d


def module_case(name, seed, build, x=None, note=None):
    torch.manual_seed(seed)
    m = build()
    sd = m.state_dict()
    case = {
        "name": name,
        "seed": seed,
        "repr": repr(m),
        "state_dict": [[k, list(v.shape), str(v.dtype).replace("torch.", "")] for k, v in sd.items()],
        "values": {k: tensor_summary(v) for k, v in sd.items()},
        "named_parameters": [k for k, _ in m.named_parameters()],
        "named_buffers": [k for k, _ in m.named_buffers()],
        "named_modules": [k for k, _ in m.named_modules()],
    }
    if x is not None:
        y = m(x)
        case["input"] = tensor_summary(x)
        case["output"] = tensor_summary(y)
    if note:
        case["note"] = note
    return case


class Net(nn.Module):
    """Own parameter declared after a child: PyTorch lists own parameters first."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.scale = nn.Parameter(torch.ones(2))
        self.blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.Linear(2, 4)])
        self.act = nn.GELU(approximate="tanh")
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("cache", torch.zeros(2), persistent=False)

    def forward(self, x):
        return x


cases = [
    module_case(
        "mnist_mlp",
        0,
        lambda: nn.Sequential(
            nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 10)
        ),
    ),
    module_case("linear_small", 3, lambda: nn.Linear(5, 3)),
    module_case("linear_nobias_f64", 4, lambda: nn.Linear(4, 6, bias=False, dtype=torch.float64)),
    module_case("bilinear", 5, lambda: nn.Bilinear(3, 4, 2)),
    module_case("nested", 6, Net),
    module_case(
        "activations",
        7,
        lambda: nn.Sequential(
            nn.LeakyReLU(),
            nn.LeakyReLU(0.2),
            nn.SiLU(),
            nn.Tanh(),
            nn.Sigmoid(),
            nn.Softmax(dim=1),
            nn.LogSoftmax(dim=-1),
            nn.Identity(),
            nn.Unflatten(1, (2, 5)),
            nn.Flatten(0, 1),
            nn.Dropout(1e-05),
        ),
    ),
]

cnn = lambda: nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10),
)
cases.append(module_case("mnist_cnn", 0, cnn))
cases.append(module_case(
    "conv_variants", 41,
    lambda: nn.Sequential(
        nn.Conv2d(4, 6, (3, 5), stride=2, padding=(1, 2), dilation=(1, 2), groups=2, bias=False),
        nn.Conv2d(6, 6, 3, padding="same"),
        nn.Conv1d(3, 5, 4, padding="valid"),
        nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1),
        nn.ConvTranspose1d(2, 4, 3, groups=2),
        nn.MaxPool2d((2, 3), stride=1, padding=1, ceil_mode=True),
        nn.MaxPool1d(3),
        nn.AvgPool2d(3, stride=2, padding=1),
        nn.AvgPool1d(2),
        nn.AdaptiveAvgPool2d((1, 1)),
        nn.AdaptiveAvgPool2d(7),
        nn.AdaptiveMaxPool2d(2),
    ),
))
cases.append(module_case("mha", 21, lambda: nn.MultiheadAttention(8, 2)))
cases.append(module_case("mha_kdim_vdim_nobias", 22, lambda: nn.MultiheadAttention(6, 3, bias=False, kdim=4, vdim=5)))
cases.append(module_case("lstm_2layer_bi", 23, lambda: nn.LSTM(10, 20, num_layers=2, bidirectional=True)))
cases.append(module_case("gru_batch_first", 24, lambda: nn.GRU(4, 6, batch_first=True, bias=False)))


def forward_case(name, seed, build, run, inputs):
    """A module's outputs (full values) for given inputs, after manual_seed(seed)."""
    torch.manual_seed(seed)
    m = build()
    outs = run(m, *inputs)
    return {
        "name": name,
        "seed": seed,
        "inputs": [tensor_summary(t) for t in inputs],
        "outputs": [tensor_summary(t) for t in outs],
    }


torch.manual_seed(100)
q, k, v = torch.randn(3, 2, 8), torch.randn(4, 2, 8), torch.randn(4, 2, 8)
kpm = torch.tensor([[False, False, True, False], [False, False, False, False]])
am = torch.tensor([[False, True, False, False], [False, False, False, True], [False, False, False, False]])
cases.append(forward_case("mha_forward_weights", 21, lambda: nn.MultiheadAttention(8, 2),
                          lambda m, q, k, v: m(q, k, v), [q, k, v]))
cases.append(forward_case("mha_forward_masks", 21, lambda: nn.MultiheadAttention(8, 2),
                          lambda m, q, k, v, kpm, am: m(q, k, v, key_padding_mask=kpm, attn_mask=am,
                                                        average_attn_weights=False), [q, k, v, kpm, am]))
cases.append(forward_case("mha_forward_batch_first_no_weights", 21,
                          lambda: nn.MultiheadAttention(8, 2, batch_first=True),
                          lambda m, q: (m(q, q, q, need_weights=False)[0],), [q.transpose(0, 1).contiguous()]))
x = torch.randn(5, 3, 10)
cases.append(forward_case("lstm_forward", 23, lambda: nn.LSTM(10, 20, num_layers=2, bidirectional=True),
                          lambda m, x: (lambda o: (o[0], o[1][0], o[1][1]))(m(x)), [x]))
xg, h0 = torch.randn(2, 5, 4), torch.randn(1, 2, 6)
cases.append(forward_case("gru_forward", 24, lambda: nn.GRU(4, 6, batch_first=True, bias=False),
                          lambda m, x, h: m(x, h), [xg, h0]))
# Two layers, both directions, a given initial state: each layer and
# direction starts from its own slice of h0 (and c0).
torch.manual_seed(101)
x2, h2, c2 = torch.randn(4, 3, 5), torch.randn(4, 3, 7), torch.randn(4, 3, 7)
cases.append(forward_case("lstm_2layer_bi_state", 25, lambda: nn.LSTM(5, 7, num_layers=2, bidirectional=True),
                          lambda m, x, h, c: (lambda o: (o[0], o[1][0], o[1][1]))(m(x, (h, c))), [x2, h2, c2]))
cases.append(forward_case("gru_2layer_bi_state", 26, lambda: nn.GRU(5, 7, num_layers=2, bidirectional=True),
                          lambda m, x, h: m(x, h), [x2, h2]))
# Dropout between layers in training (none after the last layer): the
# masks drawn from the generator right after the module's initialisation.
cases.append(forward_case("lstm_dropout_train", 27,
                          lambda: nn.LSTM(5, 7, num_layers=3, dropout=0.5),
                          lambda m, x: (lambda o: (o[0], o[1][0], o[1][1]))(m(x)), [x2]))

torch.manual_seed(50)
xc = torch.randn(2, 1, 28, 28)
cases.append(forward_case("cnn_forward", 0, cnn, lambda m, x: (m(x),), [xc]))

# nn.init after a seed.
def init_case(name, seed, shape, fn):
    torch.manual_seed(seed)
    t = torch.empty(shape)
    fn(t)
    return {"name": name, "seed": seed, "output": tensor_summary(t)}


cases.append(init_case("init_trunc_normal", 31, (40, 50), lambda t: nn.init.trunc_normal_(t, 0.5, 2.0, -1.0, 3.0)))
cases.append(init_case("init_trunc_normal_tail", 38, (7, 9), lambda t: nn.init.trunc_normal_(t, 0.0, 1.0, 1.5, 3.0)))
# A tail away from the mean with std != 1: the acceptance test's peak
# depends on (a - mean) / std.
cases.append(init_case("init_trunc_normal_far_tail", 39, (6, 7), lambda t: nn.init.trunc_normal_(t, 0.0, 2.0, 3.0, 5.0)))
cases.append(init_case("init_xavier_normal", 32, (30, 20), lambda t: nn.init.xavier_normal_(t, 1.5)))
cases.append(init_case("init_xavier_uniform", 33, (6, 5, 3), lambda t: nn.init.xavier_uniform_(t)))
cases.append(init_case("init_kaiming_normal_fan_out", 34, (8, 4, 3, 3),
                       lambda t: nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")))
cases.append(init_case("init_kaiming_uniform", 35, (16, 9), lambda t: nn.init.kaiming_uniform_(t, a=0.1)))
cases.append(init_case("init_orthogonal", 36, (6, 10), lambda t: nn.init.orthogonal_(t, gain=2.0)))
cases.append(init_case("init_orthogonal_tall", 37, (10, 3, 2), lambda t: nn.init.orthogonal_(t)))

# Dropout's mask for a seed (training mode): the draw is bernoulli_(1 - p).
torch.manual_seed(11)
x = torch.randn(4, 6)
torch.manual_seed(12)
d = nn.Dropout(0.3)
cases.append({"name": "dropout_mask", "seed": 12, "p": 0.3, "input": tensor_summary(x), "output": tensor_summary(d(x))})

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, indent=1)
print(f"wrote {len(cases)} cases to {OUT}")
