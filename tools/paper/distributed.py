"""Issue 28's scale table: one rank of ZeRO-3 data-parallel training of gpt2
and bert-large on 8 and 64 simulated A100s (docs/distributed.md), with and
without memplan: the largest batch per GPU and the largest model at batch 8,
each at most 25 % slower than the same step unplanned, and the iteration
time there."""
from . import fmt
from .registry import table

MODELS = ["gpt2", "bert-large"]
RANKS = [8, 64]
# Mixed precision and Adam, as such models train; a DGX A100's 1 TiB of host
# memory shared by its 8 GPUs bounds what a rank may keep there. The
# throughput floor keeps the comparison fair (issue 24); bisection alone
# (--window 0) keeps TSPLIT's planning at thousands of samples affordable.
SETTING = ["--dtype", "bf16", "--optimizer", "adam", "--cluster", "a100-node", "--parallel", "zero3",
           "--host-memory", "128GiB", "--max-overhead", 0.25, "--window", 0]
PLANNERS = ["none", "checkpoint", "tsplit"]


def runs(planner):
    return "ZeRO-3 alone" if planner == "none" else f"ZeRO-3 + {planner}"


@table("distributed-scale", minutes=3)
def scale(mp, quick):
    """ZeRO-3 ranks of gpt2 and bert-large on 8 and 64 A100s: the largest batch per GPU and model, with and without memplan."""
    batches, models = [], []
    for model in MODELS[:1] if quick else MODELS:
        for ranks in RANKS[:1] if quick else RANKS:
            common = ["--model", model, *SETTING, "--ranks", ranks, "--planners", ",".join(PLANNERS)]
            by_batch = mp.rows("maxbatch", *common)
            by_scale = mp.rows("maxbatch", *common[:-1], "none,tsplit", "--search", "scale", "--batch", 8)
            for planner in PLANNERS:
                b = by_batch[planner]
                batches.append([model, ranks, runs(planner), f"{b['max_batch']:,}", fmt.pct(b["overhead"]),
                                fmt.ms(b["time_s"]), f"{b['max_batch'] / b['time_s']:,.1f}"])
            for planner in ("none", "tsplit"):
                k = by_scale[planner]
                params = mp.json("info", "--model", model, "--scale", k["max_scale"], "--batch", 8, "--dtype", "bf16",
                                 "--optimizer", "adam", "--device", "a100")["parameter_count"]
                models.append([model, ranks, runs(planner), k["max_scale"], f"{params / 1e9:,.2f} B",
                               fmt.pct(k["overhead"]), fmt.ms(k["time_s"])])
    return ["The largest batch per GPU:", "",
            *fmt.table(["model", "A100s", "rank runs", "largest batch per GPU", "overhead", "ms per iteration",
                        "samples/s per GPU"], batches, numeric_from=3), "",
            "The largest model at batch 8 per GPU (`--search scale`: hidden size times the width factor; not "
            "checkpoint, whose √n segments make what fits not monotone in the width, so a bisection lands "
            "anywhere):", "",
            *fmt.table(["model", "A100s", "rank runs", "width factor", "parameters", "overhead",
                        "ms per iteration"], models, numeric_from=3)]
