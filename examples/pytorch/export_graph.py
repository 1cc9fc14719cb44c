#!/usr/bin/env python3
"""Export one PyTorch training iteration as a memplan-graph v1 file.

Runs forward, backward and an SGD-with-momentum update of a small model on
the CPU under a TorchDispatchMode, which sees every ATen op the iteration
executes -- the autograd engine's backward ops and the optimizer's in-place
updates included -- with the real tensors. Each op becomes a memplan op with
its measured wall time; each storage it allocates becomes a tensor with its
real size.

    python3 examples/pytorch/export_graph.py --model mlp --out tests/data/pytorch_mlp.json
    python3 examples/pytorch/export_graph.py --model cnn --out tests/data/pytorch_cnn.json

How the trace maps onto the format (docs/formats.md):
- A tensor is a storage. Views and in-place ops write no new storage, so they
  add no tensor; the ops reading a view read its base.
- Ops that only make views (t, view, detach, ...) are left out: they move no
  data. Ops that change a tensor in place (the optimizer's add_, BatchNorm's
  running statistics) stay, with the tensors they change among their inputs.
- Kinds: model parameters (and BatchNorm's running buffers, which persist the
  same way) are `parameter`, momentum buffers `optimizer_state`, the batch
  and labels `input`, the tensors that end up in `.grad` `parameter_gradient`;
  other tensors are `activation` if made in the forward phase, `gradient` in
  backward, `other` in the update.
- A warm-up iteration runs first so that the traced one is the steady state:
  momentum buffers exist before it starts.
"""

import argparse
import contextlib
import json
import time

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

# Ops that treat batch samples independently: their outputs may be split along dimension 0.
BATCH_SPLITTABLE = {"convolution", "relu", "threshold_backward", "max_pool2d_with_indices",
                    "max_pool2d_with_indices_backward", "addmm"}

# Training-mode batch norm updates the running statistics in place, though
# older schemas (torch 1.13) do not mark those arguments as written.
UPDATES_STATE = {"native_batch_norm", "_native_batch_norm_legit"}


def short_name(func):
    """'aten.addmm.default' -> 'addmm'."""
    return func.overloadpacket.__name__


def tensors_in(value):
    """Every tensor inside a (nested) argument structure."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def storage_of(t):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage().untyped()


class Recorder(TorchDispatchMode):
    """Records every ATen op as a memplan op over storages."""

    def __init__(self):
        super().__init__()
        self.phase = "forward"
        self.tensors = {}  # storage key -> tensor entry
        self.ops = []
        self.keep = []  # every storage seen: none is freed, so no key is reused

    def key(self, t):
        # Keep the storage, not the tensor: a storage that stays alive keeps its
        # address unique, and the tensor's own reference count stays what it is
        # in an untraced run (AccumulateGrad steals a gradient only when nothing
        # else holds it).
        storage = storage_of(t)
        self.keep.append(storage)
        return storage.data_ptr() or id(storage)

    def tensor(self, t, made_in=None):
        k = self.key(t)
        if k not in self.tensors:
            self.tensors[k] = {"bytes": storage_of(t).nbytes(), "shape": list(t.shape),
                               "dtype": str(t.dtype).replace("torch.", ""), "made_in": made_in}
        return k

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = [self.tensor(t) for t in tensors_in((args, kwargs))]
        start = time.perf_counter()
        out = func(*args, **kwargs)
        elapsed_us = (time.perf_counter() - start) * 1e6
        outputs = []
        for t in tensors_in(out):
            k = self.key(t)
            if k in self.tensors:
                if k not in inputs:
                    inputs.append(k)  # writes a tensor it was not handed: treat as read-modify-write
            else:
                outputs.append(self.tensor(t, made_in=self.phase))
        mutates = func._schema.is_mutable
        if not outputs and not mutates:
            return out  # a view or a metadata op: no data moves
        name = short_name(func)
        self.ops.append({"type": name, "phase": self.phase, "time_us": round(elapsed_us, 1),
                         "inputs": list(dict.fromkeys(inputs)), "outputs": outputs,
                         "mutates": mutates})
        return out


def build(model_name):
    torch.manual_seed(0)
    if model_name == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        x = torch.randn(8, 16)
        y = torch.randint(0, 4, (8,))
    else:
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, kernel_size=3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 10))
        x = torch.randn(4, 3, 8, 8)
        y = torch.randint(0, 10, (4,))
    return model, x, y


def iteration(model, optimizer, x, y, recorder=None):
    """Forward, backward, update; `recorder` (if any) is told the phase."""
    def phase(name):
        if recorder is not None:
            recorder.phase = name

    phase("forward")
    loss = F.cross_entropy(model(x), y)
    phase("backward")
    loss.backward()
    phase("update")
    optimizer.step()


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


def export(model_name):
    model, x, y = build(model_name)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=False)
    optimizer.zero_grad(set_to_none=True)
    iteration(model, optimizer, x, y)  # warm-up: creates the momentum buffers
    optimizer.zero_grad(set_to_none=True)  # gradients are made afresh in the traced backward
    recorder = Recorder()
    with without_profiler_annotations(), recorder:
        iteration(model, optimizer, x, y, recorder)

    named = {}
    for name, p in model.named_parameters():
        named[recorder.key(p)] = (name, "parameter")
        named[recorder.key(optimizer.state[p]["momentum_buffer"])] = (name + ".momentum", "optimizer_state")
        named[recorder.key(p.grad)] = (name + ".grad", "parameter_gradient")
    for name, b in model.named_buffers():
        named[recorder.key(b)] = (name, "parameter")
    named[recorder.key(x)] = ("x", "input")
    named[recorder.key(y)] = ("labels", "input")

    # Op names say phase, type and occurrence; unnamed tensors are named after their producer.
    count = {}
    for op in recorder.ops:
        count[op["type"]] = count.get(op["type"], 0) + 1
        op["name"] = f"{op['phase']}.{op['type']}.{count[op['type']]}"
        for j, k in enumerate(op["outputs"]):
            suffix = f".out{j}" if len(op["outputs"]) > 1 else ".out"
            recorder.tensors[k]["producer"] = op["name"] + suffix

    # Tensors in order of first appearance; ids are those positions.
    ids = {}
    for op in recorder.ops:
        for k in op["inputs"] + op["outputs"]:
            ids.setdefault(k, len(ids))
    default_kind = {"forward": "activation", "backward": "gradient", "update": "other", None: "other"}
    tensors = []
    for k, i in ids.items():
        t = recorder.tensors[k]
        name, kind = named.get(k, (t.get("producer", f"t{i}"), default_kind[t["made_in"]]))
        tensors.append({"id": i, "name": name, "bytes": t["bytes"], "kind": kind,
                        "shape": t["shape"], "dtype": t["dtype"]})

    ops = []
    for i, op in enumerate(recorder.ops):
        entry = {"id": i, "name": op["name"], "type": op["type"], "phase": op["phase"], "time_us": op["time_us"],
                 "inputs": [ids[k] for k in op["inputs"]], "outputs": [ids[k] for k in op["outputs"]]}
        if op["phase"] == "forward" and (op["mutates"] or op["type"] in UPDATES_STATE):
            entry["recomputable"] = False  # running it again would update the state twice
        if op["type"] in BATCH_SPLITTABLE:
            entry["split_dims"] = [0]
        ops.append(entry)
    return {"format": "memplan-graph", "version": 1, "name": f"pytorch-{model_name}",
            "exporter": f"examples/pytorch/export_graph.py, torch {torch.__version__}, CPU",
            "tensors": tensors, "ops": ops, "schedule": [op["id"] for op in ops]}


def write(doc, path):
    """One tensor or op per line, as memplan's own writer lays documents out."""
    lines = ["{"]
    items = list(doc.items())
    for n, (key, value) in enumerate(items):
        end = "," if n + 1 < len(items) else ""
        if isinstance(value, list) and value and isinstance(value[0], dict):
            body = ",\n".join("    " + json.dumps(v) for v in value)
            lines.append(f'  "{key}": [\n{body}\n  ]{end}')
        else:
            lines.append(f'  "{key}": {json.dumps(value)}{end}')
    lines.append("}")
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    doc = export(args.model)
    write(doc, args.out)
    print(f"{args.out}: {len(doc['tensors'])} tensors, {len(doc['ops'])} ops")


if __name__ == "__main__":
    main()
