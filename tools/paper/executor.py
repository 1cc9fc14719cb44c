"""The executor's tables (issue 22): every fast planner's plans run under
`memplan execute` on the host, in an arena of exactly the budget, every
byte checked; tools/execute_table.py runs them."""
import os
import subprocess
import sys

from .fmt import ROOT, row_cells
from .fmt import table as table_md
from .registry import table

# Columns of tools/execute_table.py's rows.
SOURCE, PLANNER, INFEASIBLE, RUN, RIGHT, COMPACTIONS, HIGH_WATER, SKIPPED = range(8)


def execute_rows(mp, args, sources, quick):
    """tools/execute_table.py ARGS on the build mp runs: its table's header and the rows of `sources`."""
    if quick:  # one zoo model, one batch, one planner, one budget
        args = ["--models", "plain20", "--batches", "2", "--planners", "tsplit", "--budgets", "70%", "--dtr-logs", ""]
    cli = os.path.relpath(mp.path, ROOT)
    shown = ["tools/execute_table.py", "--memplan", cli, *[a if a else "''" for a in args]]
    mp.commands.append(" ".join(shown))
    out = subprocess.run([sys.executable, "tools/execute_table.py", "--memplan", cli, *args],
                         capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"tools/execute_table.py exited {out.returncode}:\n{out.stderr}")
    lines = [line for line in out.stdout.split("\n") if line.startswith("|")]
    rows = [r for r in lines[2:] if row_cells(r)[SOURCE] in sources or quick]
    return lines[:2], rows


def summary(rows):
    """'363 plans ran, 363 right, 0 compactions; ...': the sums over the rows."""
    total = lambda column: sum(int(row_cells(r)[column]) for r in rows)  # noqa: E731
    wrong = [f"{row_cells(r)[SOURCE]}/{row_cells(r)[PLANNER]}" for r in rows
             if row_cells(r)[RUN] != row_cells(r)[RIGHT]]
    high = max((float(row_cells(r)[HIGH_WATER]) for r in rows), default=0.0)
    return (f"{total(RUN)} plans ran, {total(RIGHT)} right, {total(COMPACTIONS)} compactions, "
            f"{total(SKIPPED)} cells skipped (arena); the highest high-water mark is {high:.4f} of the budget, "
            + ("never above it" if high <= 1 else "ABOVE it") + ("." if not wrong else f"; WRONG: {', '.join(wrong)}."))


def executor_table(mp, quick, args, sources):
    logs = ROOT.parent / "shared" / "corpus" / "dtr-logs"
    if "dtr logs" in sources and not quick and not logs.is_dir():
        raise FileNotFoundError(f"no DTR logs at {logs}")
    head, rows = execute_rows(mp, args, sources, quick)
    return head + rows + ["", summary(rows)]


@table("executor-small", minutes=13, deterministic=True)
def executor_small(mp, quick):
    """tests/data, the zoo at batches 2 and 16, the DTR logs: every fast planner at 50, 70, 90 %."""
    return executor_table(mp, quick, ["--batches", "2,16"], ("tests/data", "zoo", "dtr logs"))


@table("executor-batch-4-8", minutes=8, deterministic=True)
def executor_batch_4_8(mp, quick):
    """The zoo at batches 4 and 8."""
    return executor_table(mp, quick, ["--batches", "4,8", "--dtr-logs", ""], ("zoo",))


@table("executor-batch-32-64", minutes=15, deterministic=True)
def executor_batch_32_64(mp, quick):
    """mobilenet, plain20, transformer and resnet50 at batches 32 and 64."""
    return executor_table(mp, quick, ["--batches", "32,64", "--models", "mobilenet,plain20,transformer,resnet50",
                                      "--dtr-logs", ""], ("zoo",))


@table("executor-batch-32-64-large", minutes=30, deterministic=True)
def executor_batch_32_64_large(mp, quick):
    """vgg16, inception_v3 and densenet121 at batches 32 and 64, arenas up to 12 GiB."""
    return executor_table(mp, quick, ["--batches", "32,64", "--models", "vgg16,inception_v3,densenet121",
                                      "--dtr-logs", "", "--max-arena-gib", "12"], ("zoo",))


@table("executor-resnet50", file="docs/executor.md", minutes=0.2, deterministic=True)
def executor_resnet50(mp, quick):
    """docs/executor.md's worked example: ResNet-50 at batch 2, tsplit at 60 % and dtr at 75 %, run on the host."""
    runs = [("tsplit", "60%")] if quick else [("tsplit", "60%"), ("dtr", "75%")]
    head = ["planner, budget", "arena / budget", "live peak", "high water", "compactions", "compacted",
            "pinned compactions"]
    rows = []
    for planner, budget in runs:
        r = mp.json("execute", "--model", "resnet50", "--batch", "2", "--device", "titan-rtx", "--budget", budget,
                    "--planner", planner)
        if not r["ok"]:
            raise RuntimeError(f"memplan execute --planner {planner} --budget {budget}: {r.get('failure', '')}")
        rows.append([f"{planner}, {budget[:-1]} %", f"{r['arena_bytes']:,} / {r['budget_bytes']:,} B",
                     f"{r['peak_live_bytes']:,} B", f"{r['arena_high_water_bytes']:,} B", r["compactions"],
                     f"{r['compacted_bytes']:,} B", r["pinned_compactions"]])
    return table_md(head, rows)
