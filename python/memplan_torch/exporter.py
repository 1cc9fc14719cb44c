"""Export one PyTorch training iteration as a memplan-graph v1 document.

The iteration (forward, backward, optimizer step) runs under a
TorchDispatchMode that sees every ATen op with its real tensors, the
autograd engine's backward ops and the optimizer's in-place updates
included. trace.py says how ops and storages become memplan ops and tensors.

Kinds: parameters and buffers are `parameter`, optimizer state
`optimizer_state`, the batch and target `input`, what ends in `.grad`
`parameter_gradient`; other tensors are `activation` if made in the forward
phase, `gradient` in backward, `other` in the update.

Recomputation (DESIGN §4 `recomputable`): forward ops are recomputable except
those that draw random numbers (vocabulary.RANDOM) and those that write
persistent state in place (`num_batches_tracked += 1`). In-place ops on
activations (`relu_`) are recomputable: the runner re-runs them on a copy of
their input, which becomes the new version. Batch norm's running statistics
are a side effect that recomputation must not repeat: the runner gives a
recomputed batch norm scratch copies of them (its outputs in training mode
depend on the batch statistics only), so the op is recomputable.
"""

import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import vocabulary
from .trace import WRITES_RUNNING_STATS, OpEffect, is_scalar_result, tensor_result, storage_bytes, storage_key, tensors_in, training_step, without_profiler_annotations

TIMES = ("cpu", "estimate", "cuda")


class Recorder(TorchDispatchMode):
    """Records every ATen op of one iteration as a memplan op over tensor versions."""

    def __init__(self, persistent, time_op):
        super().__init__()
        self.phase = "forward"
        self.time_op = time_op      # (func, args, kwargs, run) -> (out, time_us)
        self.tensors = []           # tensor entries, id = position
        self.current = {}           # storage key -> id of its current version
        self.keep = []              # every storage seen: none is freed, so no key is reused
        self.ops = []
        self.unpacked = []          # ids of saved tensors unpacked since the last op
        self.readers = {}           # tensor id -> ops that have read it
        self.count = {}             # ATen name -> ops of it so far (op names say the occurrence)
        for t, name, kind in persistent:
            self.current[storage_key(t)] = self._add(t, name, kind)
            self.keep.append(t.storage())
        self.persistent = set(self.current.values())

    def _add(self, t, name, kind):
        self.tensors.append({"id": len(self.tensors), "name": name, "bytes": storage_bytes(t), "kind": kind,
                             "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")})
        return len(self.tensors) - 1

    def _read(self, k, t=None):
        if k not in self.current:
            if t.dim() == 0:
                return None  # a Python scalar autograd saved (is_scalar_result): no device memory
            # a storage made outside the traced ops (a user's constant)
            self.current[k] = self._add(t, f"t{len(self.tensors)}", "other")
        return self.current[k]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        by_key = {storage_key(t): t for t in _tensors(args, kwargs)}
        out, time_us = self.time_op(func, args, kwargs)
        if is_scalar_result(out):
            return tensor_result(out)
        effect = OpEffect(func, args, kwargs, out)
        if not effect.is_op:
            return out
        # Keep storages, not tensors: AccumulateGrad steals a gradient only when
        # no one else holds the tensor, as in an untraced step.
        self.keep.extend(t.storage() for t in list(by_key.values()) + effect.made)
        self.count[effect.name] = self.count.get(effect.name, 0) + 1
        name = f"{self.phase}.{effect.name}.{self.count[effect.name]}"
        inputs = [tid for tid in (self._read(k, by_key[k]) for k in effect.reads) if tid is not None]
        inputs += [tid for tid in self.unpacked if tid not in inputs]
        self.unpacked = []
        outputs, in_place = [], []
        for k in effect.writes:
            if self.current[k] in self.persistent:
                continue
            if self._folds(effect, k):
                in_place.append(self.current[k])
            else:  # a new version of the storage
                self.current[k] = self._add(by_key[k], f"{name}.out{len(outputs)}", self._made_kind())
                outputs.append(self.current[k])
        for tid in inputs:
            self.readers[tid] = self.readers.get(tid, 0) + 1
        for t in effect.made:
            self.current[storage_key(t)] = self._add(t, f"{name}.out{len(outputs)}", self._made_kind())
            outputs.append(self.current[storage_key(t)])
        writes_state = effect.name not in WRITES_RUNNING_STATS and any(
            self.current[k] in self.persistent for k in effect.writes)
        op = {"id": len(self.ops), "name": name, "type": vocabulary.memplan_type(effect.name, self.phase),
              "aten": effect.name, "phase": self.phase, "time_us": round(time_us, 3),
              "inputs": inputs, "outputs": outputs}
        if self.phase == "forward":
            op["recomputable"] = not (writes_state or effect.name in vocabulary.RANDOM)
        if effect.name in vocabulary.BATCH_SPLITTABLE:
            op["split_dims"] = [0]
        if in_place:
            op["in_place"] = in_place
        self.ops.append(op)
        return out

    def _folds(self, effect, k):
        """A unary in-place op (`relu_`, `hardtanh_`, `mul_` by a scalar) on a
        tensor nothing has read since its producer made it changes that tensor,
        as PyTorch does, without a new version: it reads it and makes nothing
        (its `in_place` field names it), so that the graph holds one copy, not
        two, while it runs. Recomputing the producer replays such ops
        (runtime.py); random ops are not replayed, so they make versions."""
        tid = self.current[k]
        return effect.reads == [k] and effect.name not in vocabulary.RANDOM and not self.readers.get(tid)

    # Autograd's saved tensors. A backward node unpacks every tensor it saved,
    # though some it reads for their shape only (MeanBackward keeps its input):
    # they stay live until the node runs. Each unpacked tensor becomes an
    # input of the node's next op, so that plans keep it until then.
    @staticmethod
    def pack(t):
        return t

    def unpack(self, t):
        k = storage_key(t) if storage_bytes(t) else None
        if k in self.current:
            self.unpacked.append(self.current[k])
        return t

    def _made_kind(self):
        return {"forward": "activation", "backward": "gradient"}.get(self.phase, "other")


def _tensors(args, kwargs):
    return [t for t in tensors_in((args, kwargs)) if storage_bytes(t)]


def _op_timer(times, device):
    """How an op's time is taken: measured on the CPU, measured with CUDA
    events, or estimated by memplan's roofline for `device`."""
    if times == "cpu":
        def cpu(func, args, kwargs):
            start = time.perf_counter()
            out = func(*args, **kwargs)
            return out, (time.perf_counter() - start) * 1e6
        return cpu
    if times == "cuda":
        def cuda(func, args, kwargs):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            out = func(*args, **kwargs)
            end.record()
            end.synchronize()
            return out, begin.elapsed_time(end) * 1e3
        return cuda
    from ._native import native
    memplan = native("estimating op times for a device")

    def estimate(func, args, kwargs):
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        ins, outs = list(tensors_in((args, kwargs))), list(tensors_in(out))
        dtype = str(outs[0].dtype if outs else ins[0].dtype).replace("torch.", "") if (outs or ins) else "float32"
        return out, memplan.estimate_time_us(device, vocabulary.flops(name, args, outs),
                                             vocabulary.bytes_moved(ins + outs), gemm=name in vocabulary.GEMM,
                                             math=vocabulary.math_mode(dtype))
    return estimate


def export(model, example_inputs, target, loss_fn, optimizer, *, device=None, times=None, name="pytorch"):
    """Records one training iteration of `model` and returns it as a
    memplan-graph document (a dict).

    example_inputs: a tensor or tuple of tensors, the batch; target: what
    `loss_fn(model(*inputs), target)` compares with. A warm-up iteration on
    copies of the model and optimizer runs first so that the traced one is
    the steady state (momentum buffers exist); the model and optimizer passed
    in end one step further, as after any training step.
    device: a memplan device name (`memplan models` lists them);
    times: "estimate" (memplan's cost model for `device`; the default when a
    device is named), "cpu" (measured wall time), or "cuda" (CUDA events;
    the model must be on a GPU)."""
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    times = times or ("estimate" if device else "cpu")
    if times not in TIMES:
        raise ValueError(f"times: '{times}' is none of {', '.join(TIMES)}")
    if times == "estimate" and not device:
        raise ValueError("times 'estimate' needs a device (for example device='v100')")
    timer = _op_timer(times, device)
    training_step(model, inputs, target, loss_fn, optimizer)  # warm-up: optimizer state exists
    recorder = Recorder(persistent_tensors(model, optimizer, inputs, target), timer)
    with without_profiler_annotations(), torch.autograd.graph.saved_tensors_hooks(recorder.pack, recorder.unpack), \
            recorder:
        training_step(model, inputs, target, loss_fn, optimizer, on_phase=lambda p: setattr(recorder, "phase", p))
    source = {"cpu": "CPU wall time", "cuda": "CUDA events", "estimate": f"memplan's roofline for {device}"}[times]
    return document(recorder, model, name, f"memplan_torch, torch {torch.__version__}, op times: {source}")


def document(recorder, model, name, exporter):
    """The memplan-graph document of what `recorder` saw of one step of
    `model`, its parameters' gradients named after them."""
    grads = []
    for pname, p in model.named_parameters():
        if p.grad is not None and storage_key(p.grad) in recorder.current:
            grads.append(recorder.current[storage_key(p.grad)])
            recorder.tensors[grads[-1]].update(name=pname + ".grad", kind="parameter_gradient")
    # What the caller still holds when the step returns: `.grad` (the next
    # step's zero_grad releases it) and the batch. A last op that reads them
    # keeps them live to the end, as in PyTorch; it runs no ATen op (no
    # `aten` field) and takes no time.
    batch = [t["id"] for t in recorder.tensors if t["kind"] == "input"]
    recorder.ops.append({"id": len(recorder.ops), "name": "update.step_end", "type": "step_end",
                         "phase": "update", "time_us": 0, "inputs": batch + grads, "outputs": []})
    return {"format": "memplan-graph", "version": 1, "name": name, "exporter": exporter,
            "tensors": recorder.tensors, "ops": recorder.ops, "schedule": [op["id"] for op in recorder.ops]}


def persistent_tensors(model, optimizer, inputs, target):
    """(tensor, name, kind) of what exists before the iteration starts."""
    found = [(p, name, "parameter") for name, p in model.named_parameters()]
    found += [(b, name, "parameter") for name, b in model.named_buffers()]
    names = {id(p): name for name, p in model.named_parameters()}
    for p, state in optimizer.state.items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and storage_bytes(value):
                found.append((value, f"{names.get(id(p), 'param')}.{key}", "optimizer_state"))
    found += [(x, f"input{i}" if len(inputs) > 1 else "x", "input") for i, x in enumerate(inputs)]
    if isinstance(target, torch.Tensor):
        found.append((target, "target", "input"))
    unique = {}
    for t, name, kind in found:
        if storage_bytes(t):
            unique.setdefault(storage_key(t), (t, name, kind))
    return list(unique.values())


def write(doc, path):
    """One tensor or op per line, as memplan's own writer lays documents out."""
    import json
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

