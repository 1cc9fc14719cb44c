#!/usr/bin/env python3
"""The DTR-log table of docs/results.md: one `memplan compare` per log and
budget ratio, cell = simulated time / time without eviction, OOM = no
feasible plan.

    tools/dtr_log_table.py [--memplan build/ci/examples/cli/memplan]
                           [--corpus ../shared/corpus/dtr-logs] [--planners dtr,delta]
                           [--options "--seed-with dtr --iterations 20"] [--allocator]

--allocator adds, per planner, the online allocator's fragmentation (its
segments' high-water mark / the live peak) and driver time (ms) where the
plan reports them (dtr, delta: docs/formats.md, "The online policies'
allocator").

BYTES = ratio x the log's no-eviction peak as the DTR simulator counts it
(io::dtr_log::refcount_peak, listed below; tests/test_dtr_log.cpp checks
them against the corpus README).
"""
import argparse
import json
import pathlib
import subprocess

PEAKS = {  # prefix: (row label, refcount_peak bytes)
    "resnet32": ("ResNet-32 (56)", 10061179152),
    "transformer": ("Transformer (10)", 9864405000),
    "tv_densenet121": ("DenseNet-121 (84)", 11020749360),
    "inceptionv4": ("InceptionV4 (64)", 11245348984),
    "unet": ("U-Net (6)", 8415764640),
    "lstm": ("LSTM (512)", 5595127736),
    "treelstm": ("TreeLSTM", 170173608),
    "unroll_gan": ("Unrolled GAN", 252677418),
}
RATIOS = (0.3, 0.5, 0.7, 0.9)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--memplan", default="build/ci/examples/cli/memplan")
    a.add_argument("--corpus", default="../shared/corpus/dtr-logs")
    a.add_argument("--planners", default="dtr,delta")
    a.add_argument("--time-limit", default="60")
    a.add_argument("--options", default="", help="more options for `memplan compare`, e.g. home's")
    a.add_argument("--allocator", action="store_true", help="add fragmentation and allocator ms per planner")
    args = a.parse_args()
    planners = args.planners.split(",")
    heads = [[f"`{p}`", "frag.", "alloc ms"] if args.allocator else [f"`{p}`"] for p in planners]
    print("| log | ratio | " + " | ".join(h for hs in heads for h in hs) + " |")
    print("|---|---|" + "---|" * sum(len(hs) for hs in heads))
    for prefix, (label, peak) in PEAKS.items():
        log = next(pathlib.Path(args.corpus).glob(prefix + "-*.log"))
        for i, ratio in enumerate(RATIOS):
            budget = int(ratio * peak)
            out = subprocess.run([args.memplan, "compare", "--dtr-log", str(log), "--device", "titan-v",
                                  "--budget", str(budget), "--planners", args.planners, "--json",
                                  "--time-limit", args.time_limit, *args.options.split()],
                                 capture_output=True, text=True, check=True)
            rows = {r["planner"]: r for r in json.loads(out.stdout)["rows"]}
            cells = [c for p in planners for c in cells_of(rows[p], args.allocator)]
            print(f"| {label if i == 0 else ''} | {ratio} | " + " | ".join(cells) + " |", flush=True)


def cells_of(row, allocator):
    """A planner's cells: time ratio (or OOM), then fragmentation and allocator ms."""
    time = f"{row['time_s'] / row['baseline_time_s']:.3f}" if row["feasible"] else "OOM"
    if not allocator:
        return [time]
    if not row["feasible"] or "fragmentation" not in row:
        return [time, "", ""]
    return [time, f"{row['fragmentation']:.3f}", f"{row.get('allocator_s', 0) * 1e3:.1f}"]


if __name__ == "__main__":
    main()
