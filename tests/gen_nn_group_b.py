"""Writes tests/nn_data/group_b.json: what PyTorch gives for
MultiheadAttention, F.scaled_dot_product_attention, the transformer layers
and LSTM / GRU with non-default options, read by tests/nn_group_b.rs.

Every module is float64 with random parameters (biases and norm weights
included, so none is a no-op), stored by state-dict name; the Rust side
copies them in. Inputs are stored too. Modules run in eval mode (grad
enabled, so PyTorch takes its math paths) unless a case says "train".

Run with the benchmark venv (PyTorch 2.15.0, CPU):

    bench/.venv/bin/python tests/gen_nn_group_b.py
"""

import json
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_data", "group_b.json")
D = torch.float64


def summary(t):
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).replace("torch.", ""),
        "data": [v if math.isfinite(v) else repr(v) for v in t.detach().to(torch.float64).flatten().tolist()],
    }


def randomise(m, seed):
    """Random values (uniform in [-1, 1)) for every parameter: [name, values] in order."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.copy_(torch.rand(p.shape, generator=g, dtype=p.dtype) * 2 - 1)
    return [[k, summary(v)] for k, v in m.named_parameters()]


def rnd(seed, *shape, dtype=D):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


cases = {}


def add(name, **kw):
    assert name not in cases
    cases[name] = {k: (summary(v) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}


# ---------------------------------------------------------------- MHA
def mha_case(name, e, h, kw, q, k, v, seed, train=False, **fkw):
    m = nn.MultiheadAttention(e, h, dtype=D, **kw)
    params = randomise(m, seed)
    m.train(train)
    masks = {}
    for key in ("attn_mask", "key_padding_mask"):
        if key in fkw:
            masks[key] = summary(fkw[key])
    out, w = m(q, k, v, **fkw)
    add(
        name,
        params=params,
        q=q,
        k=k,
        v=v,
        masks=masks,
        need_weights=fkw.get("need_weights", True),
        average_attn_weights=fkw.get("average_attn_weights", True),
        is_causal=fkw.get("is_causal", False),
        out=out,
        weights=w if w is not None else None,
    )


L, S, N, E, H = 3, 5, 3, 6, 2
q3, k3, v3 = rnd(1, L, N, E), rnd(2, S, N, E), rnd(3, S, N, E)
mha_case("mha_plain", E, H, {}, q3, k3, v3, 10)
mha_case("mha_plain_noweights", E, H, {}, q3, k3, v3, 10, need_weights=False)
# kdim / vdim, no bias, batch first, per-head weights.
mha_case(
    "mha_kv_bf",
    E,
    H,
    dict(kdim=4, vdim=5, bias=False, batch_first=True),
    rnd(4, N, 4, E),
    rnd(5, N, S, 4),
    rnd(6, N, S, 5),
    11,
    average_attn_weights=False,
)
# Only vdim differs: separate projection weights.
mha_case("mha_vdim_only", E, H, dict(vdim=5), q3, k3, rnd(7, S, N, 5), 12)
fmask = rnd(8, L, S)
kpm_bool = torch.tensor([[False, False, True, False, True], [False] * 5, [True, False, False, False, False]])
mha_case("mha_fmask_bkpm", E, H, {}, q3, k3, v3, 13, attn_mask=fmask, key_padding_mask=kpm_bool)
mha_case(
    "mha_fmask_bkpm_noweights", E, H, {}, q3, k3, v3, 13, attn_mask=fmask, key_padding_mask=kpm_bool, need_weights=False
)
bmask3 = torch.rand(N * H, L, S, generator=torch.Generator().manual_seed(9)) < 0.3
bmask3[:, :, 0] = False  # every row keeps a key
fkpm = rnd(10, N, S)
mha_case("mha_bmask3_fkpm", E, H, {}, q3, k3, v3, 14, attn_mask=bmask3, key_padding_mask=fkpm, average_attn_weights=False)
mha_case("mha_bmask3_fkpm_noweights", E, H, {}, q3, k3, v3, 14, attn_mask=bmask3, key_padding_mask=fkpm, need_weights=False)
mha_case("mha_bmask2_noweights", E, H, {}, q3, k3, v3, 14, attn_mask=bmask3[0], need_weights=False)
# is_causal with the causal mask (L == S).
qc, kc = rnd(11, 4, N, E), rnd(12, 4, N, E)
causal = nn.Transformer.generate_square_subsequent_mask(4, dtype=D)
mha_case("mha_causal_noweights", E, H, {}, qc, kc, kc, 15, attn_mask=causal, is_causal=True, need_weights=False)
mha_case("mha_causal_weights", E, H, {}, qc, kc, kc, 15, attn_mask=causal, is_causal=True)
# A non-causal mask with the is_causal hint: the sdpa path drops the mask.
mha_case("mha_hint_dropped", E, H, {}, qc, kc, kc, 15, attn_mask=rnd(13, 4, 4), is_causal=True, need_weights=False)
mha_case(
    "mha_causal_kpm_noweights",
    E,
    H,
    {},
    qc,
    kc,
    kc,
    15,
    attn_mask=causal,
    is_causal=True,
    need_weights=False,
    key_padding_mask=kpm_bool[:, :4],
)
# Unbatched.
mha_case("mha_unbatched", E, H, {}, rnd(14, L, E), rnd(15, S, E), rnd(16, S, E), 16)
mha_case("mha_unbatched_noweights", E, H, dict(batch_first=True), rnd(14, L, E), rnd(15, S, E), rnd(16, S, E), 16, need_weights=False)
# Training with dropout 1: the attention weights are all dropped.
mha_case("mha_train_dropout1", E, H, dict(dropout=1.0), q3, k3, v3, 17, train=True)
mha_case("mha_train_dropout1_noweights", E, H, dict(dropout=1.0), q3, k3, v3, 17, train=True, need_weights=False)


# ---------------------------------------------------------------- sdpa
def sdpa_case(name, q, k, v, **kw):
    out = F.scaled_dot_product_attention(q, k, v, **kw)
    c = dict(q=q, k=k, v=v, out=out)
    for key in ("attn_mask",):
        if key in kw:
            c[key] = kw[key]
    for key in ("is_causal", "scale", "dropout_p"):
        if key in kw:
            c[key] = kw[key]
    add(name, **c)


sdpa_case("sdpa_2d", rnd(20, 3, 4), rnd(21, 5, 4), rnd(22, 5, 6))
sdpa_case("sdpa_2d_causal", rnd(20, 3, 4), rnd(21, 5, 4), rnd(22, 5, 6), is_causal=True)
sdpa_case("sdpa_3d", rnd(23, 2, 3, 4), rnd(24, 2, 5, 4), rnd(25, 2, 5, 6))
sdpa_case("sdpa_3d_square", rnd(23, 2, 3, 4), rnd(24, 2, 3, 4), rnd(25, 2, 3, 4), scale=0.7, dropout_p=0.0)
sdpa_case("sdpa_3d_fmask_negscale", rnd(23, 2, 3, 4), rnd(24, 2, 5, 4), rnd(25, 2, 5, 6), attn_mask=rnd(26, 3, 5), scale=-0.7)
sdpa_case("sdpa_3d_negscale", rnd(23, 2, 3, 4), rnd(24, 2, 5, 4), rnd(25, 2, 5, 6), scale=-0.7)
sdpa_case("sdpa_3d_posscale_mask", rnd(23, 2, 3, 4), rnd(24, 2, 5, 4), rnd(25, 2, 5, 6), attn_mask=rnd(26, 3, 5), scale=0.7)
dead = torch.tensor([[True, False, True, True, False], [False] * 5, [True] * 5])
sdpa_case("sdpa_3d_bmask_deadrow", rnd(23, 2, 3, 4), rnd(24, 2, 5, 4), rnd(25, 2, 5, 6), attn_mask=dead)
sdpa_case("sdpa_q3_kv4", rnd(27, 2, 2, 4), rnd(28, 2, 2, 5, 4), rnd(29, 2, 2, 5, 4))
sdpa_case("sdpa_4d_mask", rnd(30, 2, 2, 3, 4), rnd(31, 2, 2, 5, 4), rnd(32, 2, 2, 5, 4), attn_mask=rnd(33, 3, 5))
sdpa_case("sdpa_4d_dropout1", rnd(30, 2, 2, 3, 4), rnd(31, 2, 2, 5, 4), rnd(32, 2, 2, 5, 4), dropout_p=1.0)
sdpa_case("sdpa_4d_kv_bcast", rnd(30, 2, 2, 3, 4), rnd(34, 1, 2, 5, 4), rnd(35, 1, 2, 5, 4))
sdpa_case("sdpa_4d_v_bcast", rnd(30, 2, 2, 3, 4), rnd(31, 2, 2, 5, 4), rnd(35, 1, 2, 5, 4))
sdpa_case("sdpa_4d_ev", rnd(30, 2, 2, 3, 4), rnd(31, 2, 2, 5, 4), rnd(36, 2, 2, 5, 6))
# Fused (flash) kernel in f32: PyTorch's CPU dispatch picks it here.
f32 = torch.float32
sdpa_case("sdpa_4d_fused_f32", rnd(37, 2, 3, 17, 8, dtype=f32), rnd(38, 2, 3, 19, 8, dtype=f32), rnd(39, 2, 3, 19, 8, dtype=f32))
sdpa_case(
    "sdpa_4d_fused_causal_f32",
    rnd(37, 2, 3, 17, 8, dtype=f32),
    rnd(38, 2, 3, 19, 8, dtype=f32),
    rnd(39, 2, 3, 19, 8, dtype=f32),
    is_causal=True,
)
# Which kernel: PyTorch's CPU dispatch gives the fused operator's bits for
# 4-d inputs of one batch and head count and one head dim without a mask,
# and the math path's (the bits of a zero float mask) otherwise.
flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
kernels = []
for kind, shapes, causal in [
    ("fused", ([2, 3, 17, 8], [2, 3, 19, 8], [2, 3, 19, 8]), False),
    ("fused", ([2, 3, 17, 8], [2, 3, 19, 8], [2, 3, 19, 8]), True),
    ("math", ([3, 17, 8], [3, 19, 8], [3, 19, 8]), False),
    ("math", ([17, 8], [19, 8], [19, 8]), False),
    ("math", ([2, 3, 17, 8], [2, 3, 19, 8], [2, 3, 19, 5]), False),
    ("math", ([2, 3, 17, 8], [1, 3, 19, 8], [1, 3, 19, 8]), False),
]:
    q, k, v = (rnd(60 + i, *sh, dtype=f32) for i, sh in enumerate(shapes))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if kind == "fused":
        assert torch.equal(out, flash(q, k, v, is_causal=causal)[0])
    else:
        zero = torch.zeros(q.shape[-2], k.shape[-2], dtype=f32)
        assert torch.equal(out, F.scaled_dot_product_attention(q, k, v, attn_mask=zero))
    kernels.append(dict(kind=kind, causal=causal, q=summary(q), k=summary(k), v=summary(v), out=summary(out)))
add("sdpa_kernels", cases=kernels)
# Empty sequences.
sdpa_case("sdpa_2d_empty_q", rnd(40, 0, 4), rnd(41, 3, 4), rnd(42, 3, 6))
qinf = rnd(43, 2, 3, 4)
qinf[0, 1, 2] = float("inf")
sdpa_case("sdpa_3d_no_keys_inf", qinf, rnd(44, 2, 0, 4), rnd(45, 2, 0, 6))
errors = {}
for name, args in {
    "dtype_k": (rnd(1, 2, 3, 4), rnd(1, 2, 3, 4, dtype=f32), rnd(1, 2, 3, 4)),
    "dtype_v": (rnd(1, 2, 3, 4), rnd(1, 2, 3, 4), rnd(1, 2, 3, 4, dtype=f32)),
}.items():
    try:
        F.scaled_dot_product_attention(*args)
    except Exception as e:  # noqa: BLE001
        errors[name] = str(e)
try:
    F.scaled_dot_product_attention(rnd(1, 2, 3, 4), rnd(1, 2, 3, 4), rnd(1, 2, 3, 4), attn_mask=rnd(2, 3, 3), is_causal=True)
except Exception as e:  # noqa: BLE001
    errors["causal_mask"] = str(e)
add("sdpa_errors", messages=errors)


# ---------------------------------------------------------------- RNN
def rnn_case(name, cls, i, hdim, kw, x, seed, state=None, train=False):
    m = cls(i, hdim, dtype=D, **kw)
    params = randomise(m, seed)
    m.train(train)
    c = dict(repr=repr(m), params=params, x=x)
    if state is None:
        out, hn = m(x)
    else:
        out, hn = m(x, state)
        if isinstance(state, tuple):
            c["h0"], c["c0"] = state
        else:
            c["h0"] = state
    c["out"] = out
    if isinstance(hn, tuple):
        c["hn"], c["cn"] = hn
    else:
        c["hn"] = hn
    add(name, **c)


x5 = rnd(50, 5, 2, 3)
rnn_case("lstm_3_bi", nn.LSTM, 3, 4, dict(num_layers=3, bidirectional=True), x5, 51)
rnn_case("lstm_3_bi_state", nn.LSTM, 3, 4, dict(num_layers=3, bidirectional=True), x5, 51, state=(rnd(52, 6, 2, 4), rnd(53, 6, 2, 4)))
rnn_case("lstm_2_bi_state", nn.LSTM, 3, 4, dict(num_layers=2, bidirectional=True), x5, 54, state=(rnd(52, 4, 2, 4), rnd(53, 4, 2, 4)))
rnn_case(
    "lstm_2_nobias_bf_state",
    nn.LSTM,
    3,
    4,
    dict(num_layers=2, bias=False, batch_first=True),
    rnd(55, 2, 5, 3),
    56,
    state=(rnd(57, 2, 2, 4), rnd(58, 2, 2, 4)),
)
rnn_case("lstm_unbatched_state", nn.LSTM, 3, 4, dict(num_layers=2), rnd(59, 5, 3), 60, state=(rnd(61, 2, 4), rnd(62, 2, 4)))
rnn_case("lstm_unbatched", nn.LSTM, 3, 4, dict(bidirectional=True), rnd(59, 5, 3), 60)
rnn_case("lstm_eval_dropout", nn.LSTM, 3, 4, dict(num_layers=2, dropout=0.5), x5, 63)
rnn_case("lstm_train_dropout1", nn.LSTM, 3, 4, dict(num_layers=3, dropout=1.0), x5, 64, train=True)
rnn_case("gru_1", nn.GRU, 3, 4, {}, x5, 70)
rnn_case("gru_3_bi_state", nn.GRU, 3, 4, dict(num_layers=3, bidirectional=True), x5, 71, state=rnd(72, 6, 2, 4))
rnn_case("gru_2_nobias_bf", nn.GRU, 3, 4, dict(num_layers=2, bias=False, batch_first=True), rnd(55, 2, 5, 3), 73)
rnn_case("gru_unbatched_state", nn.GRU, 3, 4, dict(num_layers=2, bidirectional=True), rnd(59, 5, 3), 74, state=rnd(75, 4, 4))
rnn_case("gru_eval_dropout", nn.GRU, 3, 4, dict(num_layers=2, dropout=0.5, bidirectional=True), x5, 76)
rnn_case("gru_train_dropout1", nn.GRU, 3, 4, dict(num_layers=2, dropout=1.0, batch_first=True), rnd(55, 2, 5, 3), 77, train=True)
reprs = {}
for key, kw in {
    "lstm_default": dict(),
    "lstm_all": dict(num_layers=2, bias=False, batch_first=True, dropout=0.25, bidirectional=True),
    "gru_bf": dict(batch_first=True),
    "gru_dropout": dict(num_layers=3, dropout=0.5),
}.items():
    cls = nn.LSTM if key.startswith("lstm") else nn.GRU
    reprs[key] = repr(cls(3, 4, **kw))
add("rnn_reprs", reprs=reprs)


# ---------------------------------------------------------------- transformers
def layer_kw(**kw):
    base = dict(dim_feedforward=6, dtype=D)
    base.update(kw)
    return base


def enc_layer_case(name, kw, src, seed, **fkw):
    m = nn.TransformerEncoderLayer(4, 2, **layer_kw(**kw))
    params = randomise(m, seed)
    m.eval()
    out = m(src, **fkw)
    add(name, params=params, src=src, out=out, **{k: v for k, v in fkw.items()})


src_bf = rnd(80, 3, 5, 4)
enc_layer_case(
    "enc_layer_gelu_nf_bf",
    dict(activation="gelu", layer_norm_eps=0.5, batch_first=True, norm_first=True),
    src_bf,
    81,
    src_mask=rnd(82, 5, 5),
    src_key_padding_mask=kpm_bool,
)
enc_layer_case("enc_layer_gelu_nf_bf_nomask", dict(activation="gelu", layer_norm_eps=0.5, batch_first=True, norm_first=True), src_bf, 81)
enc_layer_case("enc_layer_nobias_unbatched", dict(bias=False, layer_norm_eps=0.25), rnd(83, 5, 4), 84)


# MHA dropout only: the encoder layer in training with its Dropout modules in eval.
def enc_layer_attn_dropout():
    m = nn.TransformerEncoderLayer(4, 2, **layer_kw(dropout=1.0))
    params = randomise(m, 85)
    m.train()
    for d in (m.dropout, m.dropout1, m.dropout2):
        d.eval()
    src = rnd(86, 5, 2, 4)
    add("enc_layer_attn_dropout1", params=params, src=src, out=m(src))


enc_layer_attn_dropout()


def dec_layer_case(name, kw, tgt, mem, seed, **fkw):
    m = nn.TransformerDecoderLayer(4, 2, **layer_kw(**kw))
    params = randomise(m, seed)
    m.eval()
    out = m(tgt, mem, **fkw)
    add(name, params=params, tgt=tgt, memory=mem, out=out, **fkw)


tgt3, mem3 = rnd(90, 3, 2, 4), rnd(91, 5, 2, 4)
dec_layer_case(
    "dec_layer_masks",
    dict(activation="gelu", layer_norm_eps=0.5),
    tgt3,
    mem3,
    92,
    tgt_mask=nn.Transformer.generate_square_subsequent_mask(3, dtype=D),
    memory_mask=rnd(93, 3, 5),
    tgt_key_padding_mask=torch.tensor([[False, True, False], [False, False, False]]),
    memory_key_padding_mask=kpm_bool[:2],
)
dec_layer_case("dec_layer_nf_bf", dict(norm_first=True, batch_first=True, bias=False), rnd(94, 2, 3, 4), rnd(95, 2, 5, 4), 96)


def stack_case(name, enc, batch_first, x, seed, norm=True, mem=None, **fkw):
    kw = layer_kw(batch_first=batch_first, layer_norm_eps=0.5)
    if enc:
        m = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, **kw), 3, norm=nn.LayerNorm(4, dtype=D) if norm else None, enable_nested_tensor=False)
    else:
        m = nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, **kw), 2, norm=nn.LayerNorm(4, dtype=D) if norm else None)
    params = randomise(m, seed)
    m.eval()
    out = m(x, **fkw) if enc else m(x, mem, **fkw)
    c = dict(params=params, x=x, out=out, **fkw)
    if mem is not None:
        c["memory"] = mem
    add(name, **c)


stack_case("encoder_nomask", True, False, rnd(100, 5, 2, 4), 101)
stack_case("encoder_fmask_bf", True, True, rnd(102, 2, 5, 4), 103, norm=False, mask=rnd(104, 5, 5))
stack_case("encoder_kpm", True, False, rnd(100, 5, 2, 4), 101, src_key_padding_mask=kpm_bool[:2])
stack_case("decoder_fmask", False, False, tgt3, 105, mem=mem3, tgt_mask=rnd(106, 3, 3), memory_mask=rnd(107, 3, 5))
stack_case("decoder_bf_nonorm", False, True, rnd(108, 2, 3, 4), 109, norm=False, mem=rnd(110, 2, 5, 4))


def transformer_case(name, kw, src, tgt, seed, **fkw):
    m = nn.Transformer(4, 2, num_encoder_layers=2, num_decoder_layers=1, **layer_kw(**kw))
    params = randomise(m, seed)
    m.eval()
    out = m(src, tgt, **fkw)
    add(name, params=params, src=src, tgt=tgt, out=out, **fkw)


transformer_case("transformer_bf", dict(batch_first=True), rnd(120, 2, 5, 4), rnd(121, 2, 3, 4), 122)
transformer_case(
    "transformer_masks",
    dict(activation="gelu", norm_first=True),
    rnd(123, 5, 2, 4),
    rnd(124, 3, 2, 4),
    125,
    src_mask=rnd(126, 5, 5),
    tgt_mask=nn.Transformer.generate_square_subsequent_mask(3, dtype=D),
    memory_mask=rnd(127, 3, 5),
    src_key_padding_mask=kpm_bool[:2],
    tgt_key_padding_mask=torch.tensor([[False, True, False], [False, False, False]]),
    memory_key_padding_mask=kpm_bool[1:],
)
errors = {}
t = nn.Transformer(4, 2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=6, dtype=D)
for key, (s, g) in {
    "src3_tgt2": (rnd(1, 5, 2, 4), rnd(2, 3, 4)),
    "batch": (rnd(1, 5, 2, 4), rnd(2, 3, 3, 4)),
    "tgt_feature": (rnd(1, 5, 2, 4), rnd(2, 3, 2, 3)),
}.items():
    try:
        t(s, g)
        errors[key] = None
    except Exception as e:  # noqa: BLE001
        errors[key] = str(e)
add("transformer_errors", messages=errors, square_mask=nn.Transformer.generate_square_subsequent_mask(3, dtype=D))

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {OUT}")
