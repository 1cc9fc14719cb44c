#!/usr/bin/env python3
"""Every planner's plans run under `memplan execute` (issue 22's acceptance).

For each source x planner x budget, `memplan execute --json` plans, then
runs the plan on the host executor in an arena of exactly the budget with
ops that check every byte they read. A cell the planner finds infeasible is
not run (counted as infeasible). Prints one Markdown row per source kind and planner: the plans
run, how many ran right, the compactions (0 for every plan with a layout),
and the largest high-water mark of the arena as a share of the budget.

usage: tools/execute_table.py [--memplan build/ci/examples/cli/memplan]
       [--models a,b] [--batches 2,8] [--planners a,b] [--budgets 50%,70%,90%]
       [--dtr-logs treelstm,unroll_gan] [--max-arena-gib 6]

Sources: the graphs under tests/data, the zoo models at each batch (titan-rtx),
the DTR logs of ../shared/corpus/dtr-logs named by --dtr-logs (titan-v).
Cells whose budget exceeds --max-arena-gib are counted as skipped (the
arena is allocated on this machine).
"""
import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAST = "none,vdnn-conv,vdnn-all,checkpoint,superneurons,capuchin,dtr,delta,tsplit-nosplit,tsplit,auto"


def execute(memplan, source, budget, planner):
    cmd = [memplan, "execute", *source, "--budget", budget, "--planner", planner, "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1, 2, 3):
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def sources(args):
    for graph in sorted((ROOT / "tests" / "data").glob("*.json")):
        if json.loads(graph.read_text()).get("format") == "memplan-graph":
            yield "tests/data", ["--graph", str(graph), "--device", "titan-rtx"]
    for model in filter(None, args.models.split(",")):
        for batch in args.batches.split(","):
            yield "zoo", ["--model", model, "--batch", batch, "--device", "titan-rtx"]
    logs = ROOT.parent / "shared" / "corpus" / "dtr-logs"
    for prefix in filter(None, args.dtr_logs.split(",")):
        found = sorted(logs.glob(prefix + "-*.log"))
        if not found:
            print(f"execute_table: no DTR log {prefix} under {logs}: skipped", file=sys.stderr)
            continue
        yield "dtr logs", ["--dtr-log", str(found[0]), "--device", "titan-v"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memplan", default=str(ROOT / "build/ci/examples/cli/memplan"))
    ap.add_argument("--models", default="vgg16,resnet50,inception_v3,densenet121,mobilenet,plain20,transformer,gpt2")
    ap.add_argument("--batches", default="2,8")
    ap.add_argument("--planners", default=FAST)
    ap.add_argument("--budgets", default="50%,70%,90%")
    ap.add_argument("--dtr-logs", default="treelstm,unroll_gan")
    ap.add_argument("--max-arena-gib", type=float, default=6.0)
    args = ap.parse_args()
    rows = {}  # (kind, planner) -> [run, ok, compactions, max high water / budget, skipped, infeasible]
    for kind, source in sources(args):
        info = subprocess.run([args.memplan, "info", *source, "--json"], capture_output=True, text=True)
        if info.returncode != 0:  # tests/data holds graphs invalid by design (tests/data/README.md)
            print(f"execute_table: {source[1]} is refused ({info.stderr.strip()}): skipped", file=sys.stderr)
            continue
        peak = json.loads(info.stdout)["baseline_peak_bytes"]
        for planner in args.planners.split(","):
            row = rows.setdefault((kind, planner), [0, 0, 0, 0.0, 0, 0])
            for budget in args.budgets.split(","):
                if peak * float(budget.rstrip("%")) / 100 > args.max_arena_gib * 2**30:
                    row[4] += 1
                    continue
                r = execute(args.memplan, source, budget, planner)
                if "arena_high_water_bytes" not in r:
                    row[5] += 1  # the planner's verdict, infeasible: nothing to run
                    continue
                row[0] += 1
                row[1] += 1 if r["ok"] else 0
                if not r["ok"]:
                    print(f"execute_table: {' '.join(source)} {budget} {planner}: {r.get('failure')}", file=sys.stderr)
                row[2] += r.get("compactions", 0)
                row[3] = max(row[3], r.get("arena_high_water_bytes", 0) / r["budget_bytes"])
    print("| source | planner | infeasible | plans run | ran right | compactions | max high water / budget |"
          " skipped (arena) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (kind, planner), (run, ok, compactions, high, skipped, infeasible) in rows.items():
        print(f"| {kind} | {planner} | {infeasible} | {run} | {ok} | {compactions} | {high:.4f} | {skipped} |")


if __name__ == "__main__":
    main()
