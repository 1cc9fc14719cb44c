#!/usr/bin/env python3
"""Fingerprints of the plans a refactoring must leave unchanged: the DTR-log
cells, TSPLIT Tables IV and V and Capuchin Table 2 (docs/results.md), one
`memplan plan --out` each, its SHA-256 printed beside the cell.

    tools/plan_identity.py [--memplan build/ci/examples/cli/memplan] > before.txt
    ... change the code, rebuild ...
    tools/plan_identity.py > after.txt && diff before.txt after.txt

Cells whose log corpus (../shared/corpus/dtr-logs) is absent are left out,
and the script says so on stderr.
"""
import argparse
import hashlib
import pathlib
import subprocess
import sys
import tempfile

DTR_PEAKS = {  # log prefix: refcount_peak bytes (tools/paper/dtr.py, LOGS)
    "resnet32": 10061179152, "transformer": 9864405000, "tv_densenet121": 11020749360,
    "inceptionv4": 11245348984, "unet": 8415764640, "lstm": 5595127736,
    "treelstm": 170173608, "unroll_gan": 252677418,
}
RATIOS = (0.3, 0.5, 0.7, 0.9)
# TSPLIT Table IV: each planner at the largest batch it reaches on titan-rtx.
TABLE_IV = {
    "vgg16": {"vdnn-all": 480, "checkpoint": 429, "superneurons": 434, "tsplit-nosplit": 501, "tsplit": 668},
    "vgg19": {"tsplit-nosplit": 658, "tsplit": 668},
    "resnet50": {"vdnn-conv": 505, "vdnn-all": 1676, "checkpoint": 556, "tsplit-nosplit": 1757, "tsplit": 2006},
    "resnet101": {"superneurons": 418, "tsplit-nosplit": 1888, "tsplit": 1918},
    "inception_v4": {"tsplit-nosplit": 1546, "tsplit": 1552},
    "transformer": {"vdnn-all": 535, "tsplit-nosplit": 784, "tsplit": 1037},
}
# TSPLIT Table V: tsplit at the largest width, batch 16.
TABLE_V = {"vgg16": 20, "vgg19": 20, "resnet50": 30, "resnet101": 30, "inception_v4": 40, "transformer": 44}
# Capuchin Table 2: capuchin at its largest batch on the P100.
TABLE_2 = {"vgg16": 417, "resnet50": 1281, "resnet152": 1299, "inception_v3": 1022, "inception_v4": 760,
           "bert-base": 1381}


def cells(corpus):
    for model, rows in TABLE_IV.items():
        for planner, batch in rows.items():
            yield f"IV {model} b{batch} {planner}", ["--model", model, "--batch", str(batch), "--device",
                                                     "titan-rtx", "--budget", "24GiB", "--planner", planner]
    for model, scale in TABLE_V.items():
        yield f"V {model} x{scale} tsplit", ["--model", model, "--batch", "16", "--scale", str(scale), "--device",
                                             "titan-rtx", "--budget", "24GiB", "--planner", "tsplit"]
    for model, batch in TABLE_2.items():
        yield f"2 {model} b{batch} capuchin", ["--model", model, "--batch", str(batch), "--device", "p100",
                                               "--budget", "16GiB", "--planner", "capuchin"]
    logs = pathlib.Path(corpus)
    if not logs.is_dir():
        print(f"plan_identity: {corpus} is absent; the DTR-log cells are left out", file=sys.stderr)
        return
    for prefix, peak in DTR_PEAKS.items():
        log = next(logs.glob(prefix + "-*.log"))
        for ratio in RATIOS:
            for planner in ("dtr", "delta", "capuchin", "tsplit"):
                yield f"dtr {prefix} {ratio} {planner}", ["--dtr-log", str(log), "--device", "titan-v", "--budget",
                                                          str(int(ratio * peak)), "--planner", planner]


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--memplan", default="build/ci/examples/cli/memplan")
    a.add_argument("--corpus", default="../shared/corpus/dtr-logs")
    a.add_argument("--only", default="", help="run the cells whose label contains this text")
    args = a.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "plan.json"
        for label, source in cells(args.corpus):
            if args.only not in label:
                continue
            out.unlink(missing_ok=True)
            run = subprocess.run([args.memplan, "plan", *source, "--out", str(out)], capture_output=True, text=True)
            digest = hashlib.sha256(out.read_bytes()).hexdigest()[:16] if out.exists() else "no-plan"
            print(f"{label}: exit {run.returncode} {digest}", flush=True)


if __name__ == "__main__":
    main()
