"""How close every planner's laid-out plan comes to its live peak: the arena
the registry's layout needs over the most bytes live at once
(tools/layout_table.py)."""
import os
import statistics
import subprocess
import sys

from . import fmt
from .fmt import ROOT, row_cells, shown
from .registry import table
from .speed import duration, medians, micros, release_bench




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
    measured = [row_cells(r) for r in per_cell[2:] if row_cells(r)[3] != "infeasible"]
    ratios = [float(c[5]) for c in measured]
    above = sorted((c for c in measured if float(c[5]) > 1.01), key=lambda c: -float(c[5]))
    worst = f"every one within {max(ratios):.4f}" if ratios else "none feasible"
    listed = ", ".join(f"{c[0]} {c[1]} {c[2]} {float(c[5]):.4f}" for c in above)
    return summary + ["", f"{len(measured)} feasible cells of {len(per_cell) - 2}, {worst}; "
                          f"{len(above)} above 1.01{': ' + listed if above else ''}.", "",
                      "<details><summary>Every cell</summary>", "", *per_cell, "", "</details>"]


# bench_layout's placement benchmarks, with what each lays out.
PLACE_ROWS = [
    ("bm_place_training/440/41/0", "440 layers x 41 iterations; 1,760 never freed, up to 885 others live"),
    ("bm_place_training/440/41/1", "a third of saved activations split in 4"),
    ("bm_place_training/2000/8/0", "8,000 never freed, up to 4,005 others live"),
    ("bm_place_training/44/3/0", ""),
    ("bm_place_zoo/resnet50", "b64, no planner"),
    ("bm_place_zoo/densenet121", "b64"),
    ("bm_place_zoo/inception_v3", "b64"),
    ("bm_place_zoo/bert_base", "b8"),
]


@table("layout-place", minutes=1, deterministic=False)
def layout_place(mp, quick):
    """`place` on synthetic training traces of up to 100,000 allocations and on the zoo's unplanned steps (median of 3)."""
    wanted = PLACE_ROWS[-4:-3] if quick else PLACE_ROWS
    median = medians(mp, "bench_layout", [name for name, _ in wanted])
    rows = []
    for name, what in wanted:
        r = median[name]
        rows.append([f"`{name}`" + (f" ({what})" if what else ""), f"{int(r['allocations']):,}",
                     duration(micros(r, "cpu_time")), duration(micros(r, "real_time")), f"{r['arena/peak']:.4f}"])
    return fmt.table(["benchmark", "allocations", "CPU time", "wall time", "arena / peak"], rows, numeric_from=1)


@table("layout-zoo-plans", minutes=0.2, deterministic=False)
def layout_zoo_plans(mp, quick):
    """The layouts of the zoo's plans: arena over live peak per model, planner and budget (bench_layout --table)."""
    bench = release_bench(mp, "bench_layout")
    mp.commands.append(f"{shown(bench)} --table")
    out = subprocess.run([str(bench), "--table"], capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.split("\n") if line.startswith("|")]
    if quick:
        lines = lines[:4]
    rows = [row_cells(line) for line in lines[2:]]
    ratio = {r[0]: float(r[4]) for r in rows}
    others = {k: v for k, v in ratio.items() if "/ dtr /" not in k}
    worst = max(others, key=others.get)
    dtr = [v for k, v in ratio.items() if "/ dtr /" in k]
    values = list(ratio.values())
    summary = (f"Of the {len(values)} layouts, {sum(v <= 1.02 for v in values)} are within 2 % of the peak and "
               f"{sum(v <= 1.05 for v in values)} within 5 % (median {statistics.median(values):.4f}). Leaving out DTR: "
               f"median {statistics.median(others.values()):.4f}, worst {others[worst]:.4f} ({worst})")
    if dtr:
        summary += f"; DTR's plans {min(dtr):.2f}-{max(dtr):.2f}"
    return lines + ["", summary + "."]

