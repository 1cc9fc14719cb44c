"""TSPLIT (ICDE'22) on titan-rtx: Tables IV and V, Fig. 14a."""
from . import batches, figures, fmt
from .registry import table

PLANNERS = ["none", "vdnn-conv", "vdnn-all", "checkpoint", "superneurons", "tsplit-nosplit", "tsplit"]
TSPLITS = ("tsplit-nosplit", "tsplit")


def models(quick):
    return list(figures.TSPLIT_TABLE4)[: 1 if quick else None]


def tsplit_first(rows, planners, key="max_batch"):
    return bool(set(TSPLITS) & batches.winners(rows, planners, key))


@table("tsplit-table4", minutes=40)
def table4(mp, quick):
    """TSPLIT Table IV: the largest batch on titan-rtx (24 GiB), and at <= 100 % overhead."""
    ms = models(quick)
    free, floor = batches.search(mp, ms, "titan-rtx", PLANNERS)
    head = ["model", *PLANNERS, *[f"≤ 100 %: {p}" for p in PLANNERS[1:]],
            "paper: Base / vDNN-conv / vDNN-all / Checkpoints / SuperNeurons / TSPLIT"]
    rows = [[m, *batches.cells(free[m], PLANNERS), *batches.cells(floor[m], PLANNERS[1:]), figures.TSPLIT_TABLE4[m]]
            for m in ms]
    first = [m for m in ms if tsplit_first(free[m], PLANNERS)]
    first_floor = [m for m in ms if tsplit_first(floor[m], PLANNERS[1:])]
    split = [m for m in ms if batches.batch_of(free[m]["tsplit"]) > batches.batch_of(free[m]["tsplit-nosplit"])]
    return [*fmt.table(head, rows, numeric_from=1), "",
            "The paper's claim, TSPLIT's batch the largest: " + fmt.claim("holds", first, ms)
            + "; at ≤ 100 % overhead " + fmt.claim("it holds", first_floor, ms)
            + ". Split itself (`tsplit` above `tsplit-nosplit`): " + fmt.claim("ahead", split, ms) + "."]


@table("tsplit-table5", minutes=11)
def table5(mp, quick):
    """TSPLIT Table V: the largest width factor at batch 16 on titan-rtx, with the state tsplit keeps in host memory."""
    ms = models(quick)
    rows, first = [], []
    for m in ms:
        found = mp.rows("maxbatch", "--model", m, "--device", "titan-rtx", "--batch", "16", "--search", "scale",
                        "--planners", ",".join(PLANNERS))
        if tsplit_first(found, PLANNERS, "max_scale"):
            first.append(m)
        k = batches.batch_of(found["tsplit"], "max_scale")
        state = ""
        if k:
            r = mp.json("plan", "--model", m, "--batch", "16", "--scale", k, "--device", "titan-rtx",
                        "--budget", "24GiB", "--planner", "tsplit")
            state = f"{fmt.gib(r['offloaded_state_bytes'])}; {fmt.gib(r['host_bytes'])}"
        rows.append([m, *batches.cells(found, PLANNERS, "max_scale"), state, figures.TSPLIT_TABLE5[m]])
    head = ["model", *PLANNERS, "tsplit's state in host memory between iterations; host memory its plan needs",
            "paper: Base / vDNN-conv / vDNN-all / Checkpoints / SuperNeurons / TSPLIT"]
    return [*fmt.table(head, rows, numeric_from=1), "",
            "The paper's claim, TSPLIT's width the largest: " + fmt.claim("holds", first, ms) + "."]


@table("tsplit-table5-host", minutes=13)
def table5_host(mp, quick):
    """TSPLIT Table V with 128 GiB of host memory (`--host-memory`): a plan that needs more does not fit."""
    rows = []
    for m in models(quick):
        found = mp.rows("maxbatch", "--model", m, "--device", "titan-rtx", "--batch", "16", "--search", "scale",
                        "--planners", "vdnn-all,tsplit", "--host-memory", "128GiB")
        cells = []
        for p in ("vdnn-all", "tsplit"):
            r = found[p]
            k = batches.batch_of(r, "max_scale")
            cells.append(f"{k} ({fmt.pct(r['overhead'])}; {fmt.gib(r['host_bytes'])}, "
                         f"{fmt.gib(r['offloaded_state_bytes'])})" if k else "0")
        rows.append([m, *cells])
    return fmt.table(["model", "vdnn-all (overhead; host memory, of it offloaded state)",
                      "tsplit (overhead; host memory, of it offloaded state)"], rows, numeric_from=1)


FIG14A_PLANNERS = ["superneurons", "tsplit-nosplit", "tsplit"]


def ratio(a, b):
    return f"{a / b:.2f}x" if b else "∞"


@table("tsplit-fig14a", minutes=40)
def fig14a(mp, quick):
    """TSPLIT Fig. 14a: the largest batch within 67 % and 100 % overhead (60 % and 50 % of the base throughput)."""
    rows, order = [], []
    for m in ["resnet101", "vgg16"][: 1 if quick else None]:
        for limit in ("0.67", "1"):
            found = mp.rows("maxbatch", "--model", m, "--device", "titan-rtx", "--max-overhead", limit,
                            "--planners", ",".join(FIG14A_PLANNERS))
            b = {p: batches.batch_of(found[p]) for p in FIG14A_PLANNERS}
            rows.append([m, limit, *batches.cells(found, FIG14A_PLANNERS),
                         ratio(b["tsplit"], b["superneurons"]), ratio(b["tsplit"], b["tsplit-nosplit"])])
            if b["tsplit"] > b["tsplit-nosplit"] > b["superneurons"] > 0:
                order.append(f"{m} at {limit}")
    head = ["model", "max overhead", *FIG14A_PLANNERS,
            f"tsplit / superneurons (paper {figures.TSPLIT_FIG14A['over superneurons']})",
            f"tsplit / tsplit-nosplit (paper {figures.TSPLIT_FIG14A['over tsplit-nosplit']})"]
    cases = [f"{r[0]} at {r[1]}" for r in rows]
    return [*fmt.table(head, rows, numeric_from=2), "",
            "The paper's order, TSPLIT > TSPLIT without split > SuperNeurons > 0: " + fmt.claim("holds", order, cases) + "."]
