#!/usr/bin/env python3
# convergence-table.py — turns the JSON reports and training logs that bench/convergence.sh writes
# into the Markdown table of bench/RESULTS.md (final test accuracy, epochs and wall time to a target
# accuracy, measured peak memory per stage, steady v, samples/s) and a small summary CSV.
# With --compact: one row per preset and model, the final test accuracy (v) per (W, N), for docs/findings.md.
# With --claims: the runs of bench/claims.sh — one row per run (order, recompute, lr, momentum, preset;
# epochs and seconds to 85 % and 88 %, final accuracy, measured peak bytes per stage) and, per seed
# claim, at how many settings it holds; where the directory holds several seeds of the grid (tags
# ending -seedS, bench/claims.sh SEED=S), each claim on the seeds' mean at every setting all of them
# ran, and at how many of those the margin exceeds the seeds' standard deviation.
# Usage: bench/convergence-table.py [--compact | --claims] [DIR [TARGET [SUMMARY.csv]]]
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


CLAIM_TAG = re.compile(r"(?P<model>mlp-deep|mlp|cnn)-(?P<preset>[a-z0-9-]+?)(?:-s(?P<sig>[a-z0-9_.]+))?-w(?P<w>\d+)"
                       r"-n(?P<n>\d+)-e(?P<e>\d+)(?:-(?P<order>slots|costs))?-rc(?P<rc>[01])-lr(?P<lr>[0-9.]+)"
                       r"-m(?P<mom>[0-9.]+)(?:-seed(?P<seed>\d+))?")


def claims(d):
    """The table of bench/claims.sh's runs, then each seed claim checked at every setting."""
    rows = []
    for path in sorted(glob.glob(os.path.join(d, "*.json"))):
        m = CLAIM_TAG.fullmatch(os.path.basename(path)[:-5])
        if not m:
            continue
        with open(path) as f:
            j = json.load(f)
        t85 = to_target(path[:-5] + ".csv", j["test_accuracy"], 0.85)
        t88 = to_target(path[:-5] + ".csv", j["test_accuracy"], 0.88)
        rows.append(dict(m.groupdict(), j=j, t85=t85, t88=t88, failed=None))
    for name in ("refused.txt", "failed.txt"):
        for line in open(os.path.join(d, name)) if os.path.exists(os.path.join(d, name)) else []:
            tag, _, why = line.partition(" ")
            m = CLAIM_TAG.fullmatch(tag)
            if m:
                rows.append(dict(m.groupdict(), j=None, t85=(None, None), t88=(None, None),
                                 failed="NaN loss" if "NaN" in why else "refused"))
    for r in rows:
        r["seed"] = int(r["seed"] or 1)
        r["name"] = r["preset"] + (" s=" + r["sig"].replace("_", ":") if r["sig"] else "")
        r["setting"] = (r["model"], r["n"], r["e"], r["rc"], r["lr"], r["mom"])
    seeds = sorted({r["seed"] for r in rows})
    for r in rows:
        r["label"] = r["name"] + (" (seed %d)" % r["seed"] if len(seeds) > 1 else "")
    rows.sort(key=lambda r: (r["setting"], r["order"] or "", PRESETS.index(r["preset"]), r["name"], r["seed"]))
    fmt = lambda x, f: f % x if x is not None else "—"
    print("| model | N | epochs | order | recompute | lr | momentum | preset | v | final test acc. | epochs to 85 % "
          "| s to 85 % | epochs to 88 % | s to 88 % | peak bytes per stage (measured) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        j = r["j"]
        if j is None:
            print("| %s | %s | %s | %s | %s | %s | %s | %s | | %s | | | | | |" % (
                r["model"], r["n"], r["e"], r["order"] or "—", r["rc"], r["lr"], r["mom"], r["label"], r["failed"]))
            continue
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.4f | %s | %s | %s | %s | %s |" % (
            r["model"], r["n"], r["e"], r["order"] or "—", r["rc"], r["lr"], r["mom"], r["label"], j["v_steady"],
            j["final_test_accuracy"], fmt(r["t85"][0], "%d"), fmt(r["t85"][1], "%.0f"), fmt(r["t88"][0], "%d"),
            fmt(r["t88"][1], "%.0f"), " / ".join(kib(s["peak_bytes"]) for s in j["measured"]["stages"])))
    print()
    verdicts(rows, seeds)


def claim_values(rows):
    """Per claim, per (setting, order[, function]) and seed: the claim's margin at that seed (it holds
    where the margin is positive), or None where a run it needs is missing."""
    def get(setting, order, name, seed):
        for r in rows:
            if r["setting"] == setting and r["name"] == name and r["seed"] == seed and \
                    (r["order"] == order or r["preset"] == "gpipe"):
                return r
        if name == "gpipe":  # GPipe ends with the same weights with and without --recompute (bit for bit)
            other = setting[:3] + ("1" if setting[3] == "0" else "0",) + setting[4:]
            return next((r for r in rows if r["setting"] == other and r["name"] == name and r["seed"] == seed), None)
        return None
    acc = lambda r: r["j"]["final_test_accuracy"] if r and r["j"] else None
    # epochs to 85 %; never reached (or the run failed): one epoch past the run's end
    ep = lambda r: (r["t85"][0] or int(r["e"]) + 1) if r and r["j"] else int(r["e"]) + 1
    peak = lambda r: max(s["peak_bytes"] for s in r["j"]["measured"]["stages"])
    out = {"a": {}, "b": {}, "c": {}}
    seeds = sorted({r["seed"] for r in rows})
    for setting, order in sorted({(r["setting"], r["order"]) for r in rows if r["order"]}):
        sigs = sorted({r["name"] for r in rows if r["setting"] == setting and r["order"] == order
                       and r["preset"] == "i-timeprest"})
        for seed in seeds:
            g, t = get(setting, order, "gpipe", seed), get(setting, order, "timeprest", seed)
            if acc(g) is not None and t:  # (a) within 1 point of GPipe's final accuracy (a NaN run: lower)
                out["a"].setdefault((setting, order), {})[seed] = acc(t) - acc(g) + 0.01 if acc(t) is not None else -1
            v, pd = get(setting, order, "v-timeprest", seed), get(setting, order, "pipedream", seed)
            if v and pd:  # (b) more epochs to 85 % than stashing (where either reaches it)
                reached = min(ep(v), ep(pd)) <= int(setting[2])
                out["b"].setdefault((setting, order), {})[seed] = ep(v) - ep(pd) if reached else None
            for name in sigs:  # (c) fewer epochs than V-TiMePReSt, less memory than PipeDream
                i = get(setting, order, name, seed)
                if i and i["j"] and v and pd and pd["j"]:
                    reached = min(ep(i), ep(v)) <= int(setting[2])
                    out["c"].setdefault((setting, order, name), {})[seed] = \
                        (ep(v) - ep(i), peak(pd) - peak(i)) if reached else None
    return out


def mean_sd(xs):
    m = sum(xs) / len(xs)
    return m, (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 if len(xs) > 1 else 0.0


TEXTS = {"a": "TiMePReSt's final test accuracy within 1 point of GPipe's",
         "b": "V-TiMePReSt needs more epochs to 85 % than PipeDream (weight stashing)",
         "c": "I-TiMePReSt reaches 85 % in fewer epochs than V-TiMePReSt with a lower peak than PipeDream"}


def verdicts(rows, seeds):
    """Each claim at every setting: on one seed, where it holds; on several, on the seeds' mean at the
    settings every seed ran, and where the mean's margin exceeds the seeds' standard deviation."""
    values = claim_values(rows)
    for k in "abc":
        unit = "(setting, significance function) pairs" if k == "c" else "settings"  # (c): one per function
        held, n, by_rc, beyond, beyond_held = 0, 0, {}, 0, 0
        for key, per_seed in sorted(values[k].items()):
            if sorted(per_seed) != seeds or all(x is None for x in per_seed.values()):
                continue
            xs = [x for x in per_seed.values() if x is not None]
            if k == "c":  # the memory's margin on every seed, the epochs' on their mean
                m, sd = mean_sd([x[0] for x in xs])
                mem = [x[1] > 0 for x in xs]
                holds = m > 0 and all(mem)
                clear = not any(mem) or (all(mem) and abs(m) > sd)
            else:
                m, sd = mean_sd(xs)
                holds, clear = m > 0 if k == "b" else m >= 0, abs(m) > sd
            n += 1
            held += holds
            c = by_rc.setdefault(key[0][3], [0, 0])
            c[0] += holds
            c[1] += 1
            beyond += clear and len(seeds) > 1
            beyond_held += clear and holds and len(seeds) > 1
        split = "; ".join("%s recomputation %d of %d" % ("with" if rc == "1" else "without", h, c)
                          for rc, (h, c) in sorted(by_rc.items()))
        if n == 0:
            print("- (%s) %s: no setting has the runs it needs on every seed (%s)" % (k, TEXTS[k], ", ".join(map(str, seeds))))
        elif len(seeds) == 1:
            print("- (%s) %s: holds at %d of %d %s (%s)" % (k, TEXTS[k], held, n, unit, split))
        else:
            print("- (%s) %s, seeds %s: holds on their mean at %d of %d %s (%s); beyond the seeds' standard "
                  "deviation at %d of them (holds at %d, fails at %d), within it at %d"
                  % (k, TEXTS[k], ", ".join(map(str, seeds)), held, n, unit, split, beyond, beyond_held,
                     beyond - beyond_held, n - beyond))


def main():
    if "--claims" in sys.argv:
        args = [a for a in sys.argv[1:] if a != "--claims"]
        claims(args[0] if args else "bench/results/claims")
        return
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
