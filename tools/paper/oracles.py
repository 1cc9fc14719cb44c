"""The exact oracle revolve (Griewank and Walther's binomial checkpointing)
on a chain of identical layers: with s slots it recomputes t(l, s) - (l - 1)
ops at a live peak of (s + 2) A + G (planners/oracles/revolve.hpp); the
registered planner lays the plan out in an arena of at most one G more."""
import json
import tempfile

from . import fmt
from .registry import table

LAYERS = 24
STATE, GRADIENT = 100, 10  # A: x and every a_i; G: every g_i (bytes)
FORWARD_US, BACKWARD_US = 10, 20  # f_i; the loss and every b_i
SLOTS = [1, 2, 3, 4, 6, 12, 23]


def layer_chain(l):
    """tests/test_oracles.cpp's chain as a memplan-graph: f_i: a_{i-1} -> a_i, loss: a_l -> g_l,
    b_i: g_i, a_{i-1} -> g_{i-1}."""
    tensors = [dict(name="x", bytes=STATE, kind="input")]
    tensors += [dict(name=f"a{i}", bytes=STATE, kind="activation") for i in range(1, l + 1)]
    grad = {i: len(tensors) + (l - i) for i in range(l, -1, -1)}
    tensors += [dict(name=f"g{i}", bytes=GRADIENT, kind="gradient") for i in range(l, -1, -1)]
    ops = [dict(name=f"f{i}", type="layer", phase="forward", time_us=FORWARD_US, inputs=[i - 1], outputs=[i])
           for i in range(1, l + 1)]
    ops.append(dict(name="loss", type="loss", phase="backward", time_us=BACKWARD_US, inputs=[l], outputs=[grad[l]]))
    ops += [dict(name=f"b{i}", type="layer", phase="backward", time_us=BACKWARD_US, inputs=[grad[i], i - 1],
                 outputs=[grad[i - 1]]) for i in range(l, 0, -1)]
    for k, t in enumerate(tensors):
        t["id"] = k
    for k, o in enumerate(ops):
        o["id"] = k
    return dict(format="memplan-graph", version=1, name=f"chain-{l}", tensors=tensors, ops=ops)


def griewank(l, s):
    """The least forward steps to reverse l steps with s slots, by Griewank's recursion:
    t(1, s) = 0, t(l, 1) = l(l-1)/2, t(l, s) = min_m m + t(l-m, s-1) + t(m, s)."""
    t = [[0] * (s + 1) for _ in range(l + 1)]
    for i in range(2, l + 1):
        t[i][1] = i * (i - 1) // 2
        for j in range(2, s + 1):
            t[i][j] = min(m + t[i - m][j - 1] + t[m][j] for m in range(1, i))
    return t[l][s]


@table("oracles-revolve", minutes=0.1)
def revolve(mp, quick):
    """revolve on a 24-layer chain: recomputations and time per slot count, against Griewank's recursion."""
    rows, exact = [], True
    with tempfile.TemporaryDirectory() as folder:
        graph, profile = f"{folder}/chain-{LAYERS}.json", f"{folder}/byte-aligned.json"
        with open(graph, "w") as f:
            json.dump(layer_chain(LAYERS), f)
        with open(profile, "w") as f:  # the chain's 100-byte tensors, not rounded up to 256
            json.dump({"name": "titan-rtx, byte-aligned", "alignment_bytes": 1}, f)
        device = ["--device", "titan-rtx", "--device-profile", profile]
        for s in SLOTS[:2] if quick else SLOTS:
            live, budget = (s + 2) * STATE + GRADIENT, (s + 2) * STATE + 2 * GRADIENT
            forward = griewank(LAYERS, s)
            by_slots, by_budget = (mp.json("plan", "--graph", graph, *device, "--budget", budget,
                                           "--planner", "revolve", *extra) for extra in (["--slots", s], []))
            exact &= all(r["feasible"] and r["recomputed_ops"] == forward - (LAYERS - 1) and
                         r["peak_live_bytes"] == live for r in (by_slots, by_budget))
            rows.append([s, f"{budget:,} B", forward, by_slots["recomputed_ops"], f"{by_slots['time_s'] * 1e6:,.0f}",
                         f"{by_slots['peak_live_bytes']:,} B", f"{by_slots['arena_bytes']:,} B"])
    mp.commands[:] = [c.replace(folder, "$TMP") for c in mp.commands]
    verdict = "on every row" if exact else "NOT on every row"
    return [*fmt.table(["slots s", "budget (s+2)A+2G", "t(24, s)", "recomputed ops", "time µs",
                        "live peak", "arena"], rows, numeric_from=1), "",
            f"t(24, s) - 23 recomputations at a live peak of exactly (s + 2) A + G, with `--slots s` and from "
            f"the budget alone: {verdict}."]
