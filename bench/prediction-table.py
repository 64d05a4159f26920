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
print("| model | preset | W | load avg. (1 min) | predicted ms/mb | measured ms/mb | error | busy per stage, predicted → measured (s) |")
print("|---|---|---|---|---|---|---|---|")
for p in sorted(glob.glob(os.path.join(d, "*.json")), key=lambda p: (p.split("/")[-1].split("-w")[0], p[-6])):
    j = json.load(open(p))
    tag = os.path.basename(p)[:-5]
    pr, me = j["predicted"], j["measured"]
    busy = ", ".join("%.3f → %.3f" % (a["busy"], b["busy"]) for a, b in zip(pr["stages"], me["stages"]))
    print("| %s | %s | %d | %s | %.2f | %.2f | %+.1f %% | %s |" % (
        j["model"], j["preset"], j["workers"], load.get(tag, "?"), 1e3 * pr["time_per_mini_batch"],
        1e3 * me["time_per_mini_batch"], 100 * j["error"]["time_per_mini_batch"], busy))
