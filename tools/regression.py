#!/usr/bin/env python3
"""Regenerates the pinned numbers of tests/data/regression.json: for each
cell (chosen by hand), one `memplan plan --json` run, and the numbers it
reports written back into the cell.

    tools/regression.py [--memplan build/ci/examples/cli/memplan]          # print the differences
    tools/regression.py [--memplan build/ci/examples/cli/memplan] --write  # and rewrite the file

The DTR-log cells need ../shared/corpus/dtr-logs; without it they keep
their numbers, and the script says so on stderr.
"""
import argparse
import json
import pathlib
import subprocess
import sys

from plan_identity import DTR_PEAKS

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "regression.json"
DIGITS = 5  # overheads and time ratios; the tests allow the file's `tolerance`


def plan_json(memplan, source, budget, planner):
    run = subprocess.run([memplan, "plan", *source, "--budget", str(budget), "--planner", planner, "--json"],
                         capture_output=True, text=True)
    if run.returncode not in (0, 2):  # 2: infeasible, still reported
        sys.exit(f"regression: memplan plan {' '.join(source)} failed: {run.stderr.strip()}")
    return json.loads(run.stdout)


def zoo_numbers(memplan, cell):
    source = ["--model", cell["model"], "--batch", str(cell["batch"]), "--device", cell["device"]]
    if "scale" in cell:
        source += ["--scale", str(cell["scale"])]
    r = plan_json(memplan, source, cell["budget"], cell["planner"])
    if not r["feasible"]:  # an infeasible plan has no figures
        return {"feasible": False}
    return {"feasible": True, "overhead": round(r["overhead"], DIGITS), "peak_bytes": r["peak_bytes"],
            "offloaded_state_bytes": r["offloaded_state_bytes"]}


def dtr_log_numbers(memplan, corpus, cell):
    log = next(corpus.glob(cell["log"] + "-*.log"))
    budget = int(cell["budget_share"] * DTR_PEAKS[cell["log"]])  # as the test: share x the log's refcount peak
    r = plan_json(memplan, ["--dtr-log", str(log), "--device", cell["device"]], budget, cell["planner"])
    ratio = r["time_s"] / r["baseline_time_s"] if r["feasible"] else -1.0
    return {"time_ratio": round(ratio, DIGITS)}


def dump(doc):
    """The file's layout: one line per key, one line per cell."""
    parts = []
    for key, value in doc.items():
        if isinstance(value, list):
            rows = ",\n".join(f"    {json.dumps(c, ensure_ascii=False)}" for c in value)
            parts.append(f"  {json.dumps(key)}: [\n{rows}\n  ]")
        else:
            parts.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--memplan", default="build/ci/examples/cli/memplan")
    a.add_argument("--corpus", default=str(DATA.parents[3] / "shared" / "corpus" / "dtr-logs"))
    a.add_argument("--write", action="store_true", help=f"rewrite {DATA.name} with the new numbers")
    args = a.parse_args()
    doc = json.loads(DATA.read_text())
    corpus = pathlib.Path(args.corpus)
    if not corpus.is_dir():
        print(f"regression: {corpus} is absent; the DTR-log cells keep their numbers", file=sys.stderr)
    cells = [(c, lambda c=c: zoo_numbers(args.memplan, c)) for c in doc["zoo"]]
    if corpus.is_dir():
        cells += [(c, lambda c=c: dtr_log_numbers(args.memplan, corpus, c)) for c in doc["dtr_log"]]
    changed = 0
    for cell, measure in cells:
        new = measure()
        old = {k: cell.get(k) for k in new}
        if old != new:
            changed += 1
            where = {k: v for k, v in cell.items() if k not in new and k != "note"}
            print(f"{json.dumps(where)}: {old} -> {new}")
        cell.update(new)
    print(f"regression: {changed} of {len(cells)} cells changed", file=sys.stderr)
    if args.write:
        DATA.write_text(dump(doc))


if __name__ == "__main__":
    main()
