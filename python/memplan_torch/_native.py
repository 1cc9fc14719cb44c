"""The compiled `memplan` module (MEMPLAN_BUILD_PYTHON): imported from the
path, else from the build trees `tools/setup` makes."""

import importlib
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def native(purpose):
    """The `memplan` extension module; ImportError naming `purpose` and the
    build step where it is not built."""
    try:
        return importlib.import_module("memplan")
    except ImportError:
        pass
    candidates = [os.environ.get("MEMPLAN_PYTHON_DIR")] + [str(ROOT / "build" / p / "python")
                                                           for p in ("default", "ci")]
    for folder in filter(None, candidates):
        if any(pathlib.Path(folder).glob("memplan*.so")):
            sys.path.insert(0, folder)
            return importlib.import_module("memplan")
    raise ImportError(f"{purpose} needs memplan's Python module, which is not built: run tools/setup "
                      "(or build with -DMEMPLAN_BUILD_PYTHON=ON) and set MEMPLAN_PYTHON_DIR to "
                      "<build>/python if the build is elsewhere")
