#!/usr/bin/env python3
"""peer-torch-sim.py — timeprest's simulator against PyTorch's own pipeline simulator on one schedule.

The schedule: `timeprest schedule -s 1f1b -w W -n N -k 1 --format torch` (PyTorch's compute-only
CSV; W = 32, N = 4096: 262,144 operations).  PyTorch's side reads that CSV into its actions, adds
the sends and receives (`_add_send_recv`, which its simulator needs to see a message cross ranks)
and runs `_simulate_comms_compute`; timeprest's side is the whole `timeprest simulate -i FILE
--format json` process.  Both are timed in this one run, best of R, one after the other.

Makespans: PyTorch's simulator spends one step on every action, a send or a receive too, and lets
a result be used within the step that made it; timeprest's unit slots give a forward or backward
one slot and messages none.  The two makespans measure different things and both are printed; the
check is that PyTorch's simulation runs each rank's computations in the file's order.  The ratio
is PyTorch's time over timeprest's.

Usage: peer-torch-sim.py TIMEPREST [-w W] [-n N] [-r R] [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from torch.distributed.pipelining import schedules as S


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("timeprest")
    ap.add_argument("-w", type=int, default=32)
    ap.add_argument("-n", type=int, default=4096)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="N = 512, one repetition of PyTorch's side")
    a = ap.parse_args()
    if a.quick:
        a.n, pyreps = 512, 1
    else:
        pyreps = a.r
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.csv")
        with open(path, "w") as f:
            subprocess.run([a.timeprest, "schedule", "-s", "1f1b", "-w", str(a.w), "-n", str(a.n), "-k", "1",
                            "--format", "torch"], stdout=f, check=True)
        rows = [line.rstrip("\n").split(",") for line in open(path)]
        ops = sum(1 for r in rows for c in r if c)
        order = {r: [S._Action.from_str(c) for c in row if c] for r, row in enumerate(rows)}

        best_tp, report = None, None
        for _ in range(a.r):
            t0 = time.perf_counter()
            out = subprocess.run([a.timeprest, "simulate", "-i", path, "--format", "json"], check=True,
                                 capture_output=True, text=True).stdout
            t = time.perf_counter() - t0
            best_tp = t if best_tp is None else min(best_tp, t)
            report = json.loads(out)
        best_py, sched = None, None
        for _ in range(pyreps):
            t0 = time.perf_counter()
            full = S._add_send_recv({r: list(v) for r, v in order.items()}, lambda s: s, a.w)
            sched = S._simulate_comms_compute(full, lambda s: s, a.w)
            t = time.perf_counter() - t0
            best_py = t if best_py is None else min(best_py, t)

    comm = {S.SEND_F, S.RECV_F, S.SEND_B, S.RECV_B}
    same_order = all([x for x in sched[r] if x is not None and x.computation_type not in comm] == order[r]
                     for r in order)
    py_steps = max(len(v) for v in sched.values())
    tp_span = report["makespan"]
    print(f"schedule: 1f1b W={a.w} N={a.n} K=1, {ops} operations (PyTorch's CSV from timeprest)")
    print(f"timeprest simulate -i (whole process, best of {a.r}): {best_tp:.3f} s, makespan {tp_span:g} slots")
    print(f"PyTorch _add_send_recv + _simulate_comms_compute (best of {pyreps}): {best_py:.3f} s, "
          f"makespan {py_steps} steps (a step per send and receive too)")
    target = "(the target, >= 100x, is at N = 4096: run without --quick)" if a.quick else "target >= 100x"
    print(f"PyTorch    {best_py / best_tp:9.0f}x  over PyTorch's simulator (N={a.n})  {target}  "
          f"{'same compute order' if same_order else 'COMPUTE ORDER DIFFERS'}")
    return 0 if same_order else 1


if __name__ == "__main__":
    sys.exit(main())
