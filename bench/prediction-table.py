#!/usr/bin/env python3
# prediction-table.py — the Markdown table of bench/prediction.sh's runs: predicted and measured time
# per mini-batch and its relative error, and per stage the predicted and measured busy time.
# Usage: bench/prediction-table.py DIR
import glob, json, os, sys

d = sys.argv[1] if len(sys.argv) > 1 else "bench/results/prediction"
load = {}
if os.path.exists(os.path.join(d, "loadavg.txt")):
    for line in open(os.path.join(d, "loadavg.txt")):
        f = line.split()
        load[f[0]] = f[1]
print("| model | preset | W | recompute | load avg. (1 min) | predicted ms/mb | measured ms/mb | error | busy per stage, predicted → measured (s) |")
print("|---|---|---|---|---|---|---|---|---|")
within = total = 0
for p in sorted(glob.glob(os.path.join(d, "*.json"))):
    j = json.load(open(p))
    tag = os.path.basename(p)[:-5]
    pr, me = j["predicted"], j["measured"]
    busy = ", ".join("%.3f → %.3f" % (a["busy"], b["busy"]) for a, b in zip(pr["stages"], me["stages"]))
    e = j["error"]["time_per_mini_batch"]
    total += 1
    within += abs(e) <= 0.10
    print("| %s | %s | %d | %s | %s | %.2f | %.2f | %+.1f %% | %s |" % (
        j["model"], j["preset"], j["workers"], "yes" if j.get("recompute") else "no", load.get(tag, "?"),
        1e3 * pr["time_per_mini_batch"], 1e3 * me["time_per_mini_batch"], 100 * e, busy))
print("\n%d of %d runs within 10 %%." % (within, total))
