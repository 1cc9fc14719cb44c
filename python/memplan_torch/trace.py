"""What one ATen op does to storages: the reading shared by the exporter and
the plan runner, so that both number the same ops and tensors the same way.

A memplan tensor is one version of a storage (docs/formats.md, "PyTorch
graphs"): an op that makes a new storage makes a tensor; an op that writes a
storage in place (`relu_`, `add_`) makes a new version of it -- a new tensor
that reads the old one -- unless the storage is persistent state (parameters,
buffers, optimizer state), which stays one tensor that update ops read and
write. Ops that make only views or move no data are not ops.
"""

import contextlib

import torch

# Training-mode batch norm writes its running statistics in place, though
# older schemas (torch 1.13) do not mark those arguments as written.
WRITES_RUNNING_STATS = {"native_batch_norm": (3, 4), "_native_batch_norm_legit": (3, 4)}


def aten_name(func):
    """'aten.addmm.default' -> 'addmm'."""
    return func.overloadpacket.__name__


def tensors_in(value):
    """Every tensor inside a (nested) argument structure, in order."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def is_scalar_result(out):
    """An op on a wrapped number (a Python scalar autograd saved as a 0-dim
    tensor: `x * 0.5`) comes back to Python as a number. Such an op (the
    `detach` of an unpacked scalar) is not a memplan op."""
    return isinstance(out, (bool, int, float))


def tensor_result(out):
    """`out` as a dispatch-mode handler must return it: a tensor where the
    dispatcher wants one (is_scalar_result)."""
    if isinstance(out, bool):
        return torch.tensor(out)
    if isinstance(out, int):
        return torch.tensor(out, dtype=torch.int64)
    if isinstance(out, float):
        return torch.tensor(out, dtype=torch.float64)
    return out


def storage_key(t):
    """The identity of the storage behind `t` while it lives: its address."""
    return t.storage().data_ptr()


def storage_bytes(t):
    return t.storage().nbytes()


def written_positions(func, args):
    """Positions of the positional arguments `func` writes in place."""
    name = aten_name(func)
    if name in WRITES_RUNNING_STATS and len(args) > 5 and args[5]:
        return set(WRITES_RUNNING_STATS[name])
    written = set()
    for i, arg in enumerate(func._schema.arguments):
        if i < len(args) and arg.alias_info is not None and arg.alias_info.is_write:
            written.add(i)
    return written


class OpEffect:
    """One op's reads, in-place writes and new storages, by storage key."""

    def __init__(self, func, args, kwargs, out):
        self.name = aten_name(func)
        self.reads = []     # keys of the storages read (first appearance order)
        self.writes = []    # keys of the storages written in place
        self.made = []      # tensors on new storages, in output order
        seen = set()
        for t in tensors_in((args, kwargs)):
            k = storage_key(t)
            if storage_bytes(t) and k not in seen:
                seen.add(k)
                self.reads.append(k)
        for i in written_positions(func, args):
            for t in tensors_in(args[i]):
                if storage_bytes(t) and storage_key(t) not in self.writes:
                    self.writes.append(storage_key(t))
        for t in tensors_in(out):
            k = storage_key(t)
            if storage_bytes(t) and k not in seen:
                seen.add(k)
                self.made.append(t)

    @property
    def is_op(self):
        """Views and metadata ops move no data: they are not memplan ops."""
        return bool(self.made or self.writes)


@contextlib.contextmanager
def without_profiler_annotations():
    """Optimizer.step wraps itself in a profiler record_function, which
    allocates a handle tensor; that is bookkeeping, not training work."""
    saved = torch.autograd.profiler.record_function
    torch.autograd.profiler.record_function = lambda *args, **kwargs: contextlib.nullcontext()
    try:
        yield
    finally:
        torch.autograd.profiler.record_function = saved


def training_step(model, inputs, target, loss_fn, optimizer, on_phase=lambda phase: None):
    """One training iteration: forward, backward, optimizer step. `on_phase`
    is told when each phase begins. Gradients are made afresh (set to None
    first), as a steady-state step with `zero_grad(set_to_none=True)` does."""
    optimizer.zero_grad(set_to_none=True)
    on_phase("forward")
    loss = loss_fn(model(*inputs), target)
    on_phase("backward")
    loss.backward()
    on_phase("update")
    optimizer.step()
    return loss.detach()
