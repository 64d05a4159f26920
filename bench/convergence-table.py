#!/usr/bin/env python3
# convergence-table.py — turns the JSON reports and training logs that bench/convergence.sh writes
# into the Markdown table of bench/RESULTS.md (final test accuracy, epochs and wall time to a target
# accuracy, measured peak memory per stage, steady v, samples/s) and a small summary CSV.
# With --compact: one row per preset and model, the final test accuracy (v) per (W, N), for docs/findings.md.
# Usage: bench/convergence-table.py [--compact] [DIR [TARGET [SUMMARY.csv]]]
import csv, glob, json, os, re, sys

PRESETS = ["gpipe", "1f1b", "pipedream", "pipedream-2bw", "timeprest", "v-timeprest", "i-timeprest"]


def to_target(path_csv, acc, target):
    """(epoch, seconds since training started) of the first epoch whose test accuracy >= target."""
    for e, a in enumerate(acc, 1):
        if a >= target:
            t = None
            if os.path.exists(path_csv):
                with open(path_csv) as f:
                    rows = [r for r in csv.DictReader(f) if r["test"] == "1"]
                if len(rows) >= e:
                    t = float(rows[e - 1]["time"])
            return e, t
    return None, None


def kib(b):
    return "%.0f K" % (b / 1024) if b < 1024 * 1024 else "%.1f M" % (b / 1048576)


def failures(d):
    """{(model, preset, W, N): what happened} of the runs bench/convergence.sh noted as failed."""
    out = {}
    for name in ("refused.txt", "failed.txt"):
        if not os.path.exists(os.path.join(d, name)):
            continue
        for line in open(os.path.join(d, name)):
            m = re.match(r"(\w+)-(.+)-w(\d+)-n(\d+)-e\d+(-slots)? (refused|failed): (.*)", line)
            if m:
                preset = m.group(2) + (" (order on slots)" if m.group(5) else "")
                out[(m.group(1), preset, int(m.group(3)), int(m.group(4)))] = \
                    "NaN loss" if "NaN" in m.group(7) else "refused"
    return out


def compact(runs, failed):
    cols = sorted({(j["model"], j["workers"], j["micro_batches"]) for j, _, _ in runs if j["workers"] > 1})
    for model in ("mlp", "cnn"):
        mc = [c for c in cols if c[0] == model]
        if not mc:
            continue
        print("| `%s`, %d epochs | %s |" % (model, max(j["epochs"] for j, _, _ in runs if j["model"] == model and j["workers"] > 1),
                                         " | ".join("W=%d, N=%d" % c[1:] for c in mc)))
        print("|---|%s" % ("---|" * len(mc)))
        seen = []
        for j, _, _ in runs:
            if j["model"] == model and j["preset"] not in seen and j["workers"] > 1:
                seen.append(j["preset"])
        for (m, p, w, n) in failed:
            if m == model and p not in seen:
                seen.append(p)
        seen.sort(key=lambda p: PRESETS.index(p.split()[0]) + 0.5 * (" " in p))
        for p in seen:
            cells = []
            for c in mc:
                r = [j for j, _, _ in runs if (j["model"], j["workers"], j["micro_batches"]) == c and j["preset"] == p]
                cells.append("%.4f (v=%s)" % (r[0]["final_test_accuracy"], r[0]["v_steady"]) if r
                             else failed.get((model, p) + c[1:], "—"))
            print("| %s | %s |" % (p, " | ".join(cells)))
        print()


def main():
    args = [a for a in sys.argv[1:] if a != "--compact"]
    d = args[0] if args else "bench/results/convergence"
    target = float(args[1]) if len(args) > 1 else 0.85
    summary = args[2] if len(args) > 2 else None
    runs = []
    for p in glob.glob(os.path.join(d, "*.json")):
        with open(p) as f:
            j = json.load(f)
        e, t = to_target(p[:-5] + ".csv", j["test_accuracy"], target)
        if p.endswith("-slots.json"):  # bench/convergence.sh's runs with --order-from slots
            j["preset"] += " (order on slots)"
        runs.append((j, e, t))
    runs.sort(key=lambda r: (r[0]["model"] != "mlp", r[0]["workers"], r[0]["micro_batches"],
                             PRESETS.index(r[0]["preset"].split()[0]) + 0.5 * (" " in r[0]["preset"])))
    if "--compact" in sys.argv:
        compact(runs, failures(d))
        return
    print("| model | W | N | preset | v | epochs | final test acc. | best | epochs to %.0f %% | s to %.0f %% "
          "| samples/s | peak bytes per stage (measured) |" % (100 * target, 100 * target))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    out = []
    for j, e, t in runs:
        peaks = [s["peak_bytes"] for s in j["measured"]["stages"]]
        print("| %s | %d | %d | %s | %s | %d | %.4f | %.4f | %s | %s | %.0f | %s |" % (
            j["model"], j["workers"], j["micro_batches"], j["preset"], j["v_steady"], j["epochs"],
            j["final_test_accuracy"], max(j["test_accuracy"]), e if e else "—",
            "%.1f" % t if t is not None else "—", j["samples_per_second"], " / ".join(kib(b) for b in peaks)))
        out.append([j["model"], j["workers"], j["micro_batches"], j["preset"], j["v_steady"], j["epochs"],
                    j["final_test_accuracy"], max(j["test_accuracy"]), e or "", "%.2f" % t if t is not None else "",
                    "%.1f" % j["samples_per_second"], " ".join(str(b) for b in peaks),
                    " ".join("%.4f" % a for a in j["test_accuracy"])])
    if summary:
        with open(summary, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "workers", "micro_batches", "preset", "v_steady", "epochs", "final_test_accuracy",
                        "best_test_accuracy", "epochs_to_target", "seconds_to_target", "samples_per_second",
                        "peak_bytes_per_stage", "test_accuracy_per_epoch"])
            w.writerows(out)


if __name__ == "__main__":
    main()
