"""Writes tests/nn_data/group_c.json: what PyTorch gives for the corners of
`torch.nn` that `tests/nn_group_c.rs` checks: layer reprs at non-default
options (convolutions, norms, linear, embedding, pools, flatten, dropout,
activations), `nn.ModuleList` reprs grouping repeated layers, `nn.Module.__repr__` of
modules with several extra lines and children, the names,
order and flags `nn.Module` derives for a nested model (named_* with
prefixes and a tied weight, train / eval, apply order, state_dict keys,
load_state_dict's incompatible keys), layers built after `manual_seed`
(initial parameters and outputs: Linear, Bilinear, Conv*, Embedding,
GroupNorm, RMSNorm, LayerNorm, BatchNorm counters and running stats a
user sets on a layer built without them), the loss modules at
non-default options, and a full backward hook's gradients on a Linear.

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_nn_group_c.py
"""

import json
import os
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_data", "group_c.json")


def summary(t):
    if t is None:
        return None
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).replace("torch.", ""),
        "data": [float(v) for v in t.detach().to(torch.float64).flatten().tolist()],
    }


def seeded(seed, *shape):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


out = {"torch": torch.__version__}

# ------------------------------------------------------------------- reprs
reprs = OrderedDict()
reprs["conv1d_defaults"] = nn.Conv1d(2, 4, 3)
reprs["conv1d_all"] = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, bias=False)
reprs["conv1d_same"] = nn.Conv1d(2, 2, 3, padding="same", dilation=2)
reprs["conv1d_valid"] = nn.Conv1d(2, 2, 3, padding="valid")
reprs["conv2d_tuple"] = nn.Conv2d(2, 4, (2, 3), stride=(1, 2), padding=(0, 1), dilation=(2, 1))
reprs["convt1d_all"] = nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2, bias=False)
reprs["convt2d_all"] = nn.ConvTranspose2d(2, 4, 3, stride=2, padding=(1, 0), output_padding=(1, 0), dilation=2)
reprs["layernorm"] = nn.LayerNorm([3, 4], eps=1e-3, elementwise_affine=True, bias=False)
reprs["layernorm_noaffine"] = nn.LayerNorm(5, elementwise_affine=False)
reprs["groupnorm"] = nn.GroupNorm(2, 4, eps=0.25, affine=False)
reprs["groupnorm_nobias"] = nn.GroupNorm(1, 4, bias=False)
reprs["rmsnorm"] = nn.RMSNorm([2, 3], eps=1e-6, elementwise_affine=False)
reprs["rmsnorm_default"] = nn.RMSNorm(3)
reprs["batchnorm1d"] = nn.BatchNorm1d(3, eps=1e-3, momentum=None, affine=False, track_running_stats=False)
reprs["batchnorm2d_nobias"] = nn.BatchNorm2d(2, momentum=0.25, bias=False)
reprs["linear_nobias"] = nn.Linear(3, 2, bias=False)
reprs["bilinear_nobias"] = nn.Bilinear(3, 4, 2, bias=False)
reprs["embedding_all"] = nn.Embedding(10, 3, padding_idx=-3, max_norm=2.0, norm_type=1.0, scale_grad_by_freq=True)
reprs["embedding_pad0"] = nn.Embedding(5, 2, padding_idx=0)
reprs["maxpool1d"] = nn.MaxPool1d(3)
reprs["maxpool2d_all"] = nn.MaxPool2d((2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 1), ceil_mode=True)
reprs["avgpool1d"] = nn.AvgPool1d(3, stride=2, padding=1)
reprs["avgpool2d"] = nn.AvgPool2d((2, 3), stride=1, padding=(1, 0))
reprs["adaptive_avg_int"] = nn.AdaptiveAvgPool2d(3)
reprs["adaptive_avg_pair"] = nn.AdaptiveAvgPool2d((2, 3))
reprs["adaptive_max_pair"] = nn.AdaptiveMaxPool2d((1, 2))
reprs["adaptive_max_int"] = nn.AdaptiveMaxPool2d(2)
reprs["flatten"] = nn.Flatten(0, 2)
reprs["unflatten_one"] = nn.Unflatten(1, (4,))
reprs["unflatten_two"] = nn.Unflatten(-1, (2, 3))
reprs["dropout"] = nn.Dropout(0.25)
reprs["leaky_relu"] = nn.LeakyReLU(0.2)
reprs["gelu_tanh"] = nn.GELU(approximate="tanh")
reprs["relu"] = nn.ReLU()
reprs["identity"] = nn.Identity()
reprs["module_list_groups"] = nn.ModuleList([nn.Linear(2, 3), nn.Linear(2, 3), nn.Linear(3, 3), nn.ReLU(), nn.ReLU(),
                                             nn.ReLU(), nn.Linear(2, 3)])
reprs["module_list_one"] = nn.ModuleList([nn.ReLU()])
reprs["module_list_empty"] = nn.ModuleList([])
reprs["module_dict"] = nn.ModuleDict(OrderedDict([("b", nn.ReLU()), ("a", nn.Linear(2, 2))]))
out["reprs"] = {k: repr(v) for k, v in reprs.items()}


# nn.Module.__repr__ with extra lines and children.
class Leaf(nn.Module):
    def __init__(self, lines):
        super().__init__()
        self.lines = lines

    def extra_repr(self):
        return "\n".join(f"line{i}" for i in range(self.lines))


class Wrapper(Leaf):
    def __init__(self, lines):
        super().__init__(lines)
        self.inner = nn.ReLU()


out["custom_reprs"] = {"leaf": [repr(Leaf(n)) for n in range(3)], "wrapper": [repr(Wrapper(n)) for n in range(3)]}
out["accessors"] = {
    "embedding_all_padding_idx": reprs["embedding_all"].padding_idx,
    "embedding_all_num_embeddings": reprs["embedding_all"].num_embeddings,
    "embedding_all_embedding_dim": reprs["embedding_all"].embedding_dim,
    "layernorm_normalized_shape": list(reprs["layernorm"].normalized_shape),
    "layernorm_eps": reprs["layernorm"].eps,
    "linear_in": reprs["linear_nobias"].in_features,
    "linear_out": reprs["linear_nobias"].out_features,
    "dropout_p": reprs["dropout"].p,
}


# ------------------------------------------------------- a nested model
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
        self.heads = nn.ModuleList([nn.Linear(4, 2), nn.Linear(4, 2)])
        self.tied = nn.Linear(3, 4, bias=False)
        self.tied.weight = self.fc.weight


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.norm = nn.LayerNorm(2)


net = Net()
model = {
    "named_parameters": [n for n, _ in net.named_parameters()],
    "named_buffers": [n for n, _ in net.named_buffers()],
    "named_modules": [n for n, _ in net.named_modules()],
    "named_children": [n for n, _ in net.named_children()],
    "block_named_children": [n for n, _ in net.block.named_children()],
    "module_types": [type(m).__name__ for m in net.modules()],
    "state_dict": list(net.state_dict().keys()),
}
order = []
net.apply(lambda m: order.append(type(m).__name__))
model["apply_order"] = order
net.eval()
model["after_eval"] = [m.training for m in net.modules()]
net.train()
model["after_train"] = [m.training for m in net.modules()]
net.train(False)
model["after_train_false"] = [m.training for m in net.modules()]
# load_state_dict non-strict: drop two keys, add one.
sd = net.state_dict()
del sd["block.bn.running_var"]
del sd["norm.bias"]
sd["block.extra.weight"] = torch.zeros(1)
res = net.load_state_dict(sd, strict=False)
model["missing_keys"] = list(res.missing_keys)
model["unexpected_keys"] = list(res.unexpected_keys)
out["model"] = model

# ----------------------------------------------------- seeded layers
layers = {}
torch.manual_seed(3)
m = nn.Linear(5, 3)
layers["linear_init"] = {"weight": summary(m.weight), "bias": summary(m.bias)}
m.reset_parameters()
layers["linear_reset"] = {"weight": summary(m.weight), "bias": summary(m.bias)}
torch.manual_seed(4)
m = nn.Linear(0, 3)
layers["linear_empty"] = {"bias": summary(m.bias)}
torch.manual_seed(5)
m = nn.Bilinear(3, 4, 2)
x1, x2 = seeded(50, 2, 3), seeded(51, 2, 4)
layers["bilinear"] = {"weight": summary(m.weight), "bias": summary(m.bias), "x1": summary(x1), "x2": summary(x2),
                      "out": summary(m(x1, x2))}
torch.manual_seed(6)
m = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, bias=False)
x = seeded(60, 2, 4, 9)
layers["conv1d"] = {"weight": summary(m.weight), "x": summary(x), "out": summary(m(x)), "out_unbatched": summary(m(x[0]))}
torch.manual_seed(7)
m = nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2)
x = seeded(70, 1, 4, 5)
layers["convt1d"] = {"weight": summary(m.weight), "bias": summary(m.bias), "x": summary(x), "out": summary(m(x))}
torch.manual_seed(8)
m = nn.ConvTranspose2d(2, 4, 3, stride=2, padding=(1, 0), output_padding=(1, 0), dilation=2)
x = seeded(80, 1, 2, 3, 4)
layers["convt2d"] = {"weight": summary(m.weight), "bias": summary(m.bias), "x": summary(x), "out": summary(m(x))}
torch.manual_seed(9)
m = nn.Conv2d(2, 4, (2, 3), stride=(1, 2), padding=(0, 1), dilation=(2, 1))
x = seeded(90, 1, 2, 5, 6)
layers["conv2d"] = {"weight": summary(m.weight), "bias": summary(m.bias), "x": summary(x), "out": summary(m(x))}
torch.manual_seed(10)
m = nn.Conv1d(2, 2, 3, padding="same", dilation=2)
x = seeded(100, 1, 2, 7)
layers["conv1d_same"] = {"weight": summary(m.weight), "bias": summary(m.bias), "x": summary(x), "out": summary(m(x))}
torch.manual_seed(11)
m = nn.Embedding(10, 3, padding_idx=-3, max_norm=1.5, norm_type=1.0)
idx = torch.tensor([[1, 7, 4], [7, 0, 9]])
w0 = m.weight.detach().clone()
o = m(idx)
layers["embedding"] = {"weight": summary(w0), "idx": summary(idx), "out": summary(o), "weight_after": summary(m.weight)}
pre = seeded(110, 4, 2)
m = nn.Embedding.from_pretrained(pre, freeze=False, padding_idx=-1)
layers["embedding_pretrained"] = {"weights": summary(pre), "padding_idx": m.padding_idx,
                                  "requires_grad": m.weight.requires_grad}
m = nn.GroupNorm(2, 4, eps=0.25)
x = seeded(120, 3, 4)
layers["groupnorm_2d"] = {"x": summary(x), "out": summary(m(x))}
m = nn.RMSNorm([2, 3], eps=0.5, elementwise_affine=False)
x = seeded(125, 2, 2, 3)
layers["rmsnorm"] = {"x": summary(x), "out": summary(m(x))}
m = nn.LayerNorm([3, 4], eps=1e-3)
x = seeded(130, 3, 4)
layers["layernorm_exact"] = {"x": summary(x), "out": summary(m(x))}
m = nn.BatchNorm1d(3, momentum=None)
x = seeded(140, 4, 3)
m.eval()
m(x)
e = {"nbt_eval": int(m.num_batches_tracked)}
m.train()
m(x)
m(x * 2)
e["nbt_train"] = int(m.num_batches_tracked)
e["running_mean"] = summary(m.running_mean)
e["running_var"] = summary(m.running_var)
e["x"] = summary(x)
layers["batchnorm_counts"] = e
# Buffers a user sets on a layer built without running stats: used in
# eval, left alone in training.
m = nn.BatchNorm1d(3, track_running_stats=False)
m.running_mean = torch.tensor([0.5, -1.0, 2.0])
m.running_var = torch.tensor([4.0, 0.25, 1.0])
x = seeded(141, 4, 3)
m.eval()
e = {"x": summary(x), "mean": summary(m.running_mean), "var": summary(m.running_var), "eval": summary(m(x))}
m.train()
e["train"] = summary(m(x))
e["mean_after"] = summary(m.running_mean)
e["var_after"] = summary(m.running_var)
layers["batchnorm_user_stats"] = e
m = nn.LeakyReLU(0.2)
x = seeded(150, 6)
layers["leaky_relu"] = {"x": summary(x), "out": summary(m(x))}
m = nn.GELU(approximate="tanh")
layers["gelu_tanh"] = {"x": summary(x), "out": summary(m(x))}
x = seeded(160, 2, 3, 4)
layers["flatten"] = {"x": summary(x), "out": summary(nn.Flatten(0, 1)(x))}
x = seeded(161, 2, 6)
layers["unflatten"] = {"x": summary(x), "out": summary(nn.Unflatten(-1, (2, 3))(x))}
x = seeded(170, 1, 1, 4, 5)
v, i = nn.AdaptiveMaxPool2d((2, 3), return_indices=True)(x)
layers["adaptive_max"] = {"x": summary(x), "values": summary(v), "indices": summary(i),
                          "avg": summary(nn.AdaptiveAvgPool2d((2, 3))(x))}
x = seeded(180, 2, 3, 2)
s = nn.Sequential(OrderedDict([("a", nn.Identity()), ("b", nn.LeakyReLU(0.2)), ("c", nn.Flatten(0, 1))]))
layers["sequential"] = {"x": summary(x), "out": summary(s(x))}
s.add_module("a", nn.Tanh())
layers["sequential"]["replaced_repr"] = repr(s)
layers["sequential"]["replaced_out"] = summary(s(x))
d = nn.ModuleDict(OrderedDict([("b", nn.ReLU()), ("a", nn.Identity())]))
d["b"] = nn.Tanh()
layers["module_dict_replaced"] = {"repr": repr(d), "keys": list(d.keys())}
out["layers"] = layers

# ------------------------------------------------------------------ losses
losses = {}
logits = seeded(200, 4, 3)
target = torch.tensor([0, 2, -100, 1])
w = torch.tensor([0.5, 1.0, 2.0])
losses["ce_default_ignore"] = float(nn.CrossEntropyLoss()(logits, target))
t2 = torch.tensor([0, 2, 1, 1])
losses["ce_all"] = summary(nn.CrossEntropyLoss(weight=w, ignore_index=1, reduction="sum", label_smoothing=0.2)(logits, t2))
logp = F.log_softmax(logits, 1)
losses["nll_default_ignore"] = float(nn.NLLLoss()(logp, target))
losses["nll_all"] = summary(nn.NLLLoss(weight=w, ignore_index=2, reduction="none")(logp, t2))
p = torch.sigmoid(seeded(201, 4, 3))
y = (seeded(202, 4, 3) > 0).float()
losses["p"] = summary(p)
losses["y"] = summary(y)
losses["logits"] = summary(logits)
losses["bce_weight"] = summary(nn.BCELoss(weight=w, reduction="sum")(p, y))
losses["bce_logits"] = summary(nn.BCEWithLogitsLoss(weight=w, reduction="none", pos_weight=torch.tensor([2.0, 0.5, 1.0]))(logits, y))
q = F.log_softmax(seeded(203, 4, 3), 1)
losses["q"] = summary(q)
losses["kl_log_target"] = summary(nn.KLDivLoss(reduction="batchmean", log_target=True)(logp, q))
losses["smooth_l1_beta"] = summary(nn.SmoothL1Loss(reduction="sum", beta=0.5)(logits, q))
losses["huber_delta"] = summary(nn.HuberLoss(reduction="none", delta=0.3)(logits, q))
out["losses"] = losses

# -------------------------------------------------- full backward hook
torch.manual_seed(12)
lin = nn.Linear(3, 2)
seen = {}


def bhook(mod, gin, gout):
    seen["gin"] = [summary(g) for g in gin]
    seen["gout"] = [summary(g) for g in gout]
    return (gin[0] * 3,)


lin.register_full_backward_hook(bhook)
x = seeded(300, 2, 3).requires_grad_()
r = seeded(301, 2, 2)
(lin(x) * r).sum().backward()
out["backward_hook"] = {"x": summary(x), "r": summary(r), "grad_input": seen["gin"], "grad_output": seen["gout"],
                        "x_grad": summary(x.grad), "grad_fn": type(lin(x).grad_fn).__name__}
# Only a forward hook: the output keeps the forward's own node.
lin2 = nn.Linear(3, 2)
lin2.register_forward_hook(lambda mod, args, output: None)
out["backward_hook"]["grad_fn_forward_hook_only"] = type(lin2(x).grad_fn).__name__

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
