"""A training step that follows a memplan plan (plan.hpp's action list) inside PyTorch.

The step runs under a TorchDispatchMode that numbers the ATen ops exactly as
the exporter did (trace.py), and under torch.autograd.graph.saved_tensors_hooks:
autograd keeps a handle (tensor id and view) instead of each saved tensor,
and the runner holds the device copies. Before op i runs, the runner has
carried out every action the plan issues before compute(i), in issue order:
- swap_out(t): t's storage is copied to host memory (pinned, on its own CUDA
  stream where there is a GPU) and shrunk to nothing in place;
- swap_in(t): the storage gets its bytes back from the host copy, when
  the tensor is first needed after the swap-in is issued (see below);
- free(t): the runner drops its reference (t is recomputed later or dead);
  state with a host copy is shrunk, written back first if a forward op
  wrote it in place (batch norm's running statistics: `_write_back`);
- recompute(s): op s runs again on the tensors the plan brought back; an
  in-place op runs on a copy of its input (that copy is the new version),
  batch norm writes its running statistics into scratch copies, and the
  unary in-place ops folded into an output are replayed on it, so no side
  effect happens twice.
A tensor's device copy is also dropped after the last action that reads it
(plan.hpp: released automatically), as in the simulator. A swap-in is a
prefetch: the simulator starts it when its stream, its waits and the
memory let it, which may be many ops after it is issued, and the plan's
peak counts its bytes from then. The runner, which copies at once,
therefore carries out an issued swap-in only when something needs the
tensor: the next op or recompute that reads it, autograd unpacking it, a
PyTorch call on its storage, or the end of the step; so it holds the bytes
no earlier than the simulator does, but where autograd unpacks a saved
tensor ahead of the op that reads it. docs/pytorch.md says why actions run
when they do; accountant.py measures the bytes.

Communication (docs/pytorch-distributed.md). An op of the graph without an
`aten` field whose type is a collective or point-to-point one
(COMMUNICATION: a rank graph's `all_reduce` of a gradient bucket, a
pipeline stage's `send`) is done by torch.distributed, not by an ATen op of
the step: the runner passes its compute action when the plan reaches it.
An all-reduce's output (`bucketK.reduced`) has no storage of its own here:
DDP reduces the bucket in its own buffer and copies the result back into
the gradients it was filled from, so the plan's swaps of the bucket move
those gradients' storages. The ATen-level calls torch.distributed makes
itself (`c10d` ops, and ops on the communication buffers the caller
registers: DDP's copies into and out of its buckets; and every ATen call
made inside `communicating()`, the caller's own code around a collective,
such as ZeRO-2's staging of a bucket) are not ops of the graph: they run as
they are, after the plan has brought back what they read.
A reduce-scatter's output (ZeRO-2's `bucketK.shard`) does have a storage of
its own: the rank's shard of the reduced bucket, which the caller's
communication code makes (after the collective) and hands over by the
graph tensor's name in `communication_outputs`. When the plan passes the
reduce_scatter op, the runner takes that tensor as the op's output, as if
an ATen op had made it: from then on the plan's swaps and frees move its
storage and the accountant counts it. An op that makes outputs otherwise
(an all_gather with outputs: ZeRO-3) is refused; ZeRO-1/2's update-phase
`all_gather.parameters` makes none (it writes the parameters, which are
persistent state) and is passed like an all-reduce. The graph's last op
(`step_end`, no ATen op either) is passed the same way when the plan
reaches it: ZeRO's gather runs after it. A DDP rank graph's
`finalize_backward` (DDP waits for every bucket and copies it back into
the gradients before `backward()` returns) is passed only once the caller
says that DDP's end of backward has run (`end_backward()`, from the
training step's "update" phase): the plan's swaps after it must not move a
gradient DDP is still to write.
"""

import contextlib
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .trace import (OpEffect, is_scalar_result, storage_bytes, storage_key, tensor_result, tensors_in,
                    training_step, without_profiler_annotations, written_positions)
from .accountant import Accountant
from .exporter import persistent_tensors


# Op types done by the communication library (graph/vocabulary.hpp's communication_types).
COMMUNICATION = frozenset({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "send", "recv"})

# The end of backward that DDP carries out itself (a DDP rank graph's op of this type).
END_OF_BACKWARD = "finalize_backward"

_inside = threading.local()


def end_backward():
    """Tells the planned step running on this thread that the communication
    library's end of backward has run (DDP's copies of the reduced buckets
    into the gradients): the plan may pass `finalize_backward`. Outside a
    planned step it changes nothing."""
    runner = getattr(_inside, "runner", None)
    if runner is not None:
        runner.backward_ended = True


@contextlib.contextmanager
def communicating():
    """Marks the ATen calls made inside as the communication library's (the
    module comment): code around a collective that a caller runs from a
    hook (ZeRO-2 stages a bucket for its reduce-scatter and copies out the
    rank's shard). Outside a planned step it changes nothing."""
    outer = getattr(_inside, "depth", 0)
    _inside.depth = outer + 1
    try:
        yield
    finally:
        _inside.depth = outer


class PlanError(ValueError):
    """A plan or graph the runner cannot follow; the message names the op or tensor."""


class _Ref:
    """A tensor argument of a recorded op: which graph tensor, and the view of it."""
    __slots__ = ("tid", "size", "stride", "offset", "dtype")

    def __init__(self, tid, t):
        self.tid, self.size, self.stride, self.offset, self.dtype = \
            tid, tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype


def _template(value, tid_of):
    if isinstance(value, torch.Tensor):
        tid = tid_of(value) if storage_bytes(value) else None
        return value if tid is None else _Ref(tid, value)
    if isinstance(value, (list, tuple)):
        return type(value)(_template(v, tid_of) for v in value)
    return value


class PlannedStep:
    """`step(inputs, target)`: one training step (forward, backward,
    optimizer step) of `model` that follows `plan`, a memplan-plan document
    made for `graph`, the memplan-graph document `export` wrote for this
    model, optimizer, loss and batch shape. Returns the loss; `report` then
    holds what the accountant measured.

    run: what runs the iteration, `run(model, inputs, target, loss_fn,
    optimizer)` (trace.training_step by default; distributed.py runs a DDP
    wrapper of `model`, or a pipeline stage's 1F1B schedule, with it).
    communication_buffers: storage keys (trace.storage_key) of the
    communication library's own buffers, such as DDP's gradient buckets; a
    container the caller may fill later (the runner reads it as ops run).
    communication_outputs: graph tensor name -> the tensor the
    communication code made for a reduce-scatter's output (the module
    comment); a mapping the caller fills during the step."""

    def __init__(self, model, optimizer, loss_fn, graph, plan, run=training_step, communication_buffers=(),
                 communication_outputs=None):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.run, self.communication_buffers = run, communication_buffers
        self.communication_outputs = {} if communication_outputs is None else communication_outputs
        self.graph, self.plan = graph, plan
        self.tensors = graph["tensors"]
        self.ops = {op["id"]: op for op in graph["ops"]}
        self.order = graph.get("schedule") or [op["id"] for op in graph["ops"]]
        self._check_plan()
        self.actions = plan["actions"]
        self._index_communication()
        self._index_reads()
        self.report = None

    def framework(self, op_id):
        """Whether op `op_id` is done by the communication library (the module comment)."""
        op = self.ops[op_id]
        return "aten" not in op and op["type"] in COMMUNICATION

    def _index_communication(self):
        # An all-reduce's output lives in its inputs' storages; a
        # reduce-scatter's is handed over by the caller (the module comment).
        self.stand_ins, self.handed_over = {}, set()
        for op in self.ops.values():
            if not self.framework(op["id"]):
                continue
            for tid in op["outputs"]:
                if op["type"] == "all_reduce":
                    self.stand_ins[tid] = list(dict.fromkeys(op["inputs"]))
                elif op["type"] == "reduce_scatter":
                    self.handed_over.add(tid)
                else:
                    raise PlanError(f"graph: '{self.tensors[tid]['name']}' is made by {op['type']} "
                                    f"'{op['name']}', which the runner cannot hold")

    def _check_plan(self):
        if self.plan.get("format") != "memplan-plan":
            raise PlanError("plan: not a memplan-plan document (its 'format' field)")
        if not self.plan.get("feasible", True):
            raise PlanError(f"plan: the {self.plan.get('planner')} plan is not feasible: {self.plan.get('reason')}")

    def _index_reads(self):
        # The last action that reads each tensor: its device copy goes after it.
        self.release_after = {}
        last = {}
        for i, a in enumerate(self.actions):
            if a["kind"] in ("compute", "recompute"):
                op = self.ops[a["op"]]
                for t in op["inputs"] + op["outputs"]:
                    last[t] = i
        # The gradients a reduced bucket stands in are read where it is.
        for bucket, grads in self.stand_ins.items():
            for t in grads:
                last[t] = max(last.get(t, -1), last.get(bucket, -1))
        for t, i in last.items():
            self.release_after.setdefault(i, []).append(t)
        self.last_read = last

    def __call__(self, inputs, target):
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        runner = _Runner(self, persistent_tensors(self.model, self.optimizer, inputs, target))
        outer, _inside.runner = getattr(_inside, "runner", None), runner
        try:
            with without_profiler_annotations(), \
                    torch.autograd.graph.saved_tensors_hooks(runner.pack, runner.unpack), runner:
                runner.advance()
                loss = self.run(self.model, inputs, target, self.loss_fn, self.optimizer)
        finally:
            _inside.runner = outer
        runner.finish()
        self.report = runner.report()
        runner.restore_offloaded()
        return loss


class _Runner(TorchDispatchMode):
    def __init__(self, step, persistent):
        super().__init__()
        self.s = step
        self.internal = False
        self.current = {}     # storage key -> id of the tensor version it holds
        self.resident = {}    # tensor id -> a tensor over its whole device storage (the runner's copy)
        self.host = {}        # tensor id -> its latest host copy
        self.dirty = set()    # ids of state written in place on the device since its host copy was made
        self.off = set()      # ids of tensors whose device copy is released (swapped out or freed)
        self.recipes = {}     # op id -> (func, argument templates)
        self.replays = {}     # tensor id -> the unary in-place ops run on it (exporter.Recorder._folds)
        self.acc = Accountant()
        self.next = 0         # position in the schedule of the next op
        self.ap = 0           # the next action
        self.swapped = self.recomputed = self.early = self.spilled_bytes = self.written_back_bytes = 0
        self.spilled = set()  # ids of freed tensors Python still holds, in host memory (_spill)
        self.done = set()     # actions carried out ahead of their turn (_early)
        self.computed = set()  # ops run (a split op's later micro-ops are then no-ops)
        self.micro_released = {}  # tensor id -> {part: action} of its micro-tensors released so far
        self.micro_actions = 0
        self.communication_ops = self.communication_calls = self.communication_restored_bytes = 0
        self.pending = {}     # tensor id -> its swap-in, issued and not carried out yet (the module comment)
        self.shrinking = []   # (id, tensor) swapped out, to shrink when the next autograd node begins
        self.awaited = set()  # ids of reduce-scatter outputs passed and not handed over yet (_collect)
        self.backward_ended = False  # end_backward() was called
        self.device = next(iter(step.model.parameters())).device
        self.stream = torch.cuda.Stream() if self.device.type == "cuda" else None
        for tid, (t, name, _) in enumerate(persistent):
            want = step.tensors[tid]
            if want["name"] != name or want["bytes"] != storage_bytes(t):
                raise PlanError(f"graph: tensor {tid} is '{want['name']}' of {want['bytes']} bytes; this model "
                                f"has '{name}' of {storage_bytes(t)} bytes there: was the graph exported from "
                                "this model, optimizer and batch?")
            self.current[storage_key(t)] = tid
        self.state = {tid: t for tid, (t, _, _) in enumerate(persistent)}  # never released
        self.state_bytes = sum(storage_bytes(t) for t in self.state.values())
        # Offloaded state (plan.hpp) starts the step in host memory.
        for tid in step.plan.get("offloaded_state", []):
            self._swap_out({"kind": "swap_out", "tensor": tid}, counted=False)

    # ---- the ATen ops of the step ------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.internal:
            return tensor_result(func(*args, **kwargs))
        if self._communication_call(func, args, kwargs):
            return self._communicate(func, args, kwargs)
        refs, folded = None, set()
        if self._upcoming().get("aten") == func.overloadpacket.__name__:
            self.advance()  # the actions issued before this op's compute
            upcoming = self.s.ops[self.s.order[self.next]]
            folded = set(upcoming.get("in_place", []))
            if upcoming["phase"] != "backward":
                self._shrink_swapped()
        self._bring_back(args, kwargs)
        self._preserve_overwritten(func, args, folded)
        out = func(*args, **kwargs)
        if is_scalar_result(out):
            return tensor_result(out)
        effect = OpEffect(func, args, kwargs, out)
        self.acc.watch(tensors_in((args, kwargs, out)))
        if not effect.is_op:
            return out
        if self.next < len(self.s.order) and "aten" not in self.s.ops[self.s.order[self.next]]:
            self.advance()  # not the op that comes next: the check below names it
        if self.next >= len(self.s.order):
            raise PlanError(f"the step ran more ops than the graph has ({len(self.s.order)}): '{effect.name}'")
        op = self.s.ops[self.s.order[self.next]]
        if op["type"] == END_OF_BACKWARD:
            raise PlanError(f"the step ran '{effect.name}' before the graph's '{op['name']}' was passed: "
                            "the caller must call runtime.end_backward() when DDP's backward has ended")
        if op.get("aten", effect.name) != effect.name:
            raise PlanError(f"the step left the exported graph at op {op['id']} ('{op['name']}'): it ran "
                            f"'{effect.name}'; export the graph again from this model and batch")
        action = self.s.actions[self.ap] if self.ap < len(self.s.actions) else None
        if action is None or action["kind"] != "compute" or action["op"] != op["id"]:
            raise PlanError(f"plan: op '{op['name']}' runs where the plan issues {action}")
        if op["phase"] == "forward" and (op.get("recomputable", True) or "in_place" in op):
            refs = _template((args, kwargs), self._tid)
        for tid in op.get("in_place", []):  # replayed when its producer is recomputed
            self.replays.setdefault(tid, []).append((func, refs))
        by_key = {storage_key(t): t for t in tensors_in((args, kwargs)) if storage_bytes(t)}
        self.dirty.update(self.current[k] for k in effect.writes if self.current.get(k) in self.state)
        made = [by_key[k] for k in effect.writes
                if self.current.get(k) not in self.state and self.current.get(k) not in folded] + effect.made
        self._hold(op, made)
        if refs is not None:
            self.recipes[op["id"]] = (func, refs)
        self.next += 1
        self.computed.add(op["id"])
        self._passed(self.ap)
        self.ap += 1
        return out

    def _upcoming(self):
        """The next op of the schedule that runs as an ATen op (the others are passed)."""
        j = self.next
        while j < len(self.s.order) and "aten" not in self.s.ops[self.s.order[j]]:
            j += 1
        return self.s.ops[self.s.order[j]] if j < len(self.s.order) else {}

    def _communication_call(self, func, args, kwargs):
        """torch.distributed's own ATen-level calls: its `c10d` ops, ops on
        the communication buffers the caller registered, and every call made
        inside communicating()."""
        if func.namespace == "c10d" or getattr(_inside, "depth", 0):
            return True
        buffers = self.s.communication_buffers
        return bool(buffers) and any(storage_bytes(t) and storage_key(t) in buffers
                                     for t in tensors_in((args, kwargs)))

    def _communicate(self, func, args, kwargs):
        """Runs a call of the communication library. What it reads or writes
        must be on the device: the plan's actions before the next op run
        first (a send after its tensor's swap-in); a gradient the plan moved
        out with its reduced bucket gets its bytes back when DDP copies the
        reduced values into it (communication_restored_bytes)."""
        self._bring_back(args, kwargs)
        for t in tensors_in((args, kwargs)):
            if t.numel() and t.storage().nbytes() == 0:
                cdata = t.storage()._cdata
                tid = next((tid for tid in self.off if tid in self.resident and tid in self.host and
                            self.resident[tid]._cdata == cdata), None)
                if tid is None:
                    raise PlanError(f"{func} reads a storage of the graph that the plan has released")
                self._swap_in({"kind": "swap_in", "tensor": tid})
                self.communication_restored_bytes += t.storage().nbytes()
        self.communication_calls += 1
        out = func(*args, **kwargs)
        self._collect()
        self._account()
        return out

    def _collect(self):
        """Takes the reduce-scatter outputs the communication code has handed
        over (PlannedStep's communication_outputs) as the graph's tensors."""
        for tid in list(self.awaited):
            t = self.s.communication_outputs.get(self.s.tensors[tid]["name"])
            if t is not None:
                if storage_bytes(t) != self.s.tensors[tid]["bytes"]:
                    raise PlanError(f"graph: '{self.s.tensors[tid]['name']}' is {self.s.tensors[tid]['bytes']} "
                                    f"bytes; the communication code made {storage_bytes(t)}")
                self.awaited.discard(tid)
                self._keep(tid, t)

    def _bring_back(self, args, kwargs):
        """PyTorch takes views of a tensor (the `.t()` of a weight) before the
        op that reads it: a shrunk storage among the arguments makes the
        actions before the next compute run now."""
        if any(t.storage().nbytes() == 0 and t.numel() for t in tensors_in((args, kwargs))):
            self.advance()
            for t in tensors_in((args, kwargs)):
                if t.storage().nbytes() == 0 and t.numel():
                    self._materialize([self._pending_storage(t.storage())])

    def _preserve_overwritten(self, func, args, folded):
        """An in-place op makes a new version of a storage (trace.py). Where
        the plan still reads the old version after this op (to recompute
        from it), the old version moves to a copy first; the graph counts
        both versions, so the budget holds the copy."""
        for i in written_positions(func, args):
            for t in tensors_in(args[i]):
                tid = self.current.get(storage_key(t)) if storage_bytes(t) else None
                if tid is None or tid in self.state or tid in folded or \
                        self.s.last_read.get(tid, -1) <= self.ap:
                    continue
                with self._untraced():
                    copy = self._whole(self.resident[tid]).clone()
                self.resident[tid] = copy.storage()
                self.acc.track(copy)

    @contextlib.contextmanager
    def _untraced(self):
        """The runner's own ATen calls (copies, views, recomputes) pass
        through the dispatch mode without being counted as the step's ops."""
        outer, self.internal = self.internal, True
        try:
            yield
        finally:
            self.internal = outer

    def _tid(self, t):
        tid = self._version(storage_key(t))
        if tid is None and t.dim() == 0:
            return None  # a Python scalar (exporter.Recorder._read): kept as it is
        if tid is None:
            raise PlanError(f"a storage of {storage_bytes(t)} bytes reached an op without being made by one")
        return tid

    def _version(self, k):
        """The id of the version the storage at address `k` holds, or None
        where the plan has released that version (its address may since hold
        a storage no op made)."""
        tid = self.current.get(k)
        return tid if tid in self.state or tid in self.resident else None

    def _hold(self, op, made):
        if len(made) != len(op["outputs"]):
            raise PlanError(f"op '{op['name']}' made {len(made)} tensors; the graph says {len(op['outputs'])}")
        for tid, t in zip(op["outputs"], made):
            self._keep(tid, t)

    def _keep(self, tid, t):
        """The runner holds the storage, not the tensor: AccumulateGrad steals
        a gradient only when no one else holds the tensor."""
        self.current[storage_key(t)] = tid
        self.resident[tid] = t.storage()
        self.off.discard(tid)
        self.acc.track(t)

    # ---- the plan's other actions ------------------------------------------------

    def advance(self):
        """Carries out the actions issued before the next compute. They run
        when the next op is about to start (or autograd unpacks its saved
        tensors), not as soon as the previous op ends: PyTorch makes views of
        an op's outputs after it (a `.t()` in a backward formula), and those
        must find the storage whole."""
        actions = self.s.actions
        self._collect()
        while self.ap < len(actions):
            a = actions[self.ap]
            if a["kind"] == "compute" and a["op"] not in self.computed:
                self._materialize(self.s.ops[a["op"]]["inputs"])
                if not (self.next < len(self.s.order) and self.s.order[self.next] == a["op"] and
                        "aten" not in self.s.ops[a["op"]]):
                    break
                if self.s.ops[a["op"]]["type"] == END_OF_BACKWARD and not self.backward_ended:
                    break  # DDP is still to copy the buckets back (the module comment)
                # No ATen op of the step runs it: torch.distributed does (DDP's
                # all-reduce runs from autograd's hooks), or it is the graph's
                # end (`step_end`, after which ZeRO's gather of the updated
                # parameters runs: its swap-ins are issued after step_end)
                self.computed.add(a["op"])
                self.next += 1
                self.communication_ops += self.s.framework(a["op"])
                self.awaited.update(t for t in self.s.ops[a["op"]]["outputs"] if t in self.s.handed_over)
                self._collect()
            elif self.ap not in self.done and a["kind"] != "compute":
                if a["kind"] == "swap_in" and a.get("parts", 1) == 1:
                    self.pending[a["tensor"]] = a  # carried out when the tensor is needed
                elif a["kind"] in ("swap_out", "free") and a.get("tensor") in self.pending:
                    del self.pending[a["tensor"]]  # never needed back on the device: its host copy stands
                else:
                    getattr(self, "_" + a["kind"])(a) if a.get("parts", 1) == 1 else self._micro(a)
            self._passed(self.ap)
            self.ap += 1
        self._account()

    def _micro(self, a):
        """Split plans (TSPLIT §V-A). PyTorch runs an op once, whole, so the
        runner runs a split op whole at its first micro-op (later micro-ops
        have nothing left to do), and moves a tensor whole: it leaves when its
        last micro-tensor is released and comes back with its first. The
        accountant shows the cost: up to one tensor above the plan's peak
        around each split op."""
        tid = a.get("tensor")
        if a["kind"] == "recompute":
            self._recompute(a)
        elif a["kind"] == "swap_in":
            if tid in self.off or tid not in self.resident:  # swapped out, or freed since
                self.pending.setdefault(tid, {"kind": "swap_in", "tensor": tid})
        else:
            parts = self.micro_released.setdefault(tid, {})
            parts[a["part"]] = a["kind"]
            if len(parts) == a["parts"]:
                del self.micro_released[tid]
                whole = "swap_out" if "swap_out" in parts.values() else "free"
                getattr(self, "_" + whole)({"kind": whole, "tensor": tid})
        self.micro_actions += 1

    def _early(self, tid):
        """A backward node unpacks all its saved tensors before its first op;
        where the plan brings one back only before a later op of that node,
        its swap-in or recompute runs now (counted in the report as early)."""
        if tid in self.pending:  # issued already: not early
            self._swap_in(self.pending[tid])
            return
        for i in range(self.ap, len(self.s.actions)):
            a = self.s.actions[i]
            brings = a["tensor"] == tid if a["kind"] == "swap_in" else \
                a["kind"] == "recompute" and tid in self.s.ops[a["op"]]["outputs"]
            if brings and i not in self.done:
                getattr(self, "_" + a["kind"])(a)
                self.done.add(i)
                self.early += 1
                return

    def _passed(self, i):
        for tid in self.s.release_after.get(i, ()):
            if tid not in self.state:
                self.resident.pop(tid, None)
                self.pending.pop(tid, None)
        self._account()

    def _materialize(self, tids):
        """Carries out the pending swap-ins of these tensors (the module comment)."""
        for tid in tids:
            if tid in self.pending:
                self._swap_in(self.pending[tid])

    def _pending_storage(self, storage):
        """The tensor with a pending swap-in whose storage `storage` is, or None."""
        for tid in self.pending:
            held = self._storage(tid)
            if held is not None and held._cdata == storage._cdata:
                return tid
        return None

    def _storage(self, tid):
        if tid in self.resident:
            return self.resident[tid]
        return self.state[tid].storage() if tid in self.state else None

    def _on_device(self, a):
        """The storage of `a`'s tensor, which must be on the device."""
        tid = a["tensor"]
        storage = self._storage(tid)
        if storage is None or tid in self.off:
            raise PlanError(f"plan: {a['kind']} of '{self.s.tensors[tid]['name']}', which is not on the device")
        return tid, storage

    def _whole(self, storage):
        """A tensor over all of `storage` (not counted as an op)."""
        with self._untraced():
            return torch.empty(0, dtype=storage.dtype, device=storage.device).set_(storage)

    def _stood_in(self, a):
        """An action on a reduced bucket, carried out on the gradients it
        stands in (the module comment); True if `a` was one."""
        tid = a["tensor"]
        if tid not in self.s.stand_ins:
            return False
        if a["kind"] == "swap_out":
            self.off.add(tid)
        elif a["kind"] == "swap_in":
            self.off.discard(tid)
        for grad in self.s.stand_ins[tid]:
            if a["kind"] == "free":
                self.resident.pop(grad, None)  # PyTorch's .grad keeps them: the accountant counts them
            elif a["kind"] == "swap_in" and grad in self.off:
                self._swap_in({"kind": "swap_in", "tensor": grad})
            elif a["kind"] == "swap_out" and grad in self.resident and grad not in self.off:
                self._swap_out({"kind": "swap_out", "tensor": grad})
        return True

    def _swap_out(self, a, counted=True):
        """Copies the storage to the host and shrinks it to nothing in place:
        every tensor on it (autograd's, the model's) stays valid and gets its
        bytes back at the swap-in."""
        if self._stood_in(a):
            return
        tid, storage = self._on_device(a)
        whole = self._whole(storage)
        with self._untraced():
            host = torch.empty(whole.shape, dtype=whole.dtype, pin_memory=whole.is_cuda)
            if self.stream is not None and whole.is_cuda:
                self.stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.stream):
                    host.copy_(whole, non_blocking=True)
                self.stream.synchronize()
            else:
                host.copy_(whole)
        self.host[tid] = host
        self.dirty.discard(tid)
        self.off.add(tid)
        self.swapped += storage.nbytes() if counted else 0
        if tid in self.state:
            self._shrink(tid, storage)
        else:
            self.shrinking.append((tid, storage))

    def _shrink(self, tid, storage):
        """Releases the storage's bytes. Its address goes from `current`
        with them: PyTorch may place a storage no op made there next (a
        Python scalar it wraps), which is no version of the graph's; the
        swap-in registers the address it gets."""
        if self.current.get(k := storage.data_ptr()) == tid:
            del self.current[k]
        self.acc.park(tid, storage)
        storage.resize_(0)

    def _shrink_swapped(self):
        """Shrinks the storages swapped out since the last autograd node
        began. The node that made a tensor may still take views of it after
        its last op (AddmmBackward's `.t()` of the weight gradient), and a
        view of a shrunk storage is an error; the next node cannot."""
        for tid, storage in self.shrinking:
            if tid in self.off and storage.nbytes():
                self._shrink(tid, storage)
        self.shrinking = []

    def _swap_in(self, a):
        self.pending.pop(a["tensor"], None)
        if self._stood_in(a):
            return
        tid = a["tensor"]
        if tid not in self.host:
            raise PlanError(f"plan: swap_in of '{self.s.tensors[tid]['name']}' without a host copy")
        host = self.host[tid]
        self.off.discard(tid)
        self.dirty.discard(tid)
        storage = self._storage(tid)
        if storage is None:  # its storage went with a free: a new one
            with self._untraced():
                fresh = torch.empty(host.shape, dtype=host.dtype, device=self.device)
            self._keep(tid, fresh)
            storage = self.resident[tid]
        if storage.nbytes() == 0:
            storage.resize_(host.numel())
        whole = self._whole(storage)
        with self._untraced():
            if self.stream is not None and whole.is_cuda:
                with torch.cuda.stream(self.stream):
                    whole.copy_(host, non_blocking=True)
                torch.cuda.current_stream().wait_stream(self.stream)
            else:
                whole.copy_(host)
        self.current[storage.data_ptr()] = tid
        self.acc.unpark(tid, storage, whole)

    def _free(self, a):
        if self._stood_in(a):
            return
        if a["tensor"] in self.off or (a["tensor"] not in self.resident and a["tensor"] not in self.state):
            return  # released already (swapped out, or its last reader has ended: plan.hpp)
        tid, storage = self._on_device(a)
        if tid not in self.state and self.acc.referenced(storage.data_ptr()):
            self._spill(tid, storage)
        elif tid not in self.state:
            self.resident.pop(tid)
        elif self.s.tensors[tid]["kind"] == "input":
            pass  # the caller holds its batch: the accountant keeps counting it
        elif tid in self.host:  # plan.hpp: a host copy holds its latest update
            self._write_back(tid, storage)
            self.off.add(tid)
            self._shrink(tid, storage)
        else:
            raise PlanError(f"plan: free of persistent tensor '{self.s.tensors[tid]['name']}' without a host copy")

    def _write_back(self, tid, storage):
        """State that a forward op wrote in place since its host copy was
        made (batch norm's running statistics, `num_batches_tracked += 1`:
        the graph records those writes as reads, so the plan frees the
        device copy believing the host copy current) is copied back to the
        host first, or the write would be lost (`written_back_bytes`)."""
        if tid not in self.dirty:
            return
        self.dirty.discard(tid)
        with self._untraced():
            self.host[tid].copy_(self._whole(storage))
        self.written_back_bytes += storage.nbytes()

    def _spill(self, tid, storage):
        """A freed tensor that Python still holds (nn.Module keeps a layer's
        input until the layer returns; the graph ends it at its last ATen
        use): dropping the runner's reference would free nothing, so its
        storage goes to host memory like a swap-out, and the recompute that
        brings it back restores those bytes into the same storage, where the
        Python objects on it find them (`spilled_bytes` in the report)."""
        self._swap_out({"kind": "free", "tensor": tid}, counted=False)
        self.spilled.add(tid)
        self.spilled_bytes += storage.nbytes()

    def _recompute(self, a):
        op = self.s.ops[a["op"]]
        self._materialize(op["inputs"])
        if op["id"] not in self.recipes:
            raise PlanError(f"plan: recompute of '{op['name']}', which is not recomputable")
        need = [tid for tid in op["outputs"] if tid not in self.resident or tid in self.off]
        if not need:
            return  # a later micro-op of a split recompute: the whole op ran at the first
        if all(tid in self.spilled for tid in need):
            for tid in need:
                self._restore(tid)
            return
        func, refs = self.recipes[op["id"]]
        args, kwargs = self._resolve(refs, op)
        written = written_positions(func, args)
        args = tuple(self._scratch(v) if i in written else v for i, v in enumerate(args))
        with self._untraced():
            out = func(*args, **kwargs)
        versions = [args[i] for i in sorted(written) if refs[0][i].tid not in self.state]
        made = versions + OpEffect(func, args, kwargs, out).made
        missing = [(tid, t) for tid, t in zip(op["outputs"], made) if tid not in self.resident or tid in self.off]
        if len(made) != len(op["outputs"]):
            raise PlanError(f"recomputed '{op['name']}' made {len(made)} tensors; the graph says "
                            f"{len(op['outputs'])}")
        for tid, t in missing:
            if tid in self.spilled:
                self._restore(tid)
                continue
            self._keep(tid, t)
            for replay, replay_refs in self.replays.get(tid, []):
                replay_args, replay_kwargs = self._resolve(replay_refs, op)
                with self._untraced():
                    replay(*replay_args, **replay_kwargs)
        self.recomputed += 1

    def _restore(self, tid):
        self.spilled.discard(tid)
        self._swap_in({"kind": "swap_in", "tensor": tid})

    def _scratch(self, value):
        with self._untraced():
            return value.clone() if isinstance(value, torch.Tensor) else value

    def _resolve(self, value, op):
        if isinstance(value, _Ref):
            return self._view(value, f"recomputing '{op['name']}'")
        if isinstance(value, (list, tuple)):
            return type(value)(self._resolve(v, op) for v in value)
        if isinstance(value, dict):
            return {k: self._resolve(v, op) for k, v in value.items()}
        return value

    def _view(self, ref, purpose):
        base = self._storage(ref.tid)
        if base is None or ref.tid in self.off:
            where = "in host memory" if ref.tid in self.host else "freed"
            raise PlanError(f"{purpose} needs '{self.s.tensors[ref.tid]['name']}', which the plan left {where}")
        with self._untraced():
            view = torch.empty(0, dtype=ref.dtype, device=base.device)
            view.set_(base, ref.offset, ref.size, ref.stride)
        self.acc.watch([view])
        return view

    # ---- autograd's saved tensors ------------------------------------------------

    def pack(self, t):
        tid = self._version(storage_key(t)) if storage_bytes(t) else None
        if tid is None or tid in self.state:
            return t
        return _Ref(tid, t)

    def unpack(self, handle):
        self.advance()
        self._shrink_swapped()
        if isinstance(handle, torch.Tensor):
            return handle
        if handle.tid in self.off or handle.tid not in self.resident:
            self._early(handle.tid)
        return self._view(handle, f"the backward of op {self.s.order[min(self.next, len(self.s.order) - 1)]}")

    def _account(self):
        held = {st.data_ptr() for st in self.resident.values()}
        self.acc.measure(held, self.state_bytes - sum(self.s.tensors[t]["bytes"] for t in self.off if t in self.state))

    def finish(self):
        """After the last ATen op: the graph's last op (`step_end`, which
        runs no ATen op), then the actions after it."""
        self.advance()
        self._shrink_swapped()
        while self.next < len(self.s.order) and "aten" not in self.s.ops[self.s.order[self.next]]:
            action = self.s.actions[self.ap] if self.ap < len(self.s.actions) else None
            if action is None or action["kind"] != "compute" or action["op"] != self.s.order[self.next]:
                raise PlanError(f"plan: the graph's last op runs where the plan issues {action}")
            self.next += 1
            self._passed(self.ap)
            self.ap += 1
            self.advance()
        if self.next != len(self.s.order) or self.ap != len(self.s.actions):
            raise PlanError(f"the step ran {self.next} of the graph's {len(self.s.order)} ops")
        if self.awaited:
            names = ", ".join(sorted(self.s.tensors[t]["name"] for t in self.awaited))
            raise PlanError(f"the communication code never handed over {names} (communication_outputs)")
        self._materialize(list(self.pending))  # the step's results are whole when it returns

    def restore_offloaded(self):
        """Between steps the model keeps its parameters whole: offloaded
        state comes back after the accountant has stopped."""
        for tid in self.s.plan.get("offloaded_state", []):
            if tid in self.off:
                self._swap_in({"kind": "swap_in", "tensor": tid})

    def report(self):
        out = {"accounted_peak_bytes": self.acc.peak, "swapped_out_bytes": self.swapped,
               "recomputed_ops": self.recomputed,
               "early_actions": self.early, "spilled_bytes": self.spilled_bytes,
               "written_back_bytes": self.written_back_bytes,
               "micro_actions": self.micro_actions}
        if self.communication_ops or self.communication_calls:
            out.update(communication_ops=self.communication_ops, communication_calls=self.communication_calls,
                       communication_restored_bytes=self.communication_restored_bytes)
        if torch.cuda.is_available():
            out["cuda_max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        return out
