#!/usr/bin/env python3
"""memplan_torch (docs/pytorch.md): torchvision resnet18 and the 4-layer
transformer export with memplan's vocabulary, and training steps under
plans are bit-identical to plain steps with the accountant under the budget.

CTest runs it with the memplan module's folder and python/ on PYTHONPATH;
without torch or the module it prints SKIPPED and exits 77.
"""

import unittest

from skipping import require

torch, torchvision, memplan = require("torch", "torchvision", "memplan",
                                      hint="tools/setup test installs python3-torch and python3-torchvision")

from memplan_torch import check, export, models


def exported(name, batch, device="v100"):
    model, inputs, target, loss_fn = models.build(name, batch, seq_len=32)
    return export(model, inputs, target, loss_fn, models.sgd(model), device=device, name=name)


class Export(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.resnet = exported("resnet18", 8)
        cls.transformer = exported("transformer", 8)

    def test_resnet18_ops_in_memplan_vocabulary(self):
        types = [op["type"] for op in self.resnet["ops"]]
        # resnet18: 20 convolutions (17 in the trunk, 3 downsample) and 20
        # batch norms, each with its backward; 17 ReLUs; one max pool.
        self.assertEqual(types.count("conv2d"), 20)
        self.assertEqual(types.count("conv2d_backward"), 20)
        self.assertEqual(types.count("batch_norm"), 20)
        self.assertEqual(types.count("relu"), 17)
        self.assertEqual(types.count("max_pool"), 1)
        conv1 = next(t for t in self.resnet["tensors"] if t["name"] == "conv1.weight")
        self.assertEqual(conv1["bytes"], 64 * 3 * 7 * 7 * 4)
        # In-place ReLUs and batch norms are recomputable; the running-count increments are not.
        relu = [op for op in self.resnet["ops"] if op.get("aten") == "relu_"]
        self.assertTrue(all(op["recomputable"] for op in relu))
        bn = [op for op in self.resnet["ops"] if op.get("aten") == "native_batch_norm"]
        self.assertTrue(all(op["recomputable"] for op in bn))

    def test_none_plan_validates(self):
        for graph in (self.resnet, self.transformer):
            plan = memplan.plan(graph, device="v100", budget="110%", planner="none")
            self.assertTrue(plan.feasible, plan.reason)
            verdict = memplan.validate(graph, plan, plan.budget_bytes, device="v100")
            self.assertTrue(verdict["valid"], verdict)

    def test_baselines_recognise_the_ops(self):
        vdnn = memplan.plan(self.resnet, device="v100", budget="50%", planner="vdnn-conv")
        self.assertGreater(vdnn.swapped_bytes, 0)
        superneurons = memplan.plan(self.resnet, device="v100", budget="50%", planner="superneurons")
        self.assertGreater(superneurons.recomputed_ops, 0)

    def test_estimated_times_are_the_devices(self):
        conv = next(op for op in self.resnet["ops"] if op["type"] == "conv2d")
        # conv1 at batch 8: 2 x 8x64x112x112 outputs x 3x7x7 MACs = 1.888 GFLOP;
        # on a v100 (15.7 TFLOP/s, 0.65 of it) 185 us plus 5 us launch.
        self.assertAlmostEqual(conv["time_us"], 5 + 2 * 8 * 64 * 112 * 112 * 147 / (15.7e6 * 0.65), delta=1)


class BadInput(unittest.TestCase):
    def test_unknown_model_exits_2_naming_it(self):
        import contextlib
        import io
        from memplan_torch.__main__ import main
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["export", "--model", "resnet1000", "--batch", "2", "--out", "/dev/null"])
        self.assertEqual(code, 2)
        self.assertIn("'resnet1000' is neither a torchvision classification model nor 'transformer'", err.getvalue())

    def test_plan_for_another_graph_is_refused(self):
        from memplan_torch import PlanError, apply
        model, inputs, target, loss_fn = models.build("resnet18", 2)
        optimizer = models.sgd(model)
        graph = export(model, inputs, target, loss_fn, optimizer, times="cpu")
        with self.assertRaisesRegex(PlanError, "not a memplan-plan document"):
            apply(model, optimizer, loss_fn, graph, {"format": "memplan-graph"})
        other = torchvision.models.resnet34()
        plan = memplan.plan(graph, device="v100", budget="110%", planner="tsplit").to_json()
        step = apply(other, models.sgd(other), loss_fn, graph, plan)
        with self.assertRaisesRegex(PlanError, "was the graph exported from this model"):
            step(inputs, target)


class PlannedStep(unittest.TestCase):
    """One plain and one planned step from the same state (memplan_torch.check).
    Budgets: 50 % where the planner fits at batch 8, else the smallest of
    60-90 % where it does (docs/pytorch.md says why dtr and checkpoint need more)."""

    def assert_step(self, model, planner, budget):
        result = check(model, 8, device="v100", budget=budget, planner=planner, seq_len=32)
        self.assertTrue(result["feasible"], result.get("reason"))
        self.assertTrue(result["identical"], result)
        self.assertEqual(result["max_abs_diff"], 0.0)
        self.assertTrue(result["buffers_identical"], result)
        self.assertLessEqual(result["accounted_peak_bytes"], result["budget_bytes"], result)
        return result

    def test_resnet18_tsplit_50(self):
        result = self.assert_step("resnet18", "tsplit", "50%")
        self.assertGreater(result["swapped_out_bytes"], 0)
        # Offloaded batch-norm statistics written by the forward pass go back
        # to the host before their device copy is freed: at most every
        # running mean and variance (4,800 channels, 2 x 4 B each) and the 20
        # 8-byte num_batches_tracked = 38,560 B.
        self.assertGreater(result["written_back_bytes"], 0)
        self.assertLessEqual(result["written_back_bytes"], 38560)
        self.assertGreater(result["recomputed_ops"], 0)

    def test_resnet18_capuchin_60(self):
        self.assertGreater(self.assert_step("resnet18", "capuchin", "60%")["recomputed_ops"], 0)

    def test_resnet18_checkpoint_90(self):
        self.assertGreater(self.assert_step("resnet18", "checkpoint", "90%")["recomputed_ops"], 0)

    def test_transformer_tsplit_50(self):
        self.assert_step("transformer", "tsplit", "50%")

    def test_transformer_dtr_90(self):
        self.assertGreater(self.assert_step("transformer", "dtr", "90%")["recomputed_ops"], 0)

    def test_transformer_capuchin_80(self):
        self.assert_step("transformer", "capuchin", "80%")


class Addresses(unittest.TestCase):
    def test_no_released_address_names_a_version(self):
        """The runner finds the graph tensor a storage holds by its address. A
        swap-out releases the address, and PyTorch may place a storage no op
        made there next (a Python scalar it wraps, which autograd may save):
        the address must then name nothing, or its backward unpacks the
        scalar as the swapped tensor (an int64 view of a float storage)."""
        from memplan_torch import runtime, trace
        model, inputs, target, loss_fn = models.build("resnet18", 8)
        optimizer = models.sgd(model)
        graph = export(model, inputs, target, loss_fn, optimizer, device="v100")
        plan = memplan.plan(graph, device="v100", budget="50%", planner="tsplit").to_json()
        stale = []

        def run(model, inputs, target, loss_fn, optimizer):
            def on_phase(phase):  # the forward's swap-outs have shrunk their storages
                r = runtime._inside.runner
                if phase == "backward":
                    stale.extend((k, tid) for k, tid in r.current.items()
                                 if tid in r.resident and r.resident[tid].data_ptr() != k)
            return trace.training_step(model, inputs, target, loss_fn, optimizer, on_phase)

        step = runtime.PlannedStep(model, optimizer, loss_fn, graph, plan, run=run)
        step(inputs, target)
        self.assertGreater(step.report["swapped_out_bytes"], 0)
        self.assertEqual(stale, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
