"""The trainers' tables (docs/trainers.md): every planner at 50 % of the
unplanned peak, trained bit for bit as the unplanned run, in an arena of the
budget; tools/trainer_table.py runs the host trainers, and tabulates the
CUDA trainers' runs from the JSON tools/gpu-check writes on a GPU machine."""
import os
import subprocess
import sys

from .fmt import ROOT, row_cells
from .registry import table

# Columns of tools/trainer_table.py's rows (0-based, after the leading "|").
IDENTICAL, PLANNED_RATIO, UNPLANNED_RATIO = 5, 12, 14


def trainer_rows(mp, measure_ops):
    """tools/trainer_table.py --run on the build mp runs: its table's lines."""
    build = os.path.relpath(mp.build, ROOT)
    args = ["tools/trainer_table.py", "--run", "--build", build] + (["--measure-ops"] if measure_ops else [])
    mp.commands.append(" ".join(args))
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return [line for line in out.split("\n") if line.startswith("|")]



def ratio_range(rows, column):
    values = [float(row_cells(r)[column]) for r in rows]
    return f"{min(values):.2f}-{max(values):.2f}"


def identical(rows):
    wrong = [f"{row_cells(r)[0]}/{row_cells(r)[1]}" for r in rows if row_cells(r)[IDENTICAL] != "yes"]
    return "every plan trained bit for bit as the unplanned run" if not wrong else \
        "NOT identical to the unplanned run: " + ", ".join(wrong)


@table("trainers-host", minutes=1, deterministic=False)
def trainers_host(mp, quick):
    """The host trainers under every planner at 50 %, op times the roofline of titan-rtx."""
    lines = trainer_rows(mp, measure_ops=False)
    rows = lines[2:]
    return lines + ["", f"{len(rows)} plans fit; {identical(rows)}."]


@table("trainers-host-measured", minutes=1, deterministic=False)
def trainers_host_measured(mp, quick):
    """The host trainers with each op's time as the host ran it (--measure-ops): simulated against measured."""
    lines = trainer_rows(mp, measure_ops=True)
    rows = lines[2:]
    return lines + ["", f"{len(rows)} plans fit; {identical(rows)}. Simulated / measured: "
                        f"{ratio_range(rows, PLANNED_RATIO)} for the plans, "
                        f"{ratio_range(rows, UNPLANNED_RATIO)} for the unplanned runs."]


# The last GPU check's JSON, kept in the repository so that the table can be
# remade anywhere: a session lent a GPU runs `tools/gpu-check --out
# $OUT/gpu-check.json` there and commits the file it gets back here.
GPU_CHECK = "docs/data/gpu-check.json"


@table("trainers-gpu", minutes=0.1, deterministic=False)
def trainers_gpu(mp, quick):
    """The CUDA trainers on a lent GPU: tools/gpu-check's JSON (MEMPLAN_GPU_CHECK, else docs/data/gpu-check.json)."""
    path = os.environ.get("MEMPLAN_GPU_CHECK") or GPU_CHECK
    if not os.path.isfile(os.path.join(ROOT, path)):
        raise FileNotFoundError(f"no GPU check's JSON at {path}: run tools/gpu-check on a GPU machine and commit "
                                f"its file as {GPU_CHECK} (or name one in MEMPLAN_GPU_CHECK)")
    mp.commands.append(f"tools/trainer_table.py {path}")
    out = subprocess.run([sys.executable, "tools/trainer_table.py", path], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    lines = out.rstrip("\n").split("\n")
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| trainer ")]
    return lines + ["", f"{len(rows)} runs; {identical([r for r in rows if 'no plan' not in r])}."]
