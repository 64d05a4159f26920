#!/usr/bin/env python3
# peer-torch-llama.py — the PyTorch peer of `timeprest train -m llama-tiny`: the same network (byte
# vocabulary 256, context 128, width 256, 4 pre-norm blocks of 8 heads with 2 key/value heads,
# rotary positions with halves rotated, SwiGLU 704, RMSNorm eps 1e-5, an untied head; 2,951,424
# parameters, checked), AdamW (PyTorch's defaults), batch B sequences of random bytes, on
# --threads T CPU threads (default 1), float32, eager mode (the attention as F.scaled_dot_product_attention,
# PyTorch's fused kernel, where --sdpa is given; else as explicit products, as timeprest computes it).
# Times K mini-batches after two warm-up ones and prints one JSON object: tokens_per_second (wall),
# cpu_tokens_per_second (process CPU time).  Run by bench/peer-llama.sh; not part of `make check`.
import argparse, json, os, sys, time


def threads_asked(argv):
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
    return "1"


for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[v] = threads_asked(sys.argv)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

V, S, D, L, H, G, FF = 256, 128, 256, 4, 8, 2, 704
HD = D // H


def rope(x, cos, sin):  # x [b, h, s, hd]: element i and i + hd/2 turn together
    a, b = x[..., : HD // 2], x[..., HD // 2:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Block(nn.Module):
    def __init__(self, sdpa):
        super().__init__()
        self.sdpa = sdpa
        self.n1, self.n2 = nn.RMSNorm(D, eps=1e-5), nn.RMSNorm(D, eps=1e-5)
        self.q = nn.Linear(D, H * HD, bias=False)
        self.kv = nn.Linear(D, 2 * G * HD, bias=False)
        self.o = nn.Linear(H * HD, D, bias=False)
        self.gu = nn.Linear(D, 2 * FF, bias=False)
        self.down = nn.Linear(FF, D, bias=False)

    def forward(self, x, cos, sin, mask):
        b = x.shape[0]
        h = self.n1(x)
        q = self.q(h).view(b, S, H, HD).transpose(1, 2)
        k, v = self.kv(h).view(b, S, 2, G, HD).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k, v = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            p = torch.softmax((q @ k.transpose(-1, -2)) / HD ** 0.5 + mask, dim=-1)
            a = p @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, S, D))
        g, u = self.gu(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class LlamaTiny(nn.Module):
    def __init__(self, sdpa):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block(sdpa) for _ in range(L))
        self.norm = nn.RMSNorm(D, eps=1e-5)
        self.head = nn.Linear(D, V, bias=False)
        ang = torch.arange(S)[:, None] * 10000.0 ** (-2 * torch.arange(HD // 2) / HD)
        self.register_buffer("cos", ang.cos())
        self.register_buffer("sin", ang.sin())
        self.register_buffer("mask", torch.full((S, S), float("-inf")).triu(1))

    def forward(self, t):
        x = self.emb(t)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin, self.mask)
        return self.head(self.norm(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--sdpa", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    m = LlamaTiny(a.sdpa)
    n = sum(p.numel() for p in m.parameters())
    assert n == 2951424, n
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    data = torch.randint(0, V, (a.batch * (a.k + 2), S + 1))

    def step(i):
        w = data[i * a.batch:(i + 1) * a.batch]
        loss = F.cross_entropy(m(w[:, :-1]).reshape(-1, V), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(2):
        step(i)
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(a.k):
        step(2 + i)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    tok = a.k * a.batch * S
    print(json.dumps({"tokens_per_second": tok / wall, "cpu_tokens_per_second": tok / cpu, "threads": a.threads,
                      "batch": a.batch, "sdpa": a.sdpa, "torch": torch.__version__}))


main()
