"""python3 -m memplan_torch export|check|dist-check ... (docs/pytorch.md, docs/pytorch-distributed.md)."""

import argparse
import json
import sys

from . import models
from .checking import check
from .distributed import MODES, dist_check
from .exporter import TIMES, export, write
from .runtime import PlanError


def _common(p):
    p.add_argument("--model", required=True, help="a torchvision classification model, or 'transformer'")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq-len", type=int, default=64, help="transformer: tokens per sample (default 64)")
    p.add_argument("--resolution", type=int, help="image side in pixels (default 224; 299 for inception_v3)")
    p.add_argument("--times", choices=TIMES, help="op times: estimate (default with --device), cpu, cuda")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m memplan_torch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write one training iteration as a memplan-graph file")
    _common(e)
    e.add_argument("--device", help="memplan device whose cost model estimates op times (memplan models)")
    e.add_argument("--out", required=True)
    c = sub.add_parser("check", help="run a plain and a planned training step on the CPU and compare")
    _common(c)
    c.add_argument("--device", required=True)
    c.add_argument("--budget", required=True, help="bytes, 24GiB, 800MiB or 50%% of the baseline peak")
    c.add_argument("--planner", required=True)
    c.add_argument("--json", action="store_true")
    d = sub.add_parser("dist-check", help="run a plain and a planned distributed step (DDP, ZeRO-2 or a 2-stage 1F1B "
                                          "pipeline) on CPU ranks (gloo, loopback) and compare them")
    _common(d)
    d.add_argument("--mode", required=True, choices=MODES)
    d.add_argument("--ranks", type=int, required=True, help="processes: data-parallel (DDP, ZeRO-2) ranks, or 2 pipeline stages")
    d.add_argument("--micro-batches", type=int, default=4, help="pipeline: micro-batches of --batch samples (4)")
    d.add_argument("--cluster", default="a100-node", help="memplan cluster the rank graphs are priced on")
    d.add_argument("--device", required=True)
    d.add_argument("--budget", required=True, help="bytes, 24GiB, 800MiB or 50%% of each rank's baseline peak")
    d.add_argument("--planner", required=True)
    d.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            model, inputs, target, loss_fn = models.build(args.model, args.batch, args.seq_len, args.resolution)
            doc = export(model, inputs, target, loss_fn, models.sgd(model), device=args.device, times=args.times,
                         name=f"{args.model}-b{args.batch}")
            write(doc, args.out)
            print(f"{args.out}: {len(doc['ops'])} ops, {len(doc['tensors'])} tensors")
            return 0
        if args.command == "dist-check":
            result = dist_check(args.mode, args.ranks, args.model, args.batch, device=args.device,
                                budget=args.budget, planner=args.planner, cluster=args.cluster,
                                seq_len=args.seq_len, resolution=args.resolution,
                                micro_batches=args.micro_batches, times=args.times)
        else:
            result = check(args.model, args.batch, device=args.device, budget=args.budget, planner=args.planner,
                           seq_len=args.seq_len, resolution=args.resolution, times=args.times)
    except (ValueError, ImportError, PlanError) as error:
        print(f"memplan_torch: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        for key in sorted(k for k in result if k != "ranks"):
            print(f"{key:28} {result[key]}")
        for rank in result.get("ranks", []):
            print(f"rank {rank['rank']}: " + ", ".join(f"{k} {rank[k]}" for k in (
                "feasible", "identical", "accounted_peak_bytes", "budget_bytes", "under_budget") if k in rank))
    whole = result.get("buffers_identical") is not False  # batch norm's statistics too, where a check compared them
    return 0 if result["feasible"] and result["identical"] and whole and result["under_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
