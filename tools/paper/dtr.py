"""DTR (ICLR'21) and DELTA: Tables III-IV and §5.2 on the A100, the DTR logs on the Titan V."""
import pathlib

from . import batches, figures, fmt
from .registry import table

CORPUS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "corpus" / "dtr-logs"
FILTERS = ["base", "lru"]  # DELTA's own filters beside the default `cost` (planners/dtr/delta.hpp)
# DELTA §4.1's testbed reached 35 % of the A100's PCIe 4 links: the device with those links
# (24 and 25 GB/s x 0.35), for the simulator and for DELTA's costs alike.
TESTBED = ("--device-profile", "tools/paper/a100-delta-testbed.json")
# DTR inside PyTorch, on its caching allocator, as DELTA measured it (planners/dtr/dtr.hpp).
CACHING = ("--allocator", "caching")


def allocator_cells(row):
    """The online allocator's fragmentation and cudaMalloc/cudaFree ms, where the plan has them."""
    if not row or not row.get("feasible") or "fragmentation" not in row:
        return ["", ""]
    return [f"{row['fragmentation']:.3f}", f"{row.get('allocator_s', 0) * 1e3:.2f}"]


def at_batch(mp, model, planner, row, *extra):
    """The plan at a row's largest batch, for its allocator figures."""
    if planner == "none" or batches.batch_of(row) == 0:
        return None
    return mp.json("plan", "--model", model, "--batch", row["max_batch"], "--device", "a100", "--budget", "80GiB",
                   "--planner", planner, *extra)


@table("delta-max-batch", minutes=0.2)
def max_batch(mp, quick):
    """DELTA Tables III-IV: the largest batch on one A100 (80 GiB), and at <= 100 % overhead."""
    models = list(figures.DELTA_MAX_BATCH)[: 1 if quick else None]
    variants = [("none", ()), ("dtr", ()), ("dtr", CACHING), ("delta", ()), ("delta", TESTBED)] + \
               [("delta", ("--filter", f)) for f in FILTERS]
    label = {TESTBED: "`delta`, on links at 35 % (§4.1's testbed)"}
    paper = {("dtr", ()): "-"}  # the paper's DTR ran on PyTorch's allocator: beside `dtr --allocator caching`
    rows, order, order_floor, testbed, above_simulator = [], [], [], [], []
    for m in models:
        found = {}
        for planner, extra in variants:
            free, floor = batches.search(mp, [m], "a100", [planner], *extra)
            found[(planner, extra)] = (free[m][planner], floor[m].get(planner))
            plan = at_batch(mp, m, planner, free[m][planner], *extra)
            rows.append([m if planner == "none" else "", label.get(extra, f"`{' '.join((planner, *extra))}`"),
                         paper.get((planner, extra)) or (figures.DELTA_MAX_BATCH[m].get(planner, "")
                                                         if extra in ((), CACHING) else "-"),
                         batches.cell(free[m][planner]), *allocator_cells(plan),
                         batches.cell(floor[m].get(planner)) if planner != "none" else ""])
        none, delta = found[("none", ())], found[("delta", ())]
        dtr, simulated = found[("dtr", CACHING)], found[("dtr", ())]
        if batches.batch_of(delta[0]) > batches.batch_of(dtr[0]) > batches.batch_of(none[0]):
            order.append(m)
        if batches.batch_of(found[("delta", TESTBED)][0]) > batches.batch_of(dtr[0]):
            testbed.append(m)
        if batches.batch_of(delta[1]) > batches.batch_of(dtr[1]) > batches.batch_of(none[0]):
            order_floor.append(m)
        if batches.batch_of(delta[0]) > batches.batch_of(simulated[0]):
            above_simulator.append(m)
    head = ["model", "planner", "paper max batch", "max batch (overhead)", "frag.", "alloc ms", "≤ 100 %"]
    return [*fmt.table(head, rows, numeric_from=2), "",
            "The paper's order, DELTA > DTR > baseline (default filter; DTR on PyTorch's caching allocator, as "
            "DELTA ran it): " + fmt.claim("holds", order, models)
            + "; at ≤ 100 % overhead " + fmt.claim("it holds", order_floor, models)
            + "; DELTA on its testbed's links above DTR: " + fmt.claim("holds", testbed, models)
            + "; DELTA above DTR's simulator's `dtr` (no fragmentation, laid out by memplan): "
            + fmt.claim("holds", above_simulator, models) + "."]


SAVING_PLANNERS = ["none", "dtr", "delta"]


@table("delta-saving", minutes=0.1)
def saving(mp, quick):
    """DELTA §5.2: ResNet-50 at batch 256 on the A100 at 40 % of the unplanned peak."""
    compare = ("compare", "--model", "resnet50", "--batch", "256", "--device", "a100", "--budget", "40%")
    rows = mp.rows(*compare, "--planners", ",".join(SAVING_PLANNERS))
    rows["dtr --allocator caching"] = mp.rows(*compare, "--planners", "dtr", *CACHING)["dtr"]
    out = []
    for p in [*SAVING_PLANNERS, "dtr --allocator caching"]:
        r = rows[p]
        if not r["feasible"]:
            out.append([p, "no", "-", "-", "-", "-", "-", "-", "", ""])
            continue
        out.append([p, "yes", fmt.gib(r["arena_bytes"]), fmt.gib(r["peak_live_bytes"]), fmt.ms(r["time_s"]),
                    fmt.pct(r["overhead"]), fmt.gib(r["swapped_bytes"]), f"{r['recomputed_ops']:,}",
                    *allocator_cells(r)])
    head = ["planner", "feasible", "arena", "live peak", "time ms", "overhead", "swapped", "recomputed", "frag.",
            "alloc ms"]
    baseline = rows["none"]["baseline_peak_bytes"]
    return [f"Baseline peak {fmt.gib(baseline)}; the paper's DELTA: {figures.DELTA_SAVING}.", "",
            *fmt.table(head, out, numeric_from=2)]


SMALLEST = [("dtr", ()), ("dtr", CACHING), ("delta", ())] + [("delta", ("--filter", f)) for f in ("lru", "greedy", "base")] + \
           [("tsplit", ()), ("capuchin", ()), ("checkpoint", ())]


def smallest_budget(mp, planner, extra):
    """The smallest budget, in tenths of a percent of the unplanned peak, at which `planner` fits,
    by bisection over 1.0-100.0 % (taking feasibility to be monotone in the budget), and its plan."""
    def plan(tenths):
        return mp.json("plan", "--model", "resnet50", "--batch", "256", "--device", "a100",
                       "--budget", f"{tenths / 10:g}%", "--planner", planner, *extra)

    lo, hi, best = 10, 1000, None  # hi fits (every planner keeps all at 100 %)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        r = plan(mid)
        if r["feasible"]:
            hi, best = mid, r
        else:
            lo = mid
    return hi, best or plan(hi)


@table("delta-smallest-budget", minutes=0.3)
def smallest(mp, quick):
    """DELTA §5.2: the smallest budget each planner meets for ResNet-50 at batch 256 on the A100."""
    out = []
    for planner, extra in SMALLEST[: 1 if quick else None]:
        tenths, r = smallest_budget(mp, planner, extra)
        out.append([f"`{' '.join((planner, *extra))}`", f"{tenths / 10:.1f} %", fmt.gib(r["peak_bytes"]),
                    fmt.pct(1 - r["peak_bytes"] / r["baseline_peak_bytes"]), fmt.pct(r["overhead"]),
                    *allocator_cells(r)])
    head = ["planner", "smallest budget", "peak", "saving vs baseline", "overhead there", "frag.", "alloc ms"]
    return fmt.table(head, out, numeric_from=1)


# The logs (prefix: row label, no-eviction peak in bytes as DTR counts it: io::dtr_log::refcount_peak;
# tests/test_dtr_log.cpp checks them against the corpus README).
LOGS = {
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
LOG_PLANNERS = ["dtr", "delta", "capuchin", "tsplit"]


def slowdown(row):
    return f"{row['time_s'] / row['baseline_time_s']:.3f}" if row["feasible"] else "OOM"


def close(mine, simulator):
    """Issue 24's test: within max(0.01, 10 % of the simulator's overhead)."""
    return abs(mine - simulator) <= max(0.01, 0.1 * (simulator - 1))


@table("dtr-logs", minutes=0.7)
def logs(mp, quick):
    """The DTR logs on titan-v at 0.3-0.9 of each log's no-eviction peak: slowdown per planner, beside DTR's
    simulator (tools/dtr_simulator.py)."""
    if not CORPUS.is_dir():
        raise FileNotFoundError(f"{CORPUS} is absent")
    import dtr_simulator  # tools/, beside paper_tables
    out, matched, fits = [], 0, 0
    for prefix, (label, peak) in list(LOGS.items())[: 1 if quick else None]:
        log = next(CORPUS.glob(prefix + "-*.log"))
        schedule = dtr_simulator.read_log(log)
        sim_peak, compute = dtr_simulator.baseline(schedule)
        assert sim_peak == peak, (prefix, sim_peak, peak)
        for i, ratio in enumerate(RATIOS):
            budget = int(ratio * peak)
            sim = dtr_simulator.slowdown(schedule, budget, compute)
            path = f"../shared/corpus/dtr-logs/{log.name}"
            rows = mp.rows("compare", "--dtr-log", path, "--device", "titan-v", "--budget", budget,
                           "--planners", ",".join(LOG_PLANNERS), "--time-limit", "60")
            caching = mp.rows("compare", "--dtr-log", path, "--device", "titan-v", "--budget", budget,
                              "--planners", "dtr", "--allocator", "caching")["dtr"]
            mark = ""
            if not isinstance(sim, str):
                fits += 1
                mine = rows["dtr"]["time_s"] / rows["dtr"]["baseline_time_s"] if rows["dtr"]["feasible"] else None
                matched += mine is not None and close(mine, sim)
                mark = "yes" if mine is not None and close(mine, sim) else "no"
            readme = figures.DTR_SIM.get(prefix)
            out.append([label if i == 0 else "", ratio, sim if isinstance(sim, str) else f"{sim:.3f}",
                        f"{readme[i]:.3f}" if readme else "", slowdown(rows["dtr"]), mark,
                        slowdown(caching), *allocator_cells(caching),
                        slowdown(rows["delta"]), *allocator_cells(rows["delta"]),
                        slowdown(rows["capuchin"]), slowdown(rows["tsplit"])])
    head = ["log", "ratio", "DTR's simulator", "corpus README", "`dtr`", "close", "`dtr --allocator caching`",
            "frag.", "alloc ms", "`delta`", "frag.", "alloc ms", "`capuchin`", "`tsplit`"]
    return ["DTR's simulator: `tools/dtr_simulator.py LOG` (its rules restated; thrashed: recompute past "
            "the compute of the iteration, the prototype's limit).", "",
            *fmt.table(head, out, numeric_from=1), "",
            f"`dtr` within max(0.01, 10 % of the overhead) of DTR's simulator (issue 24): {matched} of {fits} cells."]
