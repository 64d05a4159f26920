#!/usr/bin/env python3
# convergence-table.py — turns the JSON reports and training logs that bench/convergence.sh writes
# into the Markdown table of bench/RESULTS.md (final test accuracy, epochs and wall time to a target
# accuracy, measured peak memory per stage, steady v, samples/s) and a small summary CSV.
# Usage: bench/convergence-table.py [DIR [TARGET [SUMMARY.csv]]]
import csv, glob, json, os, sys

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


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "bench/results/convergence"
    target = float(sys.argv[2]) if len(sys.argv) > 2 else 0.85
    summary = sys.argv[3] if len(sys.argv) > 3 else None
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
