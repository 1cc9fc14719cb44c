#!/usr/bin/env python3
"""The memplan Python module against the memplan CLI (docs/python.md).

For the same input, memplan.plan / compare / simulate / validate must print
the numbers `memplan ... --json` prints: both run memplan/io/planned.hpp.
CTest (examples/cli/CMakeLists.txt) passes the CLI as $MEMPLAN_CLI and the
module's folder on PYTHONPATH; without the module it sets
$MEMPLAN_PYTHON_SKIP and this script exits 77 (skipped).
"""

import json
import os
import pathlib
import subprocess
import tempfile
import unittest

from skipping import require

memplan, = require("memplan", hint="the memplan module is not on PYTHONPATH")

CLI = os.environ.get("MEMPLAN_CLI", "")
DATA = pathlib.Path(__file__).resolve().parent.parent / "data"
GRAPHS = ["tiny.json", "pytorch_cnn.json", "pytorch_mlp.json"]
# Planning time is measured, not computed: the one key that may differ.
MEASURED = {"planning_time_s"}


def cli(*args):
    """`memplan ARGS --json` as a dict: a report (exit 0 fits, 1 invalid plan, 2 out of memory, 3 refused), not an error."""
    done = subprocess.run([CLI, *args, "--json"], capture_output=True, text=True, check=False)
    document = json.loads(done.stdout) if done.stdout else {}
    if done.returncode not in (0, 1, 2, 3) or "error" in document or not document:
        raise AssertionError(f"memplan {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return document


def computed(report):
    return {k: v for k, v in report.items() if k not in MEASURED}


class AgainstCli(unittest.TestCase):
    def setUp(self):
        if not CLI:
            self.fail("MEMPLAN_CLI is not set (CTest passes $<TARGET_FILE:memplan_cli>)")
        self.work = tempfile.TemporaryDirectory()
        self.addCleanup(self.work.cleanup)

    def assert_same_report(self, mine, theirs, what):
        # The numbers the issue names, each exactly, then every other key.
        for key in ("feasible", "time_s", "arena_bytes", "peak_live_bytes"):
            self.assertEqual(mine[key], theirs[key], f"{what}: {key}")
        self.assertEqual(computed(mine), computed(theirs), what)

    def test_compare_every_default_planner(self):
        for name in GRAPHS:
            for device, budget in (("titan-rtx", "60%"), ("v100", "80%")):
                with self.subTest(graph=name, device=device, budget=budget):
                    path = DATA / name
                    theirs = cli("compare", "--graph", str(path), "--device", device, "--budget", budget)
                    mine = memplan.compare(memplan.load_graph(path), device=device, budget=budget)
                    self.assertEqual([r["planner"] for r in mine], [r["planner"] for r in theirs["rows"]])
                    for m, t in zip(mine, theirs["rows"]):
                        self.assert_same_report(m, t, f"{name} {device} {budget} {t['planner']}")

    def test_plan_report_document_simulate_validate(self):
        for name in GRAPHS:
            for planner in ("tsplit", "capuchin", "dtr", "checkpoint"):
                with self.subTest(graph=name, planner=planner):
                    path = DATA / name
                    out = pathlib.Path(self.work.name) / f"{name}-{planner}.plan.json"
                    args = ["--graph", str(path), "--device", "titan-rtx", "--budget", "70%"]
                    theirs = cli("plan", *args, "--planner", planner, "--out", str(out))
                    p = memplan.plan(str(path), device="titan-rtx", budget="70%", planner=planner)
                    self.assert_same_report(p.report, theirs, f"plan {name} {planner}")
                    self.assertEqual(p.feasible, theirs["feasible"])
                    if not theirs["feasible"]:  # an infeasible plan's figures are null
                        self.assertIsNone(theirs["time_s"])
                        continue
                    self.assertEqual(p.time_us / 1e6, theirs["time_s"])  # the CLI prints time_us / 1e6
                    self.assertEqual(p.arena_bytes, theirs["arena_bytes"])
                    self.assertEqual(p.peak_live_bytes, theirs["peak_live_bytes"])
                    self.assertEqual(p.budget_bytes, theirs["budget_bytes"])
                    self.assertEqual(p.overhead, theirs["overhead"])
                    document = json.loads(out.read_text())
                    self.assertEqual(p.to_json(), document)
                    self.assertEqual(len(p.actions), len(document["actions"]))
                    for a, d in zip(p.actions, document["actions"]):
                        self.assertEqual(a["kind"], d["kind"])
                        self.assertEqual(a["waits"], d.get("waits", []))
                    saved = pathlib.Path(self.work.name) / "saved.json"
                    p.save(saved)
                    self.assertEqual(json.loads(saved.read_text()), document)
                    if not p.feasible:
                        continue
                    simulated = cli("simulate", "--graph", str(path), "--plan", str(out), "--device", "titan-rtx")
                    for plan in (p, out, str(out), document, json.dumps(document)):
                        self.assert_same_report(memplan.simulate(path, plan, device="titan-rtx"), simulated,
                                                f"simulate {name} {planner} from {type(plan).__name__}")
                    validated = cli("validate", "--graph", str(path), "--plan", str(out), "--budget", "70%")
                    self.assertEqual(memplan.validate(path, p, "70%"), validated)

    def test_simulate_and_validate_over_budget(self):
        path = DATA / "tiny.json"
        out = pathlib.Path(self.work.name) / "tiny-none.json"
        cli("plan", "--graph", str(path), "--device", "titan-rtx", "--budget", "10240", "--planner", "none",
            "--out", str(out))
        p = memplan.plan(path, device="titan-rtx", budget=10240, planner="none")
        theirs = cli("simulate", "--graph", str(path), "--plan", str(out), "--device", "titan-rtx", "--budget", "9000")
        mine = memplan.simulate(path, p, device="titan-rtx", budget=9000)
        self.assertFalse(mine["feasible"])
        self.assertEqual(mine["failure_kind"], "out_of_memory")
        self.assert_same_report(mine, theirs, "simulate over budget")
        theirs = cli("validate", "--graph", str(path), "--plan", str(out), "--budget", "9000")
        self.assertEqual(memplan.validate(path, out, 9000), theirs)
        invalid = DATA / "tiny-invalid-plan.json"
        theirs = cli("validate", "--graph", str(path), "--plan", str(invalid), "--budget", "9900")
        self.assertEqual(memplan.validate(path, invalid, "9900"), theirs)
        self.assertEqual(theirs["failure_kind"], "invalid_plan")

    def test_infeasible_plan(self):
        # Keeping everything in tiny.json needs 9900 live bytes (tests/data/README.md).
        path = DATA / "tiny.json"
        theirs = cli("plan", "--graph", str(path), "--device", "titan-rtx", "--budget", "9899", "--planner", "none")
        p = memplan.plan(path, device="titan-rtx", budget=9899, planner="none")
        self.assertFalse(p.feasible)
        self.assertEqual(p.failure_kind, "out_of_memory")
        self.assertIn("9900", p.failure)
        self.assert_same_report(p.report, theirs, "infeasible plan")

    def test_zoo_model(self):
        g = memplan.load_model("plain20", device="titan-rtx", batch=2)
        self.assertEqual(g.info("titan-rtx"), cli("info", "--model", "plain20", "--batch", "2", "--device", "titan-rtx"))
        self.assertEqual(g.baseline_peak_bytes, g.info("titan-rtx")["baseline_peak_bytes"])
        # On v100 the model is built again with v100's op times, as `--model ... --device v100` builds it.
        for device in ("titan-rtx", "v100"):
            with self.subTest(device=device):
                theirs = cli("plan", "--model", "plain20", "--batch", "2", "--device", device, "--budget", "60%",
                             "--planner", "tsplit")
                self.assert_same_report(memplan.plan(g, device=device, budget="60%").report, theirs, device)
        # An option a planner reads, as the CLI's --NAME VALUE.
        theirs = cli("plan", "--model", "plain20", "--batch", "2", "--device", "titan-rtx", "--budget", "70%",
                     "--planner", "delta", "--filter", "lru")
        mine = memplan.plan(g, device="titan-rtx", budget="70%", planner="delta", options={"filter": "lru"})
        self.assert_same_report(mine.report, theirs, "delta --filter lru")

    def test_names(self):
        models = cli("models")
        self.assertEqual(memplan.devices(), [d["name"] for d in models["devices"]])
        self.assertEqual(memplan.planners(), [p["name"] for p in models["planners"]])
        self.assertEqual(memplan.models(), models["models"])


class Graphs(unittest.TestCase):
    def test_every_form_of_source(self):
        path = DATA / "pytorch_cnn.json"
        text = path.read_text()
        graphs = [memplan.load_graph(s) for s in (path, str(path), text, json.loads(text))]
        for g in graphs:
            # tests/data/README.md: pytorch_cnn's baseline peak is 28288 B over 37 ops.
            self.assertEqual(g.baseline_peak_bytes, 28288)
            self.assertEqual(g.num_ops, 37)
            self.assertEqual(g.to_json(), graphs[0].to_json())
        self.assertEqual(memplan.load_graph(graphs[0].to_json()).to_json(), graphs[0].to_json())
        g = graphs[0]
        self.assertEqual(memplan.load_graph(g).to_json(), g.to_json())  # a Graph passes through

    def test_bad_graph_names_the_field(self):
        doc = json.loads((DATA / "tiny.json").read_text())
        del doc["ops"][1]["inputs"]
        with self.assertRaises(ValueError) as caught:
            memplan.load_graph(doc)
        self.assertIn("'inputs'", str(caught.exception))
        self.assertIn("op '", str(caught.exception))
        doc = json.loads((DATA / "tiny.json").read_text())
        doc["tensors"][0]["bytes"] = -5
        with self.assertRaises(ValueError) as caught:
            memplan.plan(doc, device="titan-rtx")
        self.assertIn("'bytes'", str(caught.exception))
        with self.assertRaises(ValueError):
            memplan.load_graph("{ not json")
        with self.assertRaises(ValueError):
            memplan.load_graph("/no/such/graph.json")
        with self.assertRaises(TypeError):
            memplan.load_graph(42)

    def test_bad_arguments(self):
        g = memplan.load_graph(DATA / "tiny.json")
        for kwargs, words in (({"planner": "magic"}, "unknown planner 'magic'"),
                              ({"device": "gtx-9999"}, "gtx-9999"),
                              ({"budget": "12XB"}, "12XB"),
                              ({"host_memory": "50%"}, "host_memory: '50%' is a percentage"),
                              ({"options": {"filter": "lru"}}, "read only by delta")):
            with self.subTest(**{k: str(v) for k, v in kwargs.items()}):
                with self.assertRaises(ValueError) as caught:
                    memplan.plan(g, **kwargs)
                self.assertIn(words, str(caught.exception))


class Roofline(unittest.TestCase):
    def test_estimate_time_us_by_hand(self):
        # v100 (cost/devices.hpp): 15.7 FP32 TFLOP/s, 125 FP16 tensor TFLOP/s,
        # 900 GB/s, launch 5 µs. roofline.hpp: time = launch + max(flops /
        # (peak * 1e6 * compute_eff), bytes / (bandwidth * 1e3 * memory_eff)).
        # A GEMM (0.65, 0.85) of 1 GFLOP over 1 MB in FP32:
        #   compute 1e9 / (15.7e6 * 0.65) = 97.991 µs, memory 1e6 / (900e3 * 0.85) = 1.307 µs
        #   -> 5 + 97.991 = 102.991 µs
        self.assertAlmostEqual(memplan.estimate_time_us("v100", 1e9, 1e6), 5 + 1e9 / (15.7 * 1e6 * 0.65), places=9)
        self.assertAlmostEqual(memplan.estimate_time_us("v100", 1e9, 1e6), 102.99118, places=4)
        # In FP16 on tensor cores: compute 1e9 / (125e6 * 0.65) = 12.308 µs -> 17.308 µs.
        self.assertAlmostEqual(memplan.estimate_time_us("v100", 1e9, 1e6, math="fp16"), 5 + 1e9 / (125e6 * 0.65),
                               places=9)
        # An element-wise op (0.25, 0.85) over 100 MB with 25 MFLOP: memory
        # 1e8 / (900e3 * 0.85) = 130.719 µs beats compute 2.5e7 / (15.7e6 * 0.25) = 6.369 µs
        #   -> 5 + 130.719 = 135.719 µs
        self.assertAlmostEqual(memplan.estimate_time_us("v100", 2.5e7, 1e8, gemm=False), 5 + 1e8 / (900e3 * 0.85),
                               places=9)
        with self.assertRaises(ValueError):
            memplan.estimate_time_us("v100", -1, 0)
        with self.assertRaises(ValueError):
            memplan.estimate_time_us("v100", 1, 0, math="int8")


if __name__ == "__main__":
    unittest.main(verbosity=2)
