#!/usr/bin/env python3
"""Arena bytes / peak live bytes of every planner's plan (issue 22's table).

Runs `memplan plan --json` for each model x planner x budget and prints a
Markdown table: the layout's arena, the live peak, their ratio, and the
median and maximum ratio per planner.

usage: tools/layout_table.py [--memplan build/ci/examples/cli/memplan]
       [--models a,b] [--planners a,b] [--budgets 50%,70%] [--batch 16]
"""
import argparse
import json
import statistics
import subprocess
import sys

ZOO = ["vgg16", "vgg19", "resnet50", "resnet101", "resnet152", "resnext50", "inception_v3", "inception_v4",
       "densenet121", "mobilenet", "squeezenet", "plain20", "transformer", "bert-base", "bert-large", "gpt2"]


def cell(memplan, model, planner, budget, batch, device):
    cmd = [memplan, "plan", "--model", model, "--batch", str(batch), "--device", device, "--budget", budget,
           "--planner", planner, "--json", "--time-limit", "20"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1, 2, 3):
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr}")
    row = json.loads(out.stdout)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memplan", default="build/ci/examples/cli/memplan")
    ap.add_argument("--models", default=",".join(ZOO))
    ap.add_argument("--planners", default="tsplit,capuchin,home,checkpoint")
    ap.add_argument("--budgets", default="50%,70%")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--device", default="titan-rtx")
    args = ap.parse_args()
    ratios = {p: [] for p in args.planners.split(",")}
    print("| model | planner | budget | arena | live peak | arena / live |")
    print("|---|---|---|---:|---:|---:|")
    for model in args.models.split(","):
        for planner in args.planners.split(","):
            for budget in args.budgets.split(","):
                row = cell(args.memplan, model, planner, budget, args.batch, args.device)
                if not row["feasible"] or row["arena_bytes"] == 0:
                    print(f"| {model} | {planner} | {budget} | infeasible | - | - |", flush=True)
                    continue
                ratio = row["arena_bytes"] / row["peak_live_bytes"]
                ratios[planner].append(ratio)
                print(f"| {model} | {planner} | {budget} | {row['arena_bytes']} | {row['peak_live_bytes']} | "
                      f"{ratio:.4f} |", flush=True)
    print()
    print("| planner | cells | median | max |")
    print("|---|---:|---:|---:|")
    for planner, rs in ratios.items():
        if rs:
            print(f"| {planner} | {len(rs)} | {statistics.median(rs):.4f} | {max(rs):.4f} |")


if __name__ == "__main__":
    main()
