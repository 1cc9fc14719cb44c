"""The fixed-strategy baselines (vDNN, sqrt(n) checkpointing, SuperNeurons) side by side on titan-rtx."""
from . import fmt
from .registry import table

PLANNERS = ["vdnn-conv", "vdnn-all", "checkpoint", "superneurons"]
CASES = [("vgg16", 420), ("resnet50", 500)]


@table("baselines-compare", minutes=0.2)
def compare(mp, quick):
    """The baselines at one batch each on titan-rtx (24 GiB): peak, time, what they swap and recompute."""
    rows = []
    for model, batch in CASES[: 1 if quick else None]:
        found = mp.rows("compare", "--model", model, "--batch", batch, "--device", "titan-rtx", "--budget", "24GiB",
                        "--planners", ",".join(PLANNERS))
        for i, p in enumerate(PLANNERS):
            r = found[p]
            label = f"{model} b{batch}" if i == 0 else ""
            if not r["feasible"]:
                rows.append([label, p, "-", "-", "-", "-", "-"])
                continue
            rows.append([label, p, fmt.gib(r["peak_bytes"]), fmt.ms(r["time_s"]), fmt.pct(r["overhead"]),
                         fmt.gib(r["swapped_bytes"]), f"{r['recomputed_ops']:,}"])
    return fmt.table(["model", "planner", "peak", "time ms", "overhead", "swapped", "recomputed ops"], rows,
                     numeric_from=2)
