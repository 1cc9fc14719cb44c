"""Largest-batch cells shared by the Capuchin, DELTA, TSPLIT and HOME tables."""
from . import fmt


def batch_of(row, key="max_batch"):
    return row.get(key, 0) if row else 0


def cell(row, key="max_batch"):
    """`B (o %)`: the batch and the overhead at it; `0` where batch 1 does not fit."""
    if batch_of(row, key) == 0:
        return "0"
    overhead = row.get("overhead")
    return f"{row[key]:,}" + (f" ({fmt.pct(overhead)})" if overhead is not None else "")


def winners(rows, planners, key="max_batch"):
    """The planners of `planners` with the largest batch (none where no batch fits)."""
    best = max(batch_of(rows.get(p), key) for p in planners)
    return {p for p in planners if best > 0 and batch_of(rows.get(p), key) == best}


def cells(rows, planners, key="max_batch"):
    """One cell per planner, the largest in bold."""
    best = winners(rows, planners, key)
    return [fmt.bold(cell(rows.get(p), key), p in best) for p in planners]


def search(mp, models, device, planners, *extra):
    """`maxbatch` per model without an overhead limit, and at <= 100 % overhead (half the
    throughput, issue 24) for the planners that can be slower than `none`."""
    free, floor = {}, {}
    limited = [p for p in planners if p != "none"]
    for m in models:
        free[m] = mp.rows("maxbatch", "--model", m, "--device", device, "--planners", ",".join(planners), *extra)
        floor[m] = mp.rows("maxbatch", "--model", m, "--device", device, "--planners", ",".join(limited),
                           "--max-overhead", "1", *extra) if limited else {}
    return free, floor
