"""Plan an exported graph with memplan, and check a planned step against a plain one."""

import copy

import torch

from . import models
from ._native import native
from .exporter import export
from .runtime import PlannedStep
from .trace import training_step


def plan(graph, *, device, budget, planner):
    """memplan's plan for `graph` (a memplan-graph document) as a
    memplan-plan document, through the compiled `memplan` module."""
    memplan = native("planning")
    return memplan.plan(graph, device=device, budget=budget, planner=planner).to_json()


def _train_state(model, optimizer):
    twin = copy.deepcopy(model)
    twin_optimizer = models.sgd(twin)
    twin_optimizer.load_state_dict(optimizer.state_dict())
    return twin, twin_optimizer


def check(model_name, batch, *, device, budget, planner, seq_len=64, resolution=None, times=None):
    """Exports `model_name` at `batch`, plans it, and runs one plain and one
    planned training step from the same state on the CPU. Returns what the
    command line's `check --json` prints."""
    model, inputs, target, loss_fn = models.build(model_name, batch, seq_len=seq_len, resolution=resolution)
    optimizer = models.sgd(model)
    graph = export(model, inputs, target, loss_fn, optimizer, device=device, times=times, name=model_name)
    memplan = native("planning")
    planned = memplan.plan(graph, device=device, budget=budget, planner=planner)
    report = planned.report
    result = {"model": model_name, "batch": batch, "device": device, "planner": planner,
              "budget_bytes": report["budget_bytes"], "feasible": bool(report["feasible"]),
              "arena_bytes": report.get("arena_bytes"), "peak_live_bytes": report.get("peak_live_bytes")}
    if not result["feasible"]:
        result.update(identical=None, max_abs_diff=None, accounted_peak_bytes=None, reason=report.get("reason"))
        return result
    plain_model, plain_opt = _train_state(model, optimizer)
    planned_model, planned_opt = _train_state(model, optimizer)
    torch.manual_seed(1)  # both steps draw the same dropout masks
    plain_loss = training_step(plain_model, inputs, target, loss_fn, plain_opt)
    step = PlannedStep(planned_model, planned_opt, loss_fn, graph, planned.to_json())
    torch.manual_seed(1)
    planned_loss = step(inputs, target)
    pairs = [(plain_loss, planned_loss)]
    for (name, a), b in zip(plain_model.named_parameters(), planned_model.parameters()):
        pairs += [(a.grad, b.grad), (a.detach(), b.detach())]
    # The buffers too: batch norm's running statistics, written in place by forward ops.
    buffers = list(zip(plain_model.buffers(), planned_model.buffers()))
    diff = max(float((a - b).abs().max()) if a.numel() else 0.0 for a, b in pairs)
    result.update(identical=all(torch.equal(a, b) for a, b in pairs), max_abs_diff=diff,
                  buffers_identical=all(torch.equal(a, b) for a, b in buffers), **step.report)
    result["under_budget"] = result["accounted_peak_bytes"] <= result["budget_bytes"]
    return result
