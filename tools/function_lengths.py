#!/usr/bin/env python3
"""Lists the functions under include/memplan/ longer than a limit (issue 21:
none over 120 lines), longest first.

    tools/function_lengths.py [--limit 120] [DIR ...]

A function is a brace block opened on a line that names a call signature
(`name(...) ... {`, not a control statement, class or namespace) at the
outermost level of a class or namespace; its length runs from that line to
the matching closing brace, lambdas and nested blocks included. Comments
and string literals are skipped when matching braces.
"""
import argparse
import pathlib
import re

CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|return|case)\b")
SCOPE = re.compile(r"^\s*(namespace|class|struct|union|enum)\b|^\s*template\s*<[^>]*>\s*(class|struct)\b")


def code_only(text):
    """The text with comments and string/char literals blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(path):
    lines = code_only(path.read_text()).split("\n")
    stack = []  # per open brace: ("scope"|"function"|"block", start line)
    for no, line in enumerate(lines, 1):
        for ch in line:
            if ch == "{":
                in_function = any(kind == "function" for kind, _ in stack)
                head = " ".join(lines[max(0, no - 4):no])  # a signature may span lines
                if in_function:
                    stack.append(("block", no))
                elif SCOPE.search(line) or re.search(r"\b(namespace|class|struct|enum)\b[^(]*$", line):
                    stack.append(("scope", no))
                elif "(" in head and not CONTROL.match(line) and not line.strip().startswith("="):
                    stack.append(("function", no))
                else:
                    stack.append(("block", no))
            elif ch == "}" and stack:
                kind, start = stack.pop()
                if kind == "function":
                    yield start, no - start + 1


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--limit", type=int, default=120)
    a.add_argument("dirs", nargs="*", default=["include/memplan"])
    args = a.parse_args()
    found = []
    for d in args.dirs:
        for path in sorted(pathlib.Path(d).rglob("*.hpp")):
            for start, length in functions(path):
                if length > args.limit:
                    found.append((length, f"{path}:{start}"))
    for length, where in sorted(found, reverse=True):
        print(f"{length:5d}  {where}")
    print(f"{len(found)} functions over {args.limit} lines")


if __name__ == "__main__":
    main()
