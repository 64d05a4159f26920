#!/usr/bin/env python3
"""zb-dp.py — the automatic zero-bubble orders with data-parallel replicas: on random cost files
(W 2-4, N 2-8, stages of unequal times and gradient bytes, links with and without latency, the stages'
all-reduces on a link each or on one shared link, with and without --overlap-allreduce), the time per
mini-batch of zb-1p or zb-2p as `simulate --data-parallel D` builds it (the heuristic's variant chosen
on a simulation with the all-reduces) against the heuristic's own order (the same costs without
replicas: `schedule`, then `simulate --input` with the replicas).  Both from one binary.
Usage: bench/zb-dp.py [TIMEPREST [TRIALS [SEED [K]]]]   (defaults ./timeprest 300 3 8; where K > 3W+2 the
choice is made on 3W+2 mini-batches)"""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

BIN = sys.argv[1] if len(sys.argv) > 1 else "./timeprest"
TRIALS = int(sys.argv[2]) if len(sys.argv) > 2 else 300
random.seed(int(sys.argv[3]) if len(sys.argv) > 3 else 3)
K = sys.argv[4] if len(sys.argv) > 4 else "8"
D = 4


def per_minibatch(args):
    out = subprocess.run([BIN, "simulate"] + args + ["--format", "json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["time_per_mini_batch"]


def cost_text(W):
    f = [round(random.uniform(0.5, 1.5), 2) for _ in range(W)]
    b = [round(2 * x * random.uniform(0.8, 1.3), 2) for x in f]
    wb = [random.choice([1e8, 5e8, 1e9, 2e9]) for _ in range(W)]
    link = random.choice(["", "link = " + ", ".join("1" for _ in range(W))])
    return ("[cost]\nsamples_per_micro_batch = 1\n[stages]\nforward = %s\nbackward = %s\nweight_bytes = %s\n"
            "[links]\nlatency = %g\n[data_parallel]\nlatency = 0\nbandwidth = 1e9\n%s\n"
            % (", ".join(map(str, f)), ", ".join(map(str, b)), ", ".join("%g" % x for x in wb),
               random.choice([0, 0.05, 0.2]), link))


def main():
    tmp = tempfile.mkdtemp(prefix="zb-dp-")
    cost, order = os.path.join(tmp, "r.cost"), os.path.join(tmp, "own.csv")
    ratios = []
    for _ in range(TRIALS):
        W, N = random.choice([2, 3, 4]), random.choice([2, 3, 4, 6, 8])
        with open(cost, "w") as fh:
            fh.write(cost_text(W))
        preset = random.choice(["zb-1p", "zb-2p"])
        over = random.choice([[], ["--overlap-allreduce"]])
        shape = ["-w", str(W), "-n", str(N), "-k", K]
        subprocess.run([BIN, "schedule", "-s", preset, "--cost", cost] + shape + ["-f", "csv", "-o", order], check=True)
        own = per_minibatch(["-i", order, "--cost", cost, "--data-parallel", str(D)] + over)
        chosen = per_minibatch(["-s", preset, "--cost", cost, "--data-parallel", str(D)] + shape + over)
        ratios.append(chosen / own)
    faster = [r for r in ratios if r < 1]
    print("%d cost files, D = %d, K = %s: %d orders faster; chosen / own time per mini-batch: min %.4f, max %.6f%s"
          % (TRIALS, D, K, len(faster), min(ratios), max(ratios),
             ", mean of the faster %.4f" % statistics.mean(faster) if faster else ""))


main()
