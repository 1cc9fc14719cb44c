#!/usr/bin/env python3
"""Tables of trainer runs for docs/results.md.

  tools/trainer_table.py gpu-check.json
      the GPU check's table, from the JSON file tools/gpu-check writes;
  tools/trainer_table.py --run [--measure-ops] [--build build/ci]
      runs the host trainers (memplan-train-mlp, memplan-train-cnn) under
      every planner at 50 % for 20 iterations and prints one row per plan
      that fits; with --measure-ops the op times are the host's own.
"""
import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PLANNERS = "none,vdnn-conv,vdnn-all,checkpoint,superneurons,revolve,milp,capuchin,dtr,delta,tsplit-nosplit,tsplit,home,auto"
HEADER = ("| trainer | planner | batch | budget B | exit | identical | high water / budget | swapped out B "
          "| micro actions | final loss | measured ms | simulated ms | simulated / measured "
          "| unplanned measured ms | unplanned simulated / measured |\n"
          "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def row(network, planner, t):
    if t.get("exit", 0) not in (0, 1):
        return f"| {network} | {planner} | | | {t['exit']} | no plan |" + " |" * 9
    measured, simulated = t["iteration_ms"], t["simulated_ms"]
    unplanned = t["unplanned_iteration_ms"]
    return (f"| {network} | {planner} | {t['batch']} | {t['budget_bytes']} | {t.get('exit', 0)} | "
            f"{'yes' if t['identical'] else 'NO'} | {t['arena_high_water_bytes'] / t['budget_bytes']:.4f} | "
            f"{t['swapped_out_bytes']} | {t['micro_actions']} | {t['loss'][-1]:.6f} | {measured:.3f} | "
            f"{simulated:.3f} | {simulated / measured:.3f} | {unplanned:.3f} | "
            f"{t['simulated_unplanned_ms'] / unplanned:.3f} |")


def gpu_table(path):
    r = json.loads(pathlib.Path(path).read_text())
    print(f"GPU: {r['gpu']}; CUDA integrity tests (label gpu): {'passed' if r['ctest_gpu']['passed'] else 'FAILED'}")
    p = r.get("profile")
    if p:
        print(f"Measured profile: h2d {p['h2d']['bandwidth_gb_s']:.1f} GB/s, d2h {p['d2h']['bandwidth_gb_s']:.1f} GB/s, "
              f"device copies {p['memory_bandwidth_gb_s']:.0f} GB/s")
    print()
    print(HEADER)
    for t in r["trainers"]:
        _, network, planner = t["run"].split("-", 2)
        print(row(network + "-cuda", planner, t))


def host_table(build, measure_ops):
    print(HEADER)
    for network in ("mlp", "cnn"):
        for planner in PLANNERS.split(","):
            cmd = [str(ROOT / build / "examples/trainers" / f"memplan-train-{network}"), "--planner", planner,
                   "--budget", "50", "--iterations", "20", "--json"] + (["--measure-ops"] if measure_ops else [])
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode == 2:
                continue  # no plan fits: docs/trainers.md lists them
            if out.returncode not in (0, 1):
                sys.exit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr}")
            print(row(network, planner, dict(json.loads(out.stdout), exit=out.returncode)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gpu_check", nargs="?")
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--measure-ops", action="store_true")
    ap.add_argument("--build", default="build/ci")
    args = ap.parse_args()
    if args.run:
        host_table(args.build, args.measure_ops)
    elif args.gpu_check:
        gpu_table(args.gpu_check)
    else:
        ap.error("give gpu-check.json or --run")


if __name__ == "__main__":
    main()
