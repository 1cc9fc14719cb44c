"""HOME: Table 2 against Capuchin at its largest batch, Table 3's search time (CIFAR-10, rtx-2080ti)."""
import json
import os
import pathlib
import subprocess

from . import batches, figures, fmt, speed
from .registry import table

DEVICE = ("--cifar", "--device", "rtx-2080ti")
# Bisection only: at CIFAR batches of 700-57,000 a 5 % window is 35-2,800 plans a search.
BISECT = ("--window", "0")
SEEDS = "capuchin,tsplit-nosplit"
SWARM = ("--iterations", "50", "--particles", "50", "--threads", "1", "--time-limit", "60")


def fitness(time_s, excess_bytes):
    """A placement's fitness as HOME ranks it: its time, or how far it exceeds the budget."""
    return f"{excess_bytes / 2**20:,.0f} MiB over" if excess_bytes else f"{time_s * 1e3:,.0f} ms"


def home_at(mp, model, batch, *seed):
    r = mp.json("plan", "--model", model, *DEVICE, "--batch", batch, "--budget", "11GiB", "--planner", "home",
                *seed, *SWARM)
    last = r["history"][-1] if r.get("history") else {"time_s": 0, "excess_bytes": 0}
    plan = f"{r['time_s'] * 1e3:,.0f} ms" if r["feasible"] else "-"
    return r, plan, fitness(last["time_s"], last["excess_bytes"])


@table("home-table2", minutes=35, deterministic=False)
def table2(mp, quick):
    """HOME Table 2: home (the swarm alone, and seeded) against capuchin at capuchin's largest batch B; the largest
    batches without an overhead limit and at <= 100 % (half the throughput, issue 24)."""
    rows, faster, larger, larger_floor = [], [], [], []
    models = list(figures.HOME_TABLE2)[: 1 if quick else None]
    seeded_search = ("--seed-with", SEEDS, *BISECT, "--iterations", "10", "--particles", "10", "--threads", "1",
                     "--time-limit", "5")
    for m in models:
        found = mp.rows("maxbatch", "--model", m, *DEVICE, "--planners", "none,capuchin", *BISECT)
        b = found["capuchin"]["max_batch"]
        seeded = mp.rows("maxbatch", "--model", m, *DEVICE, "--planners", "home", *seeded_search)["home"]
        cap_floor = mp.rows("maxbatch", "--model", m, *DEVICE, "--planners", "capuchin", *BISECT,
                            "--max-overhead", "1")["capuchin"]
        seeded_floor = mp.rows("maxbatch", "--model", m, *DEVICE, "--planners", "home", *seeded_search,
                               "--max-overhead", "1")["home"]
        cap = mp.rows("compare", "--model", m, *DEVICE, "--batch", b, "--budget", "11GiB",
                      "--planners", "capuchin")["capuchin"]
        unseeded, unseeded_plan, _ = home_at(mp, m, b)
        _, seeded_plan, swarm = home_at(mp, m, b, "--seed-with", SEEDS)
        rows.append([m, f"{found['none']['max_batch']:,}", batches.cell(found["capuchin"]), batches.cell(seeded),
                     batches.cell(cap_floor), batches.cell(seeded_floor), f"{cap['time_s'] * 1e3:,.0f} ms",
                     unseeded_plan, seeded_plan, swarm, figures.HOME_TABLE2[m]])
        if unseeded["feasible"] and unseeded["time_s"] <= cap["time_s"]:
            faster.append(m)
        if batches.batch_of(seeded) >= b:
            larger.append(m)
        if batches.batch_of(seeded_floor) >= batches.batch_of(cap_floor):
            larger_floor.append(m)
    head = ["model", "none max batch", "capuchin max batch (B)", "home max batch (seeded, 10 x 10)",
            "capuchin at <= 100 %", "home (seeded) at <= 100 %", "capuchin at B", "home at B (the swarm alone)",
            "home seeded at B", "the seeded swarm's best", "HOME paper: batch Cap. / HOME; throughput Cap. / HOME"]
    return [*fmt.table(head, rows, numeric_from=1), "",
            "The paper's claims: HOME's largest batch at least Capuchin's "
            + fmt.claim("holds", larger, models) + " without a limit, "
            + fmt.claim("holds", larger_floor, models) + " at <= 100 % overhead; "
            "HOME at least as fast as Capuchin at B (the swarm alone): " + fmt.claim("holds", faster, models) + "."]


def seconds(run, key):
    """A Google Benchmark time in seconds."""
    return run[key] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[run["time_unit"]]


def search_limit_s(model):
    """Issue 29's limit on a full search: Table 3's time / 10 (/ 2 for our ResNet-50, larger than HOME's)."""
    return figures.HOME_TABLE3[model][1] / (2 if model == "resnet50" else 10)


@table("home-table3", minutes=6, deterministic=False)
def table3(mp, quick):
    """HOME Table 3: time per evaluation and per full search (500 iterations x 500 particles, seed 1, 2 threads),
    each search checked against its golden result."""
    bench = str(mp.build / "bench" / "bench_home")
    filt = "bm_evaluate|bm_emit|bm_walk|bm_search/[0-3]/" if quick else "bm_evaluate|bm_emit|bm_walk|bm_search"
    shown = os.path.relpath(bench, pathlib.Path(__file__).resolve().parents[2])
    mp.commands.append(f"{shown} --benchmark_filter='{filt}' --benchmark_format=json")
    out = subprocess.run([bench, f"--benchmark_filter={filt}", "--benchmark_format=json"], capture_output=True,
                         text=True, check=True)
    runs = json.loads(out.stdout)["benchmarks"]
    evaluate, emit, walk = ({r["label"]: r for r in runs if r["name"].startswith(b + "/")}
                            for b in ("bm_evaluate", "bm_emit", "bm_walk"))
    rows, within = [], []
    for r in (r for r in runs if r["name"].startswith("bm_search")):
        label = r["label"]
        model = label.split(" b")[0]
        golden = "no: " + r["error_message"] if r.get("error_occurred") else "yes"
        if r.get("error_occurred"):
            rows.append([label] + ["-"] * 14 + [golden])
            continue
        per_eval_us, emit_us, walk_us = (seconds(b[label], "real_time") * 1e6 for b in (evaluate, emit, walk))
        paper_eval_ms, paper_search_s = figures.HOME_TABLE3[model]
        wall_s, cpu_s = seconds(r, "real_time"), seconds(r, "cpu_time")
        if wall_s <= search_limit_s(model):
            within.append(model)
        sims = r["simulations"]
        rows.append([label, f"{int(r['feature_maps'])}", f"{int(r['fixed_point'])}",
                     f"{r['evaluations'] / 1e3:,.0f} k", f"{r['floor_decisions'] / 1e3:,.0f} k", f"{sims / 1e3:,.1f} k",
                     f"{100 * r['bound_hits'] / sims:.0f} %", f"{per_eval_us:,.1f} µs", f"{emit_us:,.1f} µs",
                     f"{walk_us:,.1f} µs",
                     f"{cpu_s / sims * 1e6:,.0f} µs", f"{paper_eval_ms} ms", f"{wall_s:,.2f} s ({cpu_s:,.1f} s CPU)",
                     f"{paper_search_s} s", f"{search_limit_s(model):g} s", golden])
    head = ["model (batch)", "feature maps", "fixed point at", "evaluations", "lost by a floor", "simulations",
            "proven over by the bound",
            "evaluator per random placement", "its plan's emission", "the simulator's plan walk alone",
            "per simulation in the search", "HOME Table 3 evaluator",
            "search wall", "HOME Table 3 search", "issue 29 limit", "golden result"]
    models = [r[0].split(" b")[0] for r in rows]
    # The machine's speed in the same sitting: wall times move with it.
    reference = speed.micros(speed.medians(mp, "bench_simulate", ["bm_simulate/1000"])["bm_simulate/1000"], "real_time")
    return fmt.table(head, rows, numeric_from=1) + [
        "", "Searches within issue 29's limit: " + fmt.claim("within", within, models) + ".",
        "", f"The machine in the same sitting: `bm_simulate/1000` (the simulator-speed table) took {speed.duration(reference)}."]
