#!/usr/bin/env python3
"""torch-schedules.py — PyTorch's pipeline schedules against timeprest's reader and writer.

For W in {2, 4, 8} and N in {4, 8, 16}:
  import: every schedule class of torch.distributed.pipelining is built without a process group (its
          order computed as its constructor does), written as PyTorch's compute-only CSV (its own
          _Action repr, empty cells idle), checked by PyTorch's _validate_schedule, then read by
          `timeprest schedule --input` (our validator) and simulated with `timeprest simulate`;
          the two verdicts must agree, except where we refuse on purpose (a forward the rank before
          never ran, PyTorch's own Schedule1F1B defect on the last rank, which its validator does not
          see).  The interleaved classes run with one and with two stages per rank; read back,
          ScheduleInterleaved1F1B (two stages per rank) and ScheduleZBVZeroBubble must be our
          interleaved-1f1b and zb-v, operation for operation and rank order for rank order.
  export: timeprest's gpipe, 1f1b, zb-h1, zb-h2 (N >= W), interleaved-1f1b (N a multiple of W) and
          zb-v written with --format torch are parsed by PyTorch's _Action.from_str and accepted by
          its _validate_schedule (2W stages for the last two).
Run by bench/torch-schedules.sh in a virtual environment with torch; exit 1 on any disagreement."""
import csv
import os
import subprocess
import sys
import tempfile

import torch.distributed.pipelining.schedules as S

TP = os.environ.get("TP_BIN", "./timeprest")


def order_of(cls, W, N, local=1):
    """The pipeline order a schedule class computes for W ranks and N micro-batches (`local` stages per
    rank for the looped classes, two for the V-shaped ones), without a process group."""
    o = cls.__new__(cls)
    o._n_microbatches = N
    if issubclass(cls, S.PipelineScheduleSingle):
        o._num_stages = W
        return o._get_pipeline_order()
    v = cls in (S.ScheduleZBVZeroBubble, S.ScheduleDualPipeV)
    local = 2 if v else local
    o.pp_group_size = W
    o.n_local_stages = local
    o._num_stages = o.num_stages = W * local
    o.number_of_rounds = max(1, N // W)
    o.microbatches_per_round = N // o.number_of_rounds
    o.stage_index_to_group_rank = S.generate_stage_to_rank_mapping(W, W * local, style="v" if v else "loop")
    order = {r: o._calculate_single_rank_operations(r) for r in range(W)}
    o.pipeline_order = order
    if hasattr(o, "_add_bubbles_to_actions") and not v:
        order = o._add_bubbles_to_actions(W * local)
    return order


def torch_verdict(order, W, stages, N):
    try:
        S._validate_schedule(order, W, stages, N)
        return "ok"
    except Exception as e:  # its validator raises AssertionError with the whole schedule
        return "refused: " + str(e).splitlines()[0]


def ours(*args):
    r = subprocess.run([TP, *args], capture_output=True, text=True)
    return r.returncode, (r.stderr.strip().splitlines() or [""])[0]


def main():
    bad = 0
    classes = [S.ScheduleGPipe, S.Schedule1F1B, S.ScheduleInterleaved1F1B, S.ScheduleInterleavedZeroBubble,
               S.ScheduleZBVZeroBubble, S.ScheduleDualPipeV]
    with tempfile.TemporaryDirectory() as d:
        for W in (2, 4, 8):
            for N in (4, 8, 16):
                looped = (S.ScheduleInterleaved1F1B, S.ScheduleInterleavedZeroBubble)
                for cls, local in [(c, 1) for c in classes] + [(c, 2) for c in looped]:
                    name = cls.__name__ + (f" ({local} stages per rank)" if local > 1 else "")
                    try:
                        order = order_of(cls, W, N, local)
                    except Exception as e:
                        print(f"import W={W} N={N} {name}: PyTorch does not build it: {str(e).splitlines()[0]}")
                        continue
                    path = os.path.join(d, f"{cls.__name__}-{local}-{W}-{N}.csv")
                    with open(path, "w", newline="") as f:
                        w = csv.writer(f)
                        for r in range(W):
                            w.writerow(["" if a is None else repr(a) for a in order[r]])
                    stages = max(a.stage_index for acts in order.values() for a in acts
                                 if a is not None and a.sub_actions is None) + 1
                    tv = torch_verdict(order, W, stages, N)
                    rc, line = ours("schedule", "-i", path, "-f", "csv", "-o", os.path.join(d, "x.csv"))
                    if rc == 0:
                        src, sline = ours("simulate", "-i", path)
                        rc = src or rc
                        line = sline if src else line
                    on_purpose = "runs no forward of micro-batch" in line
                    agree = (rc == 0) == (tv == "ok") or (rc == 2 and on_purpose)
                    # PyTorch's interleaved 1F1B (two stages per rank) and ZB-V are our presets, op for op
                    twin = {("ScheduleInterleaved1F1B", 2): "interleaved-1f1b", ("ScheduleZBVZeroBubble", 2): "zb-v"}
                    extra = ""
                    preset = twin.get((cls.__name__, 2 if cls is S.ScheduleZBVZeroBubble else local))
                    if rc == 0 and preset and (preset != "interleaved-1f1b" or N % W == 0):
                        with open(os.path.join(d, "x.csv")) as f:
                            read = f.read()
                        _, gen = ours("schedule", "-s", preset, "-w", str(W), "-n", str(N), "-k", "1", "-f", "csv",
                                      "-o", os.path.join(d, "y.csv"))
                        with open(os.path.join(d, "y.csv")) as f:
                            same = f.read() == read
                        agree = agree and same
                        extra = f"; the same schedule as our {preset}" if same else f"; NOT our {preset}"
                    bad += not agree
                    print(f"import W={W} N={N} {name}: torch {tv}; timeprest "
                          f"{'ok (read, validated, simulated)' + extra if rc == 0 else 'refused: ' + line}"
                          f"{'' if agree else '  <-- DISAGREE'}")
                for preset in ("gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b", "zb-v"):
                    chunks = 2 if preset in ("interleaved-1f1b", "zb-v") else 1
                    if N < W or (preset == "interleaved-1f1b" and N % W):
                        continue
                    path = os.path.join(d, f"{preset}-{W}-{N}.csv")
                    rc, line = ours("schedule", "-s", preset, "-w", str(W), "-n", str(N), "-k", "1",
                                    "--format", "torch", "-o", path)
                    if rc != 0:
                        print(f"export W={W} N={N} {preset}: timeprest failed: {line}  <-- FAIL")
                        bad += 1
                        continue
                    with open(path, newline="") as f:
                        order = {r: [S._Action.from_str(c) for c in row] for r, row in enumerate(csv.reader(f))}
                    tv = torch_verdict(order, W, W * chunks, N)
                    bad += tv != "ok"
                    print(f"export W={W} N={N} {preset}: torch {tv}{'' if tv == 'ok' else '  <-- FAIL'}")
    print(f"{bad} disagreement(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
