"""PyTorch side of bench/: the same workloads as src/main.rs, timed the same way.

Prints one line per figure: figure<TAB>threads<TAB>seconds_per_iteration.
Usage: python torch_ref.py --threads N [--filter SUBSTRING[,SUBSTRING...]]
   or: python torch_ref.py --serve --threads N
The second form is the block server that interleave.py drives; it speaks the
same line protocol as `ferrotorch-bench --serve` (list, setup NAME, block,
quit; see serve() below).
"""
import argparse
import contextlib
import sys
import time

import torch
import torch.nn.functional as F

# name -> (runs under inference_mode, setup returning the timed callable)
FIGURES = {}


def figure(name, inference=True):
    def register(setup):
        FIGURES[name] = (inference, setup)
        return setup

    return register


def mode(inference):
    return torch.inference_mode() if inference else contextlib.nullcontext()


def warm_up(f):
    warm = time.perf_counter()
    while time.perf_counter() - warm < 0.2:
        f()


def block(f):
    start = time.perf_counter()
    iters = 0
    while time.perf_counter() - start < 0.1:
        f()
        iters += 1
    return (time.perf_counter() - start) / iters


def time_it(f):
    warm_up(f)
    blocks = sorted(block(f) for _ in range(5))
    return blocks[len(blocks) // 2]


for _n in (256, 512, 1024, 2048):

    @figure(f"sgemm_{_n}")
    def _sgemm(n=_n):
        a, b = torch.randn(n, n), torch.randn(n, n)
        return lambda: torch.mm(a, b)


def _pair():
    n = 10_000_000
    return torch.randn(n), torch.randn(n)


@figure("add_1e7")
def _add():
    a, b = _pair()
    return lambda: a + b


@figure("mul_1e7")
def _mul():
    a, b = _pair()
    return lambda: a * b


@figure("exp_1e7")
def _exp():
    a, _ = _pair()
    return lambda: torch.exp(a)


SIDE = 3163


@figure("add_transposed_1e7")
def _add_t():
    x, y = torch.randn(SIDE, SIDE), torch.randn(SIDE, SIDE)
    return lambda: x.t() + y


@figure("exp_transposed_1e7")
def _exp_t():
    x = torch.randn(SIDE, SIDE)
    return lambda: torch.exp(x.t())


@figure("unique_1e6_int64")
def _unique():
    x = torch.randint(0, 100_000, (1_000_000,))
    return lambda: torch.unique(x)


@figure("unique_inverse_counts_1e6_int64")
def _unique_inv():
    x = torch.randint(0, 100_000, (1_000_000,))
    return lambda: torch.unique(x, return_inverse=True, return_counts=True)


@figure("index_add_1e6_rows")
def _index_add():
    x = torch.zeros(10_000, 32)
    idx = torch.randint(0, 10_000, (1_000_000,))
    src = torch.randn(1_000_000, 32)
    return lambda: x.index_add(0, idx, src)


@figure("sum_rows_4096")
def _sum_rows():
    m = torch.randn(4096, 4096)
    return lambda: m.sum(dim=1)


@figure("softmax_rows_4096")
def _softmax_rows():
    m = torch.randn(4096, 4096)
    return lambda: torch.softmax(m, dim=1)


@figure("mul_sum_backward_16", inference=False)
def _mul_sum_backward():
    a = torch.randn(16, requires_grad=True)
    b = torch.randn(16, requires_grad=True)
    return lambda: (a * b).sum().backward()


@figure("chain50_backward_1elem", inference=False)
def _chain50():
    x = torch.randn(1, requires_grad=True)

    def chain():
        y = x
        for i in range(50):
            k = i % 5
            if k == 0:
                y = y * 1.01
            elif k == 1:
                y = y + 0.1
            elif k == 2:
                y = torch.sin(y)
            elif k == 3:
                y = y * y
            else:
                y = torch.tanh(y)
        y.sum().backward()

    return chain


@figure("mlp_fwd_bwd_b128", inference=False)
def _mlp():
    def p(o, i):
        w = (torch.randn(o, i) / i**0.5).requires_grad_()
        return w, torch.zeros(o, requires_grad=True)

    w1, b1 = p(256, 784)
    w2, b2 = p(256, 256)
    w3, b3 = p(10, 256)
    xb = torch.randn(128, 784)
    yb = torch.randint(0, 10, (128,))
    params = [w1, b1, w2, b2, w3, b3]

    def mlp():
        h = F.relu(F.linear(xb, w1, b1))
        h = F.relu(F.linear(h, w2, b2))
        loss = F.cross_entropy(F.linear(h, w3, b3), yb)
        loss.backward()
        for t in params:
            t.grad = None

    return mlp


@figure("einsum_attention_16x4x64x32")
def _einsum_attention():
    q, k = torch.randn(16, 4, 64, 32), torch.randn(16, 4, 64, 32)
    return lambda: torch.einsum("bhqd,bhkd->bhqk", q, k)


@figure("solve_512_f64")
def _solve_512():
    a = torch.randn(512, 512, dtype=torch.float64)
    b = torch.randn(512, 512, dtype=torch.float64)
    return lambda: torch.linalg.solve(a, b)


@figure("eigh_256_f64")
def _eigh_256():
    a = torch.randn(256, 256, dtype=torch.float64)
    a = a + a.t()
    return lambda: torch.linalg.eigh(a)


@figure("svd_256_f64")
def _svd_256():
    a = torch.randn(256, 256, dtype=torch.float64)
    return lambda: torch.linalg.svd(a, full_matrices=False)


def _conv_layer(n, c, hw, out, k, input_grad):
    x = torch.randn(n, c, hw, hw).requires_grad_(input_grad)
    w = (torch.randn(out, c, k, k) / (c * k * k) ** 0.5).requires_grad_()
    b = torch.zeros(out, requires_grad=True)
    gy = torch.randn(n, out, hw, hw)

    def step():
        F.conv2d(x, w, b, padding=k // 2).backward(gy)
        for t in (x, w, b):
            t.grad = None

    return step


@figure("conv2d_fwd_bwd_64x1x28x28_to32", inference=False)
def _conv_first():
    return _conv_layer(64, 1, 28, 32, 3, False)


@figure("conv2d_fwd_bwd_64x32x14x14_to64", inference=False)
def _conv_second():
    return _conv_layer(64, 32, 14, 64, 3, True)


@figure("max_pool2d_fwd_bwd_64x32x28x28", inference=False)
def _max_pool():
    x = torch.randn(64, 32, 28, 28, requires_grad=True)
    gy = torch.randn(64, 32, 14, 14)

    def step():
        F.max_pool2d(x, 2).backward(gy)
        x.grad = None

    return step


@figure("add_1elem_overhead")
def _add_1elem():
    s1, s2 = torch.randn(1), torch.randn(1)
    return lambda: s1 + s2


@figure("layer_norm_fwd_bwd_1024x768", inference=False)
def _layer_norm():
    x = torch.randn(1024, 768, requires_grad=True)
    w = torch.randn(768, requires_grad=True)
    b = torch.randn(768, requires_grad=True)
    gy = torch.randn(1024, 768)

    def f():
        y = F.layer_norm(x, (768,), w, b)
        torch.autograd.grad(y, (x, w, b), gy)

    return f


@figure("gelu_fwd_bwd_1024x768", inference=False)
def _gelu():
    x = torch.randn(1024, 768, requires_grad=True)
    gy = torch.randn(1024, 768)
    return lambda: torch.autograd.grad(F.gelu(x), (x,), gy)


@figure("cross_entropy_fwd_bwd_1024x65", inference=False)
def _cross_entropy():
    x = torch.randn(1024, 65, requires_grad=True)
    t = torch.randint(0, 65, (1024,))
    return lambda: torch.autograd.grad(F.cross_entropy(x, t), (x,))


@figure("sdpa_causal_fwd_bwd_16x4x64x32", inference=False)
def _sdpa_causal():
    q, k, v = (torch.randn(16, 4, 64, 32, requires_grad=True) for _ in range(3))
    gy = torch.randn(16, 4, 64, 32)
    return lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), gy)


@figure("lstm_2x256_seq64_b32_fwd_bwd", inference=False)
def _lstm():
    lstm = torch.nn.LSTM(256, 256, num_layers=2)
    x = torch.randn(64, 32, 256, requires_grad=True)
    gy = torch.randn(64, 32, 256)
    inputs = (x, *lstm.parameters())
    return lambda: torch.autograd.grad(lstm(x)[0], inputs, gy)


@figure("module_mlp16_b1_forward")
def _module_mlp16():
    # Module-call overhead: three Linear(16, 16) with ReLU in a Sequential,
    # one sample, forward only (no graph).
    net = torch.nn.Sequential(
        torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16)
    )
    x = torch.randn(1, 16)
    return lambda: net(x)


@figure("embed_minilm_b32")
def _embed_minilm():
    # The embed example's pipeline in Hugging Face's stack: tokenizers
    # (tokenizer.json, truncation to 256, padding to the longest), BertModel
    # (transformers' default attention, SDPA), mean pooling over the
    # attention mask, L2 normalisation; the 32 sentences of
    # embed_sentences.txt, one batch.
    import os

    import transformers
    from tokenizers import Tokenizer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    # The tokenizer's thread pool as large as torch's (ours tokenizes in the
    # bench's pool); read when the pool starts, at the first batch.
    os.environ["RAYON_NUM_THREADS"] = str(torch.get_num_threads())
    here = os.path.dirname(os.path.abspath(__file__))
    model_dir = os.environ.get("MINILM_DIR") or os.path.join(here, "..", "models", "all-MiniLM-L6-v2")
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(max_length=256)
    tok.enable_padding()
    model = transformers.BertModel.from_pretrained(model_dir).eval()
    with open(os.path.join(here, "embed_sentences.txt")) as f:
        sentences = [line.rstrip("\n") for line in f if line.strip()]

    def embed():
        enc = tok.encode_batch(sentences)
        ids = torch.tensor([e.ids for e in enc])
        mask = torch.tensor([e.attention_mask for e in enc])
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).to(hidden.dtype)
        return F.normalize((hidden * m).sum(1) / m.sum(1).clamp(min=1e-9), p=2, dim=1)

    return embed


def serve():
    """One command per stdin line, one reply line: `list` (the figure names,
    tab-separated), `setup NAME` (build and warm up; `ok` or `unknown`),
    `block` (one untimed call, then one block of >= 0.1 s; its seconds per
    call), `quit`."""
    current = None
    for line in sys.stdin:
        words = line.split()
        if not words:
            reply = f"error: unknown command {line!r}"
        elif words[0] == "list":
            reply = "\t".join(FIGURES)
        elif words[0] == "setup" and len(words) == 2:
            current = None
            torch.manual_seed(0)
            entry = FIGURES.get(words[1])
            if entry is None:
                reply = "unknown"
            else:
                inference, setup = entry
                with mode(inference):
                    f = setup()
                    warm_up(f)
                current = (inference, f)
                reply = "ok"
        elif words[0] == "block":
            if current is None:
                reply = "error: block before setup"
            else:
                inference, f = current
                with mode(inference):
                    f()
                    reply = f"{block(f):.9e}"
        elif words[0] == "quit":
            break
        else:
            reply = f"error: unknown command {line!r}"
        print(reply, flush=True)


# Training steps of issue 16's examples: forward + loss + backward + AdamW.
def _train_step(model, x, y, amp=None):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
            out = model(x)
            loss = loss_fn(out.view(-1, out.shape[-1]), y.view(-1))
        loss.backward()
        opt.step()

    return step


@figure("train_step_mnist_mlp_b128", inference=False)
def _train_mlp():
    nn = torch.nn
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 10))
    return _train_step(model, torch.randn(128, 1, 28, 28), torch.randint(0, 10, (128,)))


@figure("train_step_mnist_cnn_b64", inference=False)
def _train_cnn():
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10),
    )
    return _train_step(model, torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))


class _Gpt(torch.nn.Module):
    """The gpt example's model (examples/gpt/model.rs), nanoGPT's layout."""

    def __init__(self, vocab, block, n_layer, n_head, n_embd):
        super().__init__()
        nn = torch.nn
        self.n_head = n_head
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList(
            nn.ModuleDict(dict(
                ln_1=nn.LayerNorm(n_embd), c_attn=nn.Linear(n_embd, 3 * n_embd), attn_proj=nn.Linear(n_embd, n_embd),
                ln_2=nn.LayerNorm(n_embd), c_fc=nn.Linear(n_embd, 4 * n_embd), gelu=nn.GELU(),
                mlp_proj=nn.Linear(4 * n_embd, n_embd),
            ))
            for _ in range(n_layer)
        )
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        b, t = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for blk in self.h:
            q, k, v = blk.c_attn(blk.ln_1(x)).split(x.shape[2], dim=2)
            heads = lambda z: z.view(b, t, self.n_head, -1).transpose(1, 2)
            y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
            x = x + blk.attn_proj(y.transpose(1, 2).contiguous().view(b, t, -1))
            x = x + blk.mlp_proj(blk.gelu(blk.c_fc(blk.ln_2(x))))
        return self.lm_head(self.ln_f(x))


@figure("train_step_gpt_4x128_ctx64_b16", inference=False)
def _train_gpt():
    model = _Gpt(65, 64, 4, 4, 128)
    return _train_step(model, torch.randint(0, 65, (16, 64)), torch.randint(0, 65, (16, 64)))


@figure("train_step_mnist_mlp_b128_amp_bf16", inference=False)
def _train_mlp_bf16():
    nn = torch.nn
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 10))
    return _train_step(model, torch.randn(128, 1, 28, 28), torch.randint(0, 10, (128,)), torch.bfloat16)


@figure("train_step_gpt_4x128_ctx64_b16_amp_bf16", inference=False)
def _train_gpt_bf16():
    model = _Gpt(65, 64, 4, 4, 128)
    return _train_step(model, torch.randint(0, 65, (16, 64)), torch.randint(0, 65, (16, 64)), torch.bfloat16)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--filter", default="")
    p.add_argument("--serve", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.serve:
        serve()
        return
    torch.manual_seed(0)
    for name, (inference, setup) in FIGURES.items():
        if any(f in name for f in args.filter.split(",")):
            with mode(inference):
                f = setup()
                print(f"{name}\t{args.threads}\t{time_it(f):.9e}", flush=True)


if __name__ == "__main__":
    main()
