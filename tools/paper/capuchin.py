"""Capuchin (ASPLOS'20): Table 2 and §6.3.2 on the P100."""
import math

from . import batches, figures, fmt
from .registry import table

PLANNERS = ["none", "vdnn-all", "checkpoint", "capuchin"]


def models(quick):
    return list(figures.CAPUCHIN_TABLE2)[: 1 if quick else None]


@table("capuchin-table2", minutes=15)
def table2(mp, quick):
    """Capuchin Table 2: the largest batch on the P100 (16 GiB), and at <= 100 % overhead."""
    ms = models(quick)
    free, floor = batches.search(mp, ms, "p100", PLANNERS)
    head = ["model", *PLANNERS, *[f"≤ 100 %: {p}" for p in PLANNERS[1:]], "paper: TF / vDNN / OpenAI / Capuchin"]
    rows = [[m, *batches.cells(free[m], PLANNERS), *batches.cells(floor[m], PLANNERS[1:]), figures.CAPUCHIN_TABLE2[m]]
            for m in ms]
    first = [m for m in ms if "capuchin" in batches.winners(free[m], PLANNERS)]
    first_floor = [m for m in ms if "capuchin" in batches.winners(floor[m], PLANNERS[1:])]
    return [*fmt.table(head, rows, numeric_from=1), "",
            "The paper's claim, Capuchin's batch the largest: " + fmt.claim("holds", first, ms)
            + "; at ≤ 100 % overhead " + fmt.claim("it holds", first_floor, ms) + "."]


@table("capuchin-swaps", minutes=0.1)
def swaps(mp, quick):
    """Capuchin §6.3.2: at 1.2x the unplanned largest batch, what capuchin swaps and what it costs."""
    ms = models(quick)
    rows, within = [], []
    for m in ms:
        none = mp.rows("maxbatch", "--model", m, "--device", "p100", "--planners", "none")["none"]["max_batch"]
        batch = math.floor(1.2 * none)
        r = mp.json("plan", "--model", m, "--batch", batch, "--device", "p100", "--budget", "16GiB",
                    "--planner", "capuchin")
        if not r["feasible"]:
            rows.append([m, f"{batch:,}", "-", "-", "-", "-"])
            continue
        rows.append([m, f"{batch:,}", fmt.gib(r["peak_bytes"]), fmt.gib(r["swapped_bytes"]),
                     f"{r['recomputed_ops']:,}", fmt.pct(r["overhead"])])
        if r["overhead"] <= figures.CAPUCHIN_SWAP_LIMIT:
            within.append(m)
    head = ["model", "batch (1.2 x none)", "peak", "swapped", "recomputed ops", "overhead"]
    return [*fmt.table(head, rows, numeric_from=1), "",
            "The paper's claim, an overhead within 3 % at this batch: " + fmt.claim("holds", within, ms) + "."]
