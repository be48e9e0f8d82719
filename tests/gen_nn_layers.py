"""Writes tests/nn_data/layers.json: what PyTorch gives for the
normalisation, embedding, loss and transformer layers (and nn.Transformer)
built right after
`torch.manual_seed(seed)`: repr, state-dict keys, shapes, dtypes and
values, named parameters / buffers / modules, forward outputs for fixed
inputs (eval mode unless noted), and the gradients of the inputs and
parameters for the loss `(output * r).sum()` with a fixed random `r`
(stored too). BatchNorm's running statistics after two training forwards
(momentum 0.1 and None). Loss modules for every reduction. A
MultiheadAttention call with forward pre-, forward and full backward hooks
(what the backward hook saw, and the gradients after it replaced one).

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_nn_layers.py
"""

import json
import math
import os

import torch
from torch import nn

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_data", "layers.json")


def summary(t):
    if t is None:
        return None
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).replace("torch.", ""),
        # JSON has no infinities: non-finite values as Python spells them.
        "data": [v if math.isfinite(v) else repr(v) for v in t.detach().to(torch.float64).flatten().tolist()],
    }


def describe(m):
    sd = m.state_dict()
    return {
        "repr": repr(m),
        "state_dict": [[k, list(v.shape), str(v.dtype).replace("torch.", "")] for k, v in sd.items()],
        "values": {k: summary(v) for k, v in sd.items()},
        "named_parameters": [k for k, _ in m.named_parameters()],
        "named_buffers": [k for k, _ in m.named_buffers()],
        "named_modules": [k for k, _ in m.named_modules()],
    }


def seeded_inputs(seed, specs):
    """Float inputs randn(shape) after manual_seed(seed); other entries as given."""
    torch.manual_seed(seed)
    out = []
    for s in specs:
        if isinstance(s, tuple):
            out.append(torch.randn(s))
        else:
            out.append(s)
    return out


def layer_case(name, seed, build, inputs, run=None, train=False, pre=None):
    """Builds after manual_seed(seed); runs `run(m, *inputs)` (default m(x))
    in eval mode (or training mode), then backward of (out * r).sum()."""
    torch.manual_seed(seed)
    m = build()
    case = {"name": name, "seed": seed}
    case.update(describe(m))
    if pre is not None:
        pre(m, case)
    m.train(train)
    ins = [t.clone().requires_grad_(t.is_floating_point()) if isinstance(t, torch.Tensor) else t for t in inputs]
    run = run or (lambda m, *a: m(*a))
    out = run(m, *ins)
    torch.manual_seed(seed + 1000)
    r = torch.randn(out.shape)
    (out * r).sum().backward()
    case["inputs"] = [summary(t) if isinstance(t, torch.Tensor) else None for t in inputs]
    case["output"] = summary(out)
    case["r"] = summary(r)
    case["input_grads"] = [summary(t.grad) if isinstance(t, torch.Tensor) and t.is_floating_point() else None
                           for t in ins]
    case["param_grads"] = {k: summary(p.grad) for k, p in m.named_parameters()}
    case["after"] = {k: summary(v) for k, v in m.state_dict().items()}
    return case


cases = []

# ---------------------------------------------------------------- transformer
causal5 = nn.Transformer.generate_square_subsequent_mask(5)
kpm = torch.tensor([[False, False, False, True, True], [False, False, False, False, False]])
for act in ["relu", "gelu"]:
    for norm_first in [False, True]:
        name = f"enc_layer_{act}_{'pre' if norm_first else 'post'}"
        build = (lambda act=act, nf=norm_first: nn.TransformerEncoderLayer(
            16, 4, dim_feedforward=32, activation=act, norm_first=nf))
        [src] = seeded_inputs(500, [(5, 2, 16)])
        cases.append(layer_case(name, 0, build, [src]))
        # With masks (seq-first): a float causal mask and a boolean key padding mask.
        cases.append(layer_case(name + "_masked", 0, build, [src, causal5, kpm],
                                run=lambda m, s, am, kp: m(s, src_mask=am, src_key_padding_mask=kp)))

[src_bf] = seeded_inputs(501, [(2, 5, 16)])
cases.append(layer_case(
    "enc_layer_batch_first_causal", 3,
    lambda: nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True, layer_norm_eps=1e-6),
    [src_bf, causal5], run=lambda m, s, am: m(s, src_mask=am, is_causal=True)))

cases.append(layer_case(
    "encoder_2_layers", 0,
    lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, dim_feedforward=32), 2,
                                  norm=nn.LayerNorm(16), enable_nested_tensor=False),
    [src, causal5, kpm], run=lambda m, s, am, kp: m(s, mask=am, src_key_padding_mask=kp)))

[tgt, mem] = seeded_inputs(502, [(4, 2, 16), (5, 2, 16)])
causal4 = nn.Transformer.generate_square_subsequent_mask(4)
for norm_first in [False, True]:
    cases.append(layer_case(
        f"dec_layer_{'pre' if norm_first else 'post'}", 0,
        lambda nf=norm_first: nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, norm_first=nf),
        [tgt, mem, causal4, kpm],
        run=lambda m, t, mm, tm, mkp: m(t, mm, tgt_mask=tm, memory_key_padding_mask=mkp)))

[tgt, mem] = seeded_inputs(502, [(4, 2, 16), (5, 2, 16)])
cases.append(layer_case(
    "decoder_2_layers", 0,
    lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, dim_feedforward=32), 2, norm=nn.LayerNorm(16)),
    [tgt, mem, causal4, kpm],
    run=lambda m, t, mm, tm, mkp: m(t, mm, tgt_mask=tm, memory_key_padding_mask=mkp)))
cases.append(layer_case(
    "decoder_1_layer_no_norm", 4,
    lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, norm_first=True), 1),
    [tgt, mem], run=lambda m, t, mm: m(t, mm)))

# nn.Transformer: encoder + decoder with final norms, xavier_uniform_ on
# every matrix after building.
[src_t, tgt_t] = seeded_inputs(503, [(5, 2, 16), (4, 2, 16)])
cases.append(layer_case(
    "transformer_masked", 0,
    lambda: nn.Transformer(16, 4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32),
    [src_t, tgt_t, causal4, kpm],
    run=lambda m, s, t, tm, kp: m(s, t, tgt_mask=tm, src_key_padding_mask=kp, memory_key_padding_mask=kp)))
[src_tb, tgt_tb] = seeded_inputs(504, [(2, 5, 16), (2, 4, 16)])
cases.append(layer_case(
    "transformer_batch_first_pre_gelu", 1,
    lambda: nn.Transformer(16, 4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=24,
                           activation="gelu", batch_first=True, norm_first=True, layer_norm_eps=1e-6),
    [src_tb, tgt_tb]))

# MultiheadAttention with hooks: a forward pre-hook scaling the query, a
# forward hook shifting the output, and a full backward hook recording
# grad_input / grad_output and halving the key's gradient. Loss over both
# outputs (the attention and its weights).
def mha_hooks_case():
    torch.manual_seed(0)
    m = nn.MultiheadAttention(8, 2)
    case = {"name": "mha_hooks", "seed": 0}
    case.update(describe(m))
    q0, k0, v0 = seeded_inputs(505, [(3, 2, 8), (4, 2, 8), (4, 2, 8)])
    q, k, v = (t.clone().requires_grad_(True) for t in (q0, k0, v0))
    seen = {}

    def pre(mod, args):
        return (args[0] * 2, args[1], args[2])

    def post(mod, args, out):
        return (out[0] + 1, out[1])

    def bw(mod, gin, gout):
        seen["grad_input"] = [summary(g) for g in gin]
        seen["grad_output"] = [summary(g) for g in gout]
        return (gin[0], gin[1] * 0.5, gin[2])

    m.register_forward_pre_hook(pre)
    m.register_forward_hook(post)
    m.register_full_backward_hook(bw)
    out, w = m(q, k, v)
    torch.manual_seed(1000)
    r, rw = torch.randn(out.shape), torch.randn(w.shape)
    ((out * r).sum() + (w * rw).sum()).backward()
    case["inputs"] = [summary(q0), summary(k0), summary(v0)]
    case["output"] = summary(out)
    case["weights"] = summary(w)
    case["r"] = summary(r)
    case["rw"] = summary(rw)
    case["input_grads"] = [summary(q.grad), summary(k.grad), summary(v.grad)]
    case["hook_grad_input"] = seen["grad_input"]
    case["hook_grad_output"] = seen["grad_output"]
    case["param_grads"] = {n: summary(p.grad) for n, p in m.named_parameters()}
    return case


cases.append(mha_hooks_case())

# --------------------------------------------------------------- normalisation
[x4] = seeded_inputs(510, [(3, 4, 5, 5)])
[x4b, x4c] = seeded_inputs(511, [(3, 4, 5, 5), (3, 4, 5, 5)])


def bn_two_steps(m, case):
    """Two training forwards before the recorded (eval) one."""
    m.train()
    pre = [x4b * 2 + 1, x4c * 0.5 - 2]
    for x in pre:
        m(x)
    case["pre_inputs"] = [summary(x) for x in pre]
    case["running"] = {k: summary(v) for k, v in m.state_dict().items()}


cases.append(layer_case("batchnorm2d", 0, lambda: nn.BatchNorm2d(4), [x4], pre=bn_two_steps))
cases.append(layer_case("batchnorm2d_cma", 0, lambda: nn.BatchNorm2d(4, momentum=None), [x4], pre=bn_two_steps))
cases.append(layer_case("batchnorm2d_train", 0, lambda: nn.BatchNorm2d(4), [x4], train=True))
cases.append(layer_case("batchnorm2d_no_stats", 0,
                        lambda: nn.BatchNorm2d(4, affine=False, track_running_stats=False), [x4]))
[x5] = seeded_inputs(514, [(2, 3, 3, 4, 2)])
[x5b, x5c] = seeded_inputs(515, [(2, 3, 3, 4, 2), (2, 3, 3, 4, 2)])


def bn3d_two_steps(m, case):
    """Two training forwards (5-d inputs) before the recorded (eval) one."""
    m.train()
    pre = [x5b * 2 + 1, x5c * 0.5 - 2]
    for x in pre:
        m(x)
    case["pre_inputs"] = [summary(x) for x in pre]
    case["running"] = {k: summary(v) for k, v in m.state_dict().items()}


cases.append(layer_case("batchnorm3d", 0, lambda: nn.BatchNorm3d(3), [x5], pre=bn3d_two_steps))
cases.append(layer_case("batchnorm3d_cma_train", 0, lambda: nn.BatchNorm3d(3, momentum=None, eps=1e-3), [x5],
                        pre=bn3d_two_steps, train=True))
cases.append(layer_case("batchnorm3d_no_affine_train", 0, lambda: nn.BatchNorm3d(3, affine=False), [x5], train=True))
[x1d] = seeded_inputs(512, [(4, 3, 6)])
cases.append(layer_case("batchnorm1d_3d_train", 0, lambda: nn.BatchNorm1d(3, eps=1e-3, momentum=0.3), [x1d],
                        train=True))
[x2d] = seeded_inputs(513, [(6, 3)])
cases.append(layer_case("batchnorm1d_2d_train", 0, lambda: nn.BatchNorm1d(3), [x2d], train=True))

[xl] = seeded_inputs(520, [(2, 5, 3, 4)])
cases.append(layer_case("layernorm", 0, lambda: nn.LayerNorm([3, 4]), [xl]))
[xl8] = seeded_inputs(521, [(3, 8)])
cases.append(layer_case("layernorm_nobias", 0, lambda: nn.LayerNorm(8, eps=1e-3, bias=False), [xl8]))
cases.append(layer_case("layernorm_noaffine", 0, lambda: nn.LayerNorm(8, elementwise_affine=False), [xl8]))
[xg] = seeded_inputs(522, [(3, 6, 4)])
cases.append(layer_case("groupnorm", 0, lambda: nn.GroupNorm(2, 6), [xg]))
cases.append(layer_case("groupnorm_noaffine", 0, lambda: nn.GroupNorm(3, 6, eps=1e-3, affine=False), [xg]))
[xr] = seeded_inputs(523, [(3, 5, 4)])
cases.append(layer_case("rmsnorm", 0, lambda: nn.RMSNorm([4]), [xr]))
cases.append(layer_case("rmsnorm_eps_2d", 0, lambda: nn.RMSNorm([5, 4], eps=1e-6), [xr]))
cases.append(layer_case("rmsnorm_noaffine", 0, lambda: nn.RMSNorm(4, elementwise_affine=False), [xr]))

# ------------------------------------------------------------------ embedding
idx = torch.tensor([[1, 8, 3], [8, 0, 1]])
cases.append(layer_case("embedding_padding", 0, lambda: nn.Embedding(10, 4, padding_idx=-2), [idx]))
cases.append(layer_case("embedding_freq", 0, lambda: nn.Embedding(10, 4, scale_grad_by_freq=True), [idx]))
cases.append(layer_case("embedding_max_norm", 0, lambda: nn.Embedding(10, 4, max_norm=1.0, norm_type=1.5), [idx]))

# ---------------------------------------------------------------------- losses
torch.manual_seed(600)
logits = torch.randn(4, 5)
classes = torch.tensor([0, 3, 1, 4])
cw = torch.rand(5) + 0.5
probs_t = torch.softmax(torch.randn(4, 5), 1)
logits3 = torch.randn(2, 5, 3)
classes3 = torch.tensor([[0, 4, 1], [1, 2, 3]])
reg_in, reg_t = torch.randn(3, 4), torch.randn(3, 4)
p_in = torch.sigmoid(torch.randn(3, 4))
b_t = torch.rand(3, 4)
ew = torch.rand(3, 4) + 0.5
pw = torch.rand(4) + 0.5
kl_in = torch.log_softmax(torch.randn(3, 4), 1)
kl_t = torch.softmax(torch.randn(3, 4), 1)


def loss_case(name, build, inp, target, extra=None):
    m = build()
    x = inp.clone().requires_grad_(True)
    out = m(x, target)
    (out * 1.5).sum().backward()
    c = {"name": name, "input": summary(inp), "target": summary(target), "output": summary(out),
         "input_grad": summary(x.grad)}
    c.update(describe(m))
    if extra:
        c.update(extra)
    return c


for red in ["none", "mean", "sum"]:
    cases.append(loss_case(f"ce_{red}", lambda: nn.CrossEntropyLoss(weight=cw, ignore_index=1, reduction=red,
                                                                   label_smoothing=0.1), logits, classes))
    cases.append(loss_case(f"ce_plain_{red}", lambda: nn.CrossEntropyLoss(reduction=red), logits, classes))
    cases.append(loss_case(f"ce_probs_{red}", lambda: nn.CrossEntropyLoss(weight=cw, reduction=red), logits, probs_t))
    cases.append(loss_case(f"ce_3d_{red}", lambda: nn.CrossEntropyLoss(reduction=red), logits3, classes3))
    cases.append(loss_case(f"nll_{red}", lambda: nn.NLLLoss(weight=cw, ignore_index=3, reduction=red),
                           torch.log_softmax(logits, 1), classes))
    cases.append(loss_case(f"mse_{red}", lambda: nn.MSELoss(reduction=red), reg_in, reg_t))
    cases.append(loss_case(f"l1_{red}", lambda: nn.L1Loss(reduction=red), reg_in, reg_t))
    cases.append(loss_case(f"smooth_l1_{red}", lambda: nn.SmoothL1Loss(reduction=red, beta=0.5), reg_in, reg_t))
    cases.append(loss_case(f"huber_{red}", lambda: nn.HuberLoss(reduction=red, delta=0.7), reg_in, reg_t))
    cases.append(loss_case(f"bce_{red}", lambda: nn.BCELoss(weight=ew, reduction=red), p_in, b_t))
    cases.append(loss_case(f"bce_logits_{red}", lambda: nn.BCEWithLogitsLoss(weight=ew, reduction=red, pos_weight=pw),
                           reg_in, b_t))
for red in ["none", "batchmean", "sum", "mean"]:
    for lt in [False, True]:
        t = torch.log(kl_t) if lt else kl_t
        cases.append(loss_case(f"kl_{red}_{lt}", lambda: nn.KLDivLoss(reduction=red, log_target=lt), kl_in, t))

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
print(f"wrote {len(cases)} cases to {OUT}")
