"""Markdown formatting shared by the tables: sizes, percentages, claims."""
import os
import pathlib


def gib(n):
    return f"{n / 2**30:.2f} GiB"


def pct(x):
    return f"{100 * x:,.1f} %"


def ms(seconds):
    return f"{seconds * 1e3:,.2f}"


def bold(text, on):
    return f"**{text}**" if on else text


def table(head, rows, numeric_from=None):
    """A Markdown table; columns from `numeric_from` on are right-aligned."""
    align = ["---:" if numeric_from is not None and i >= numeric_from else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def claim(what, holds_on, of):
    """'WHAT on 4 of 6 (all but x, y)': where a paper's claim holds."""
    missing = [m for m in of if m not in holds_on]
    if len(of) == 1:
        return f"{what} on {of[0]}" if holds_on else f"{what} not on {of[0]}"
    if not missing:
        return f"{what} on both" if len(of) == 2 else f"{what} on all {len(of)}"
    if not holds_on:
        return f"{what} on none of {len(of)}"
    return f"{what} on {len(holds_on)} of {len(of)} (not on {', '.join(missing)})"


ROOT = pathlib.Path(__file__).resolve().parents[2]


def shown(path):
    """`path` as a reader at the repository's root types it."""
    return os.path.relpath(path, ROOT)


def row_cells(line):
    """The stripped cells of a Markdown table row."""
    return [c.strip() for c in line.strip("|").split("|")]
