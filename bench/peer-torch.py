#!/usr/bin/env python3
# peer-torch.py — the peer reference for `timeprest train -w 1`: the same network (cnn, mlp-deep,
# resnet-fmnist, or torchvision's ResNet-50 v1.5 as resnet50-cifar100 — layer for layer as in
# models/*.model), the same Fashion-MNIST gzip IDX files (or --data synthetic: random images of the
# model's input shape), batch, SGD with momentum and weight decay, trained by PyTorch on --threads T
# CPU threads (default 1).  Times K mini-batches after a
# warm-up (the mini-batch gather from the training set included, as in `train`) and prints one JSON
# object: samples_per_second (wall), cpu_samples_per_second (process CPU time), versions.
# Run by bench/peer.sh and bench/speedup.sh; not part of `make check`.
import argparse, gzip, json, os, platform, struct, sys, time


def threads_asked(argv):
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


# the thread pools are sized when torch starts: the count goes in before the import
for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[v] = threads_asked(sys.argv)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    t = torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8)
    return t.reshape(dims)


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (v1.5: the stride on the 3x3 convolution), as models/*.model's bottleneck."""

    def __init__(self, cin, mid, out, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, out, 1, bias=False), nn.BatchNorm2d(out))
        self.short = (nn.Sequential(nn.Conv2d(cin, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))
                      if stride != 1 or cin != out else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.short(x))


def resnet(stem, blocks, classes):
    layers, cin = list(stem), stem[0].out_channels
    for mid, out, stride in blocks:
        layers.append(Bottleneck(cin, mid, out, stride))
        cin = out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


# input shape and classes of each model
SHAPES = {"cnn": ((1, 28, 28), 10), "mlp-deep": ((1, 28, 28), 10), "resnet-fmnist": ((1, 28, 28), 10),
          "resnet50-cifar100": ((3, 32, 32), 100)}


def build(model):
    if model == "resnet50-cifar100":  # torchvision.models.resnet50(num_classes=100): 23,712,932 parameters
        blocks = []
        for mid, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            blocks += [(mid, 4 * mid, stride)] + [(mid, 4 * mid, 1)] * (n - 1)
        stem = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                nn.MaxPool2d(3, stride=2, padding=1)]
        net = resnet(stem, blocks, 100)
        assert sum(p.numel() for p in net.parameters()) == 23712932
        return net
    if model == "resnet-fmnist":
        stem = [nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True)]
        return resnet(stem, [(16, 64, 1), (32, 128, 2), (32, 128, 1), (64, 256, 2)], 10)
    if model == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    if model == "mlp-deep":
        layers = [nn.Flatten(), nn.Linear(784, 1024), nn.ReLU()]
        for _ in range(5):
            layers += [nn.Linear(1024, 1024), nn.ReLU()]
        layers.append(nn.Linear(1024, 10))
        return nn.Sequential(*layers)
    sys.exit("peer-torch.py: --model: unknown model '%s' (%s)" % (model, ", ".join(SHAPES)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("-k", type=int, default=50, help="timed mini-batches")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    net = build(a.model)
    shape, classes = SHAPES[a.model]
    if a.data == "synthetic":
        x, y = torch.rand(4 * a.batch, *shape), torch.randint(0, classes, (4 * a.batch,))
    else:
        x = read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz")).float().div_(255.0)
        x = x.reshape(-1, 1, 28, 28).contiguous()
        y = read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz")).long()
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    perm = torch.randperm(x.shape[0])
    nb = x.shape[0] // a.batch

    def step(i):
        idx = perm[(i % nb) * a.batch:(i % nb + 1) * a.batch]
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for i in range(a.warmup):
        step(i)
    w0, c0 = time.perf_counter(), time.process_time()
    for i in range(a.k):
        loss = step(a.warmup + i)
    loss = loss.item()
    w1, c1 = time.perf_counter(), time.process_time()
    n = a.k * a.batch
    print(json.dumps({
        "framework": "pytorch", "torch": torch.__version__, "python": platform.python_version(),
        "threads": torch.get_num_threads(), "model": a.model, "batch": a.batch, "mini_batches": a.k,
        "samples_per_second": n / (w1 - w0), "cpu_samples_per_second": n / (c1 - c0),
        "final_loss": loss,
        "parameters": sum(p.numel() for p in net.parameters())}))


if __name__ == "__main__":
    main()
