#!/usr/bin/python3
"""Real PyTorch traces, kept outside the repository, through every planner.

Exports torchvision models and the 4-layer transformer with memplan_torch
(op times estimated for the device) into --dir (outside the repository),
then for each trace:
- the `none` plan at the budget of its own arena must pass the validator;
- at 50 %, vdnn-conv must swap and superneurons recompute (they recognise
  the exported op types);
- every planner at 50, 70 and 90 % of the baseline peak: each feasible plan
  must pass the validator and run under `memplan execute` in an arena of
  exactly the budget with bit-identical outputs (issue 22);
- checkpoint and dtr at 50, 70 and 90 % on the zoo model of the same
  architecture and batch, beside the trace's.
Prints the markdown tables of docs/results.md ("PyTorch traces").

    PYTHONPATH=python /usr/bin/python3 tools/torch_traces.py --memplan build/ci/examples/cli/memplan
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from memplan_torch import export, models, write  # noqa: E402
from memplan_torch._native import native  # noqa: E402

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "densenet121", "vgg11", "transformer"]
ZOO = {"resnet50": "resnet50", "mobilenet_v2": "mobilenet", "densenet121": "densenet121"}
BUDGETS = ["50%", "70%", "90%"]


def executes(cli, trace, plan, device, budget):
    """`memplan execute` of a plan file: (ok, compactions)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(plan.to_json(), f)
    try:
        out = subprocess.run([cli, "execute", "--graph", str(trace), "--device", device, "--budget", str(budget),
                              "--plan", f.name, "--json"], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        return False, out.stderr.strip()[:120]
    report = json.loads(out.stdout)
    return report["ok"] and report["compactions"] == 0, report.get("compactions")


def planners_row(memplan, cli, name, trace, graph, device):
    cells = []
    for budget in BUDGETS:
        fit, valid, ran, total = [], 0, 0, 0
        for planner in memplan.planners():
            if planner == "none":
                continue
            total += 1
            plan = memplan.plan(graph, device=device, budget=budget, planner=planner, time_limit=60)
            if not plan.feasible:
                continue
            fit.append(planner)
            valid += memplan.validate(graph, plan, plan.budget_bytes, device=device)["valid"]
            ok, _ = executes(cli, trace, plan, device, plan.budget_bytes)
            ran += ok
        cells.append(f"{len(fit)}/{total} fit, {valid} valid, {ran} run")
        print(f"  {name} {budget}: fit {' '.join(fit)}", file=sys.stderr)
    return cells


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memplan", required=True, help="the memplan CLI binary")
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "memplan-torch-traces"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--device", default="v100")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    folder = pathlib.Path(args.dir).resolve()
    if ROOT in folder.parents or folder == ROOT:
        sys.exit(f"--dir {folder}: traces stay outside the repository")
    folder.mkdir(parents=True, exist_ok=True)
    memplan = native("planning the traces")
    summary, matrix, zoo = [], [], []
    for name in args.models.split(","):
        model, inputs, target, loss_fn = models.build(name, args.batch)
        graph = export(model, inputs, target, loss_fn, models.sgd(model), device=args.device,
                       name=f"{name}-b{args.batch}")
        trace = folder / f"{name}-b{args.batch}.json"
        write(graph, trace)
        g = memplan.load_graph(graph)
        none = memplan.plan(graph, device=args.device, budget=10 * g.baseline_peak_bytes, planner="none")
        valid = memplan.validate(graph, none, none.arena_bytes, device=args.device)["valid"]
        vdnn = memplan.plan(graph, device=args.device, budget="50%", planner="vdnn-conv")
        sn = memplan.plan(graph, device=args.device, budget="50%", planner="superneurons")
        summary.append(f"| {name} | {g.num_ops} | {g.num_tensors} | {g.baseline_peak_bytes / 2**20:.1f} | "
                       f"{none.arena_bytes / 2**20:.1f} | {'yes' if valid else 'NO'} | "
                       f"{vdnn.swapped_bytes / 2**20:.1f} | {sn.recomputed_ops} |")
        matrix.append(f"| {name} | " + " | ".join(planners_row(memplan, args.memplan, name, trace, graph,
                                                                args.device)) + " |")
        if name in ZOO:
            z = memplan.load_model(ZOO[name], device=args.device, batch=args.batch)
            cells = []
            for planner in ("checkpoint", "dtr"):
                for budget in BUDGETS:
                    ours = memplan.plan(graph, device=args.device, budget=budget, planner=planner).feasible
                    theirs = memplan.plan(z, device=args.device, budget=budget, planner=planner).feasible
                    cells.append(f"{'fits' if ours else '—'} / {'fits' if theirs else '—'}")
            zoo.append(f"| {name} / {ZOO[name]} | " + " | ".join(cells) + " |")
    print(f"Traces: batch {args.batch}, op times estimated for {args.device}, in {folder}.\n")
    print("| model | ops | tensors | baseline peak MiB | none arena MiB | none valid | vdnn-conv swaps MiB at 50 % "
          "| superneurons recomputes at 50 % |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    print("\n".join(summary))
    print("\n| model | " + " | ".join(BUDGETS) + " |")
    print("|---|" + "---|" * len(BUDGETS))
    print("\n".join(matrix))
    print("\n| trace / zoo | " + " | ".join(f"{p} {b}" for p in ("checkpoint", "dtr") for b in BUDGETS) + " |")
    print("|---|" + "---|" * 2 * len(BUDGETS))
    print("\n".join(zoo))


if __name__ == "__main__":
    main()
