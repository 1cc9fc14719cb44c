"""How close every planner's laid-out plan comes to its live peak: the arena
the registry's layout needs over the most bytes live at once
(tools/layout_table.py)."""
import os
import pathlib
import subprocess
import sys

from .registry import table

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cells(line):
    return [c.strip() for c in line.strip("|").split("|")]


@table("layout-planners", minutes=15, deterministic=False)
def layout_planners(mp, quick):
    """Arena / live peak of tsplit, capuchin, home and checkpoint on the 16 zoo models, batch 16, at 50 % and 70 %."""
    args = ["tools/layout_table.py", "--memplan", os.path.relpath(mp.path, ROOT)]
    if quick:
        args += ["--models", "vgg16,resnet50"]
    mp.commands.append(" ".join(args))
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    tables = out.strip().split("\n\n")
    per_cell = [line for line in tables[0].split("\n") if line.startswith("|")]
    summary = [line for line in tables[1].split("\n") if line.startswith("|")]
    measured = [cells(r) for r in per_cell[2:] if cells(r)[3] != "infeasible"]
    ratios = [float(c[5]) for c in measured]
    above = sorted((c for c in measured if float(c[5]) > 1.01), key=lambda c: -float(c[5]))
    worst = f"every one within {max(ratios):.4f}" if ratios else "none feasible"
    listed = ", ".join(f"{c[0]} {c[1]} {c[2]} {float(c[5]):.4f}" for c in above)
    return summary + ["", f"{len(measured)} feasible cells of {len(per_cell) - 2}, {worst}; "
                          f"{len(above)} above 1.01{': ' + listed if above else ''}.", "",
                      "<details><summary>Every cell</summary>", "", *per_cell, "", "</details>"]
