"""tools/dtr_simulator.py, the check of `dtr` on the DTR logs, against the
only figures of DTR's own simulator this project has: the corpus README's
no-eviction peaks and its h_DTR^eq rows (ResNet-32, Transformer), and a log
worked by hand. Without ../shared/corpus it says SKIPPED and exits 77."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import dtr_simulator  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus" / "dtr-logs"
README = {  # the corpus README: peak (GB), compute (ms), ratios at 0.3, 0.5, 0.7, 0.9
    "resnet32": (10.06, 291.9, (1.179, 1.107, 1.046, 1.013)),
    "transformer": (9.86, 276.3, (1.124, 1.058, 1.031, 1.009)),
}
# tests/data/dtr-hand.log (tests/test_dtr_log.cpp): a warm-up op, then w 40
# B and x 100 B, conv -> y 300 B, relu_ writes y' (300 B, new memory), a
# view of y', backward -> g 200 B.
HAND = ROOT / "tests" / "data" / "dtr-hand.log"


def check_hand():
    schedule = dtr_simulator.read_log(HAND)
    peak, compute = dtr_simulator.baseline(schedule)
    # w + x + y + y' = 740 at relu_; 6.5 ms of ops.
    assert (peak, compute) == (740, 6_500_000), (peak, compute)
    # At 740 nothing is evicted: the clock is the compute (+ 1 ns).
    assert dtr_simulator.slowdown(schedule, 740, compute) == (compute + 1) / compute
    # At 739 relu_ needs y' with w, x (constants, pinned) and y (its input) there.
    assert dtr_simulator.slowdown(schedule, 739, compute) == "OOM"


def main():
    check_hand()
    if not CORPUS.is_dir():
        print(f"SKIPPED: {CORPUS} is absent")
        return 77
    sys.setrecursionlimit(100000)
    for prefix, (peak_gb, time_ms, ratios) in README.items():
        schedule = dtr_simulator.read_log(next(CORPUS.glob(prefix + "-*.log")))
        peak, compute = dtr_simulator.baseline(schedule)
        assert round(peak / 1e9, 2) == peak_gb, (prefix, peak)
        assert round(compute / 1e6, 1) == time_ms, (prefix, compute)
        for share, expected in zip((0.3, 0.5, 0.7, 0.9), ratios):
            got = dtr_simulator.slowdown(schedule, int(peak * share), compute)
            assert round(got, 3) == expected, (prefix, share, got, expected)
    print("tools/dtr_simulator.py gives the corpus README's peaks and eight ratios")
    return 0


if __name__ == "__main__":
    sys.exit(main())
