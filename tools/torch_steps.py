#!/usr/bin/python3
"""Planned PyTorch training steps against plain ones, as a table.

For each model, planner and budget: `memplan_torch.check` (export, plan, one
plain and one planned step on the CPU from the same state) and whether the
gradients are bit-identical and the accountant's peak is under the budget.
Prints the markdown table of docs/results.md ("Planned PyTorch steps").

    PYTHONPATH=python /usr/bin/python3 tools/torch_steps.py --batch 32 --models resnet18
"""

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))

from memplan_torch import check  # noqa: E402


def cell(result):
    if not result["feasible"]:
        return "—"
    mark = "identical" if result["identical"] else f"DIFFERS by {result['max_abs_diff']:g}"
    return (f"{mark}; {result['accounted_peak_bytes'] / 2**20:.1f} / {result['budget_bytes'] / 2**20:.1f} MiB"
            f"{'' if result['under_budget'] else ' OVER'}; {result['recomputed_ops']} recomputed, "
            f"{result['swapped_out_bytes'] / 2**20:.0f} MiB swapped")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,transformer")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--device", default="v100")
    parser.add_argument("--planners", default="tsplit,capuchin,dtr,checkpoint")
    parser.add_argument("--budgets", default="50%,70%,90%")
    args = parser.parse_args()
    budgets = args.budgets.split(",")
    print(f"Batch {args.batch} (transformer: {args.seq_len} tokens), plans for {args.device}, steps on the CPU. "
          "Cells: gradients and updated weights against the plain step; accountant's peak / budget.\n")
    print("| model | planner | " + " | ".join(budgets) + " |")
    print("|---|---|" + "---|" * len(budgets))
    for model in args.models.split(","):
        for planner in args.planners.split(","):
            cells = [cell(check(model, args.batch, device=args.device, budget=b, planner=planner,
                                seq_len=args.seq_len)) for b in budgets]
            print(f"| {model} | {planner} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
