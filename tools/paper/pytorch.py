"""The PyTorch tables (docs/pytorch.md): real traces exported by
memplan_torch through every planner (tools/torch_traces.py), and planned
training steps against plain ones (tools/torch_steps.py). Both need
Debian's torch, which /usr/bin/python3 sees."""
import os
import pathlib
import subprocess

from .fmt import ROOT
from .registry import table

PYTHON = "/usr/bin/python3"


def run_script(mp, script, args):
    """`PYTHONPATH=python /usr/bin/python3 SCRIPT ARGS`: its Markdown lines (the rows and the line above them)."""
    if not pathlib.Path(PYTHON).exists():
        raise FileNotFoundError(f"{PYTHON}, with torch, to run {script}")
    mp.commands.append(" ".join(["PYTHONPATH=python", PYTHON, script, *args]))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    out = subprocess.run([PYTHON, script, *args], capture_output=True, text=True, cwd=ROOT, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{script} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return out.stdout.rstrip("\n").split("\n")


@table("pytorch-traces", minutes=50, deterministic=False)
def pytorch_traces(mp, quick):
    """Exported torchvision models and the transformer through the 13 planners, validated and executed."""
    args = ["--memplan", os.path.relpath(mp.path, ROOT)] + (["--models", "vgg11"] if quick else [])
    return run_script(mp, "tools/torch_traces.py", args)


@table("pytorch-steps", minutes=13, deterministic=True)
def pytorch_steps(mp, quick):
    """Planned PyTorch steps on the CPU against plain ones: bit-identical, under the accountant's budget."""
    args = ["--batch", "32"] + (["--models", "transformer", "--planners", "tsplit", "--budgets", "70%"] if quick else [])
    return run_script(mp, "tools/torch_steps.py", args)
