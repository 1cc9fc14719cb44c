"""The README's demo: what `tools/setup demo` prints."""
from .registry import table


@table("readme-demo", file="README.md", minutes=0.1, deterministic=False)
def demo(mp, quick):
    """What `tools/setup demo` prints (`plan ms` is wall time and varies)."""
    out = mp.run("compare", "--model", "resnet50", "--batch", "128", "--device", "titan-rtx", "--budget", "60%")
    return ["```", *out.stdout.rstrip("\n").split("\n"), "```"]
