"""memplan for PyTorch: export a training iteration as a memplan graph, plan
it with memplan, and run a training step that follows the plan.

    import memplan_torch
    graph = memplan_torch.export(model, images, labels, F.cross_entropy, optimizer, device="v100")
    plan = memplan_torch.plan(graph, device="v100", budget="50%", planner="tsplit")
    step = memplan_torch.apply(model, optimizer, F.cross_entropy, graph, plan)
    loss = step(images, labels)          # step.report: the accountant's bytes

docs/pytorch.md walks through it; docs/pytorch-distributed.md runs plans on
the ranks of torch.distributed (DDP, a 2-stage 1F1B pipeline): dist_check.
"""

from .exporter import export, write
from .runtime import PlanError, PlannedStep
from .checking import check, plan
from .distributed import dist_check


def apply(model, optimizer, loss_fn, graph, plan):
    """A step function `step(inputs, target) -> loss` that trains `model`
    one iteration following `plan` (see PlannedStep)."""
    return PlannedStep(model, optimizer, loss_fn, graph, plan)


__all__ = ["export", "write", "apply", "plan", "check", "dist_check", "PlannedStep", "PlanError"]
