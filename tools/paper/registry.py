"""The tables tools/paper_tables knows: a generator per table id."""

TABLES = {}


def table(name, file="docs/results.md", minutes=1, deterministic=True):
    """Registers gen(memplan, quick) -> Markdown lines as table `name` of `file`.

    minutes: the full run's cost on the 2-core development machine;
    deterministic: the same lines on every run (no wall times), so --check can compare them."""

    def register(gen):
        TABLES[name] = dict(gen=gen, file=file, minutes=minutes, deterministic=deterministic,
                            title=(gen.__doc__ or "").strip().split("\n")[0])
        return gen

    return register
