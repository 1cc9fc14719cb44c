"""What CI costs and what longer fuzzing finds: `.ci/run` (the README's
test command, `tools/setup test`) on a clean clone of the committed HEAD,
timed per stage from the lines `memplan setup: STAGE took N s` it prints;
each libFuzzer target (fuzz/) for ten minutes."""
import pathlib
import re
import subprocess
import tempfile

from . import fmt
from .fmt import ROOT
from .registry import table

STAGE = re.compile(r"^memplan setup: (.+) took (\d+) s$")
TESTS = re.compile(r"tests passed, (\d+) tests failed out of (\d+)")
CI_LIMIT_S = 45 * 60  # the brief: keep CI under 45 minutes (it fails at 90)


@table("ci-stages", minutes=40, deterministic=False)
def ci_stages(mp, quick):
    """`.ci/run` on a clean clone of HEAD: seconds per stage, and the tests each ctest run ran."""
    if quick:
        return ["`.ci/run` has no quick form: it is the whole CI run (about 40 minutes)."]
    with tempfile.TemporaryDirectory() as folder:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=ROOT).stdout.strip()
        subprocess.run(["git", "clone", "-q", str(ROOT), folder], check=True)
        mp.commands.append("git clone -q . $CLONE && $CLONE/.ci/run")
        done = subprocess.run([f"{folder}/.ci/run"], capture_output=True, text=True, cwd=folder)
    log = (done.stdout + done.stderr).split("\n")
    if done.returncode != 0:
        raise RuntimeError(f".ci/run exited {done.returncode} on {head}:\n" + "\n".join(log[-40:]))
    stages = [m.groups() for m in map(STAGE.match, log) if m]
    tests = [m.group(2) for m in map(TESTS.search, log) if m]
    rows = [[name, f"{int(seconds):,}"] for name, seconds in stages]
    total = sum(int(seconds) for _, seconds in stages)
    verdict = "under" if total < CI_LIMIT_S else "OVER"
    return [f"Commit {head}; tests per ctest run (ci, asan, tsan, fuzz): {', '.join(tests)}.", "",
            *fmt.table(["stage", "seconds"], rows, numeric_from=1), "",
            f"All stages passed in {total / 60:.1f} min, {verdict} the 45 min the brief allows."]


FUZZ_TARGETS = ["graph_json", "plan_json", "size_text"]
FUZZ_STAT = re.compile(r"^stat::(number_of_executed_units|new_units_added):\s*(\d+)")


@table("fuzz-long", minutes=32, deterministic=False)
def fuzz_long(mp, quick):
    """Each libFuzzer target for 10 minutes (10 s with --quick) from make_corpus's seeds: executions, new inputs, findings."""
    seconds = 10 if quick else 600
    build = ROOT / "build" / "fuzz"
    for step in (["cmake", "--preset", "fuzz"], ["cmake", "--build", "--preset", "fuzz"]):
        mp.commands.append(" ".join(step))
        subprocess.run(step, capture_output=True, text=True, check=True, cwd=ROOT)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([str(build / "fuzz" / "make_corpus"), f"{folder}/corpus"], capture_output=True, check=True)
        for target in FUZZ_TARGETS:
            found = f"{folder}/{target}-found"
            pathlib.Path(found).mkdir()
            args = [str(build / "fuzz" / f"fuzz_{target}"), f"-max_total_time={seconds}", "-rss_limit_mb=2048",
                    "-timeout=10", "-print_final_stats=1", found, f"{folder}/corpus/{target}"]
            mp.commands.append(" ".join([f"build/fuzz/fuzz/fuzz_{target}", *args[1:5], "$FOUND", "$CORPUS"]))
            done = subprocess.run(args, capture_output=True, text=True, cwd=folder)
            stats = dict(m.groups() for m in map(FUZZ_STAT.match, done.stderr.split("\n")) if m)
            crash = [line for line in done.stderr.split("\n") if line.startswith("==") and "ERROR" in line]
            finding = "none" if done.returncode == 0 else (crash[0][:120] if crash else f"exit {done.returncode}")
            rows.append([target, finding, f"{int(stats.get('number_of_executed_units', 0)):,}",
                         f"{int(stats.get('new_units_added', 0)):,}"])
    return fmt.table(["target", "findings", "executions", "new inputs"], rows, numeric_from=2) + [
        "", f"{seconds} s per target, one at a time."]
