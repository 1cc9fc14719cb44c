"""How the Python tests skip: print "SKIPPED: why" and exit 77, which CTest
reports as skipped (SKIP_RETURN_CODE in examples/cli/CMakeLists.txt)."""

import importlib
import os
import sys

SKIP = 77


def require(*modules, hint=""):
    """The named modules, imported; the test skips where CTest says the
    memplan module was not built ($MEMPLAN_PYTHON_SKIP) or one is missing."""
    if os.environ.get("MEMPLAN_PYTHON_SKIP"):
        print("SKIPPED: " + os.environ["MEMPLAN_PYTHON_SKIP"])
        sys.exit(SKIP)
    try:
        return [importlib.import_module(name) for name in modules]
    except ImportError as e:
        print(f"SKIPPED: {e}{' (' + hint + ')' if hint else ''}")
        sys.exit(SKIP)
