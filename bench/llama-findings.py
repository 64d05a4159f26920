#!/usr/bin/env python3
# llama-findings.py — the table and the picture of bench/llama-findings.sh's runs (docs/findings.md,
# "A transformer with AdamW"): per preset, N and --recompute the final test loss over the seeds (mean
# ± s.d.), the mini-batches to an interval training loss of THRESHOLD (mean over the seeds that reach
# it), the largest stage's measured peak, and the seed papers' claims (a)-(c) restated for a language
# model — final test loss for accuracy, the mean interval training loss over the run for speed of
# convergence — with the rule that a difference counts only where it exceeds the seeds' spread (the
# two s.d.s added).  With
# --plot PNG it draws the N = 4 curves (interval training loss, mean over seeds) with gnuplot.
# Usage: bench/llama-findings.py [DIR] [--plot PNG]
import csv, glob, json, math, os, statistics, subprocess, sys

THRESHOLD = 3.0
PRESETS = ["gpipe", "1f1b", "zb-h1", "pipedream", "timeprest", "v-timeprest", "i-timeprest"]


def load(d):
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "*.json"))):
        tag = os.path.basename(path)[:-5]
        preset, n, rc, seed = tag.rsplit("-", 3)
        j = json.load(open(path))
        rows = [r for r in csv.DictReader(open(path[:-5] + ".csv")) if r["test"] == "0"]
        curve = [(int(r["mini_batch"]), float(r["loss"])) for r in rows]
        reach = next((mb for mb, l in curve if l <= THRESHOLD), None)
        peak = max(s["peak_bytes"] for s in j["measured"]["stages"])
        runs.setdefault((preset, int(n[1:]), rc == "rcyes"), []).append(
            {"seed": int(seed[1:]), "test": j["final_test_loss"], "reach": reach, "peak": peak, "curve": curve,
             "tps": j.get("tokens_per_second", 0)})
    return runs


def ms(xs):
    return (statistics.mean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0)


def table(runs):
    print("| preset | N | recompute | seeds | final test loss | mini-batches to %.1f | largest stage's peak MiB | tokens/s |" % THRESHOLD)
    print("|---|---|---|---|---|---|---|---|")
    for n in (4, 3):
        for rc in (False, True):
            for p in PRESETS:
                r = runs.get((p, n, rc))
                if not r:
                    continue
                m, s = ms([x["test"] for x in r])
                reached = [x["reach"] for x in r if x["reach"] is not None]
                reach = "%.0f (%d of %d)" % (statistics.mean(reached), len(reached), len(r)) if reached else "never"
                print("| %s | %d | %s | %d | %.4f ± %.4f | %s | %.1f | %.0f |" % (
                    p, n, "yes" if rc else "no", len(r), m, s, reach, max(x["peak"] for x in r) / 2**20,
                    statistics.mean(x["tps"] for x in r)))


def area(x):
    """The mean interval training loss over the run: lower is faster convergence (the threshold's
    mini-batches tie at the log's resolution of a tenth of the run)."""
    return statistics.mean(l for _, l in x["curve"])


def compare(xs, ys):
    """Mean of xs minus mean of ys, and whether it exceeds the seeds' spread (the two s.d.s added)."""
    (xm, xs_), (ym, ys_) = ms(xs), ms(ys)
    return xm - ym, abs(xm - ym) > xs_ + ys_, xs_ + ys_


def verdicts(runs):
    for n in (4, 3):
        for rc in (False, True):
            g, t, v, i, pd = (runs.get((p, n, rc)) for p in ("gpipe", "timeprest", "v-timeprest", "i-timeprest", "pipedream"))
            if not (g and t and v and i and pd):
                continue
            da, beyond_a, sa = compare([x["test"] for x in t], [x["test"] for x in g])
            a = "refuted" if beyond_a and da > 0 else "holds" if not beyond_a or da < 0 else "?"
            db, beyond_b, sb = compare([area(x) for x in v], [area(x) for x in pd])
            b = ("holds" if db > 0 else "refuted") if beyond_b else "undecided (within the seeds' spread)"
            dc, beyond_c, sc = compare([area(x) for x in i], [area(x) for x in v])
            ipeak, ppeak = max(x["peak"] for x in i), max(x["peak"] for x in pd)
            faster = "faster" if beyond_c and dc < 0 else "slower" if beyond_c else "not apart (within the spread)"
            c = "holds" if faster == "faster" and ipeak < ppeak else "refuted" if beyond_c or ipeak >= ppeak else "undecided"
            print("- N = %d, %s recomputation (%d, %d, %d, %d, %d seeds): (a) TiMePReSt's final test loss %+.4f from GPipe's "
                  "(spread %.4f): %s; (b) V-TiMePReSt's mean training loss %+.4f from PipeDream's (spread %.4f): %s; "
                  "(c) I-TiMePReSt's %+.4f from V-TiMePReSt's (spread %.4f): %s, peak %.1f MiB against PipeDream's "
                  "%.1f: %s" % (n, "with" if rc else "without", len(g), len(t), len(v), len(i), len(pd), da, sa, a, db,
                                sb, b, dc, sc, faster, ipeak / 2**20, ppeak / 2**20, c))


def plot(runs, png):
    data = []
    for p in PRESETS:
        r = runs.get((p, 4, False))
        if not r:
            continue
        mbs = [mb for mb, _ in r[0]["curve"]]
        data.append("# %s\n" % p + "\n".join("%d %.6f" % (mb, statistics.mean(x["curve"][k][1] for x in r))
                                             for k, mb in enumerate(mbs)) + "\n\n")
    script = ("set terminal pngcairo size 900,520\nset output '%s'\nset xlabel 'mini-batch'\n"
              "set ylabel 'training loss (nats a token, interval mean)'\nset key top right\n"
              "set title 'llama-tiny on the fortunes texts, W = 4, N = 4, AdamW, mean of 3 seeds'\nplot " % png +
              ", ".join("'-' using 1:2 with linespoints title '%s'" % p for p in PRESETS if runs.get((p, 4, False))) + "\n"
              + "".join(x.rstrip("\n") + "\ne\n" for x in data))
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--plot"]
    png = None
    if "--plot" in sys.argv:
        png = sys.argv[sys.argv.index("--plot") + 1]
        args.remove(png)
    runs = load(args[0] if args else "bench/results/llama-findings")
    table(runs)
    print()
    verdicts(runs)
    if png:
        plot(runs, png)
