"""Tables that are memplan's own, not a paper's: what the core header costs
a consumer to compile (issue 26), how fast the simulator (issue 29) and an
online decision are, and how long Capuchin and TSPLIT take to plan (the
benchmarks, and TSPLIT's command at the edge of Table IV)."""
import json
import subprocess
import time

from . import fmt
from .fmt import ROOT, row_cells, shown
from .registry import table

# Issue 26: the core umbrella compiles in under 3 s of CPU with an empty main.
CORE_COMPILE_GOAL_S = 3.0
# Issue 29: a 1,000-op plan with swaps and recomputes simulates in under 50 µs.
SIMULATE_GOAL_US = 50.0


@table("compile-cost", minutes=2, deterministic=False)
def compile_cost(mp, quick):
    """What an include costs a consumer: CPU seconds to compile an empty main with each umbrella (g++, best of 3)."""
    script = ROOT / "bench" / "compile_cost"
    args = [str(script)] + (["--quick"] if quick else [])
    mp.commands.append(" ".join([shown(script)] + args[1:]))
    out = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    cells = [row_cells(line) for line in out.split("\n") if line.startswith("| `")]
    rows = [[header, *(f"{float(s):.2f}" for s in times)] for header, *times in cells]
    core = [float(s) for s in next(r for r in rows if "memplan/memplan.hpp" in r[0])[1:]]
    verdict = "met" if all(s < CORE_COMPILE_GOAL_S for s in core) else \
        f"not met ({' and '.join(f'{s:.2f} s' for s in core)})"
    return fmt.table(["header", "-O0 CPU s", "-O2 CPU s"], rows, numeric_from=1) + [
        "", f"Issue 26's goal, the core under {CORE_COMPILE_GOAL_S:g} s of CPU at -O0 and -O2: {verdict}."]


# (benchmark name, label): the rows of the simulator table, in order.
SIMULATOR_ROWS = [
    ("bm_simulate/1000", "`bm_simulate` (swaps + recomputes)"),
    ("bm_simulate/10000", "`bm_simulate`"),
    ("bm_simulate/100000", "`bm_simulate`"),
    ("bm_simulate_keep_all/1000", "`bm_simulate_keep_all`"),
    ("bm_simulate_keep_all/100000", "`bm_simulate_keep_all`"),
    ("bm_simulate_recorded/1000", "`bm_simulate_recorded` (timeline + memory curve)"),
    ("bm_walk/1000", "`bm_walk` (the plan walk alone: pass 1 without the resolver's work)"),
    ("bm_validate/1000", "`bm_validate` (the independent validator, O(n log n))"),
    ("bm_validate/100000", "`bm_validate`"),
]


def micros(run, key):
    """A Google Benchmark run's `key` time in µs."""
    return run[key] * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[run["time_unit"]]


def duration(us):
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"


def release_bench(mp, name):
    """A benchmark binary: the Release build's (timings want it) when present, else mp's build's."""
    release = ROOT / "build" / "default" / "bench" / name
    return release if release.exists() else mp.build / "bench" / name


def bench_json(mp, name, runs, repetitions=3, min_time=0.2, aggregates_only=True):
    """Runs benchmark binary `name` on `runs` (exact names): its JSON entries."""
    bench = release_bench(mp, name)
    args = [str(bench), "--benchmark_filter=" + "|".join(f"^{r}$" for r in runs), f"--benchmark_min_time={min_time:g}",
            f"--benchmark_repetitions={repetitions}", "--benchmark_format=json"]
    if aggregates_only:
        args.insert(-1, "--benchmark_report_aggregates_only=true")
    mp.commands.append(" ".join([shown(bench)] + [a if "|" not in a and "^" not in a else f"'{a}'" for a in args[1:]]))
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)["benchmarks"]


def medians(mp, name, runs, repetitions=3, min_time=0.2):
    """The median run of each of `runs`, by name."""
    out = bench_json(mp, name, runs, repetitions, min_time)
    return {r["run_name"]: r for r in out if r.get("aggregate_name") == "median"}


@table("simulator-speed", minutes=1, deterministic=False)
def simulator_speed(mp, quick):
    """Simulator throughput: a synthetic chain's plan with swaps and recomputes, and the keep-all plan (median of 3)."""
    wanted = SIMULATOR_ROWS[:1] if quick else SIMULATOR_ROWS
    median = medians(mp, "bench_simulate", [name for name, _ in wanted])
    rows = []
    for name, label in wanted:
        r = median[name]
        rows.append([label, f"{int(r['ops']):,}", f"{int(r['actions']):,}", duration(micros(r, "real_time")),
                     f"{r['items_per_second'] / 1e6:.1f} M"])
    head = ["benchmark", "ops", "actions", "time per simulation", "actions / s"]
    first = micros(median["bm_simulate/1000"], "real_time")
    verdict = "met" if first < SIMULATE_GOAL_US else f"not met ({duration(first)})"
    return fmt.table(head, rows, numeric_from=1) + [
        "", f"Issue 29's goal, 1,000 ops with swaps and recomputes in under {SIMULATE_GOAL_US:g} µs: {verdict}."]


# The online policies' goal: one decision over 10,000 candidates in under 10 µs of CPU.
DECISION_GOAL_US = 10.0


@table("online-decision", minutes=1, deterministic=False)
def online_decision(mp, quick):
    """The cost of one online decision: `choose` over n resident candidates, dtr and delta (median of 5)."""
    policies = [("bm_dtr_decision", "`dtr` (h_DTR)"), ("bm_delta_decision", "`delta` (default `cost` filter)")]
    sizes = [10000] if quick else [1000, 10000, 100000]
    median = medians(mp, "bench_online", [f"{b}/{n}" for b, _ in policies for n in sizes], repetitions=5)
    rows = [[label, f"{int(median[f'{b}/{n}']['candidates']):,}", duration(micros(median[f"{b}/{n}"], "cpu_time")),
             duration(micros(median[f"{b}/{n}"], "real_time"))] for b, label in policies for n in sizes]
    slowest = max(micros(median[f"{b}/10000"], "cpu_time") for b, _ in policies)
    verdict = "met" if slowest < DECISION_GOAL_US else f"not met ({duration(slowest)})"
    return fmt.table(["policy", "candidates", "CPU per decision", "wall"], rows, numeric_from=1) + [
        "", f"The goal, 10,000 candidates in under {DECISION_GOAL_US:g} µs of CPU: {verdict}."]


# Capuchin's planning time goal (issue 6): resnet152 at batch 256 in under 50 ms.
CAPUCHIN_GOAL_MS = 50.0


@table("capuchin-planning-time", minutes=1, deterministic=False)
def capuchin_planning_time(mp, quick):
    """Capuchin's planning time: measured execution, policy, guided iterations and re-plans (median of 3)."""
    runs = ["bm_capuchin/resnet152_b256"] + ([] if quick else ["bm_capuchin/resnet50_b500", "bm_capuchin/bert_base_b300"])
    median = medians(mp, "bench_capuchin", runs, min_time=0.5)
    rows = []
    for name in runs:
        r = median[name]
        model, batch = name.split("/")[1].replace("bert_base", "bert-base").rsplit("_b", 1)
        goal = f" (goal < {CAPUCHIN_GOAL_MS:g} ms)" if name.endswith("resnet152_b256") else ""
        rows.append([f"{model} b{batch}{goal}", f"{int(r['ops']):,}", f"{int(r['actions']):,}",
                     duration(micros(r, "real_time")), duration(micros(r, "cpu_time")),
                     f"{int(r['swaps'])} / {int(r['recomputations'])}", f"{int(r['guided_iterations'])}",
                     f"{int(r['replans'])}"])
    wall_ms = micros(median[runs[0]], "real_time") / 1000
    verdict = "met" if wall_ms < CAPUCHIN_GOAL_MS else "not met"
    head = ["benchmark", "ops", "actions", "wall", "CPU", "swaps / recomputations", "guided iterations", "re-plans"]
    return fmt.table(head, rows, numeric_from=1) + [
        "", f"The goal, resnet152 b256 in under {CAPUCHIN_GOAL_MS:g} ms: {verdict} ({duration(wall_ms * 1000)})."]


# TSPLIT's planning time goals (issue 7), in ms.
TSPLIT_ROWS = [
    ("bm_resnet152_b256/tsplit_nosplit/real_time", "resnet152 b256, tsplit-nosplit", 50),
    ("bm_resnet152_b256/tsplit/real_time", "resnet152 b256, tsplit", 50),
    ("bm_gpt2_100k_ops/tsplit_nosplit/iterations:1/real_time", "gpt2 96k ops, tsplit-nosplit", 2000),
    ("bm_gpt2_100k_ops/tsplit/iterations:1/real_time", "gpt2 96k ops, tsplit", 2000),
]


@table("tsplit-planning-time", minutes=1, deterministic=False)
def tsplit_planning_time(mp, quick):
    """TSPLIT's planning time on resnet152 b256 (24 GiB) and a 96,019-op gpt2 (80 %): wall, fastest-slowest of 3."""
    wanted = TSPLIT_ROWS[:1] if quick else TSPLIT_ROWS
    out = bench_json(mp, "bench_tsplit", [name for name, _, _ in wanted], min_time=0.5, aggregates_only=False)
    rows = []
    for name, label, goal_ms in wanted:
        walls = [micros(r, "real_time") / 1000 for r in out if r["run_name"] == name and r["run_type"] == "iteration"]
        verdict = "met" if max(walls) < goal_ms else "not met"
        rows.append([label, f"{min(walls):,.1f}-{max(walls):,.1f} ms", f"< {goal_ms:,} ms: {verdict}"])
    return fmt.table(["benchmark", "wall", "goal"], rows)


# Table IV's edge (tsplit's largest batches, and resnet101's at <= 100 % overhead):
# where tsplit's feedback and room shrinking run.
TSPLIT_EDGE = [("resnet101", 1888), ("resnet101", 1897), ("inception_v4", 1537), ("transformer", 1037),
               ("resnet50", 1994)]


@table("tsplit-plan-wall", minutes=0.5, deterministic=False)
def tsplit_plan_wall(mp, quick):
    """`memplan plan --planner tsplit` at the edge of TSPLIT Table IV: the command's wall time and its planning time."""
    rows = []
    for model, batch in TSPLIT_EDGE[:1] if quick else TSPLIT_EDGE:
        began = time.monotonic()
        r = mp.json("plan", "--model", model, "--batch", batch, "--device", "titan-rtx", "--budget", "24GiB",
                    "--planner", "tsplit")
        wall = time.monotonic() - began
        rows.append([f"{model}, {batch:,}", "yes" if r["feasible"] else "no", f"{wall:.2f} s",
                     f"{r['planning_time_s']:.2f} s"])
    return fmt.table(["model, batch", "fits", "wall of the command", "planning time"], rows, numeric_from=2)
