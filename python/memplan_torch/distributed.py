"""memplan plans inside torch.distributed: every rank of a CPU process group
(gloo, loopback) trains under its own plan, and its gradients and updated
parameters are compared bit for bit with an unplanned run of the same
distributed step (docs/pytorch-distributed.md).

- `ddp`: N ranks each run DistributedDataParallel over their own shard of
  the batch. A rank's graph is the exporter's single-GPU graph of its shard
  turned into the rank's iteration by memplan (`memplan.data_parallel_rank`:
  an `all_reduce` per gradient bucket on the communication stream, the
  updates reading the reduced buckets); the plan is made for that graph.
- `zero2`: ZeRO stage 2 over N ranks: every rank runs the whole model on
  its shard of the batch (no DDP wrapper); each gradient bucket, when its
  last gradient exists, is reduce-scattered so that the rank keeps only its
  1/N shard of every gradient (`bucketK.shard`), the optimizer (SGD with
  momentum, its state 1/N of every parameter) updates the rank's 1/N of
  every parameter from that shard, and the updated parameters are
  all-gathered (`ShardedSGD`). The rank graph is
  `memplan.data_parallel_rank(graph, mode="zero2", ...)`.
- `pipeline`: 2 ranks each hold one stage of the model and run a 1F1B
  schedule over M micro-batches, sending activations forward and boundary
  gradients back. A rank's graph is its stage's whole iteration (every
  micro-batch's forward and backward, interleaved as 1F1B runs them, and the
  optimizer step), exported with the received tensors as `recv` ops and the
  sent ones read by `send` ops.

runtime.py says what the runner does with communication ops.
"""

import copy
import datetime
import json
import os
import pathlib
import socket
import tempfile
import time
import traceback

import torch
import torch.distributed as dist

from . import models
from ._native import native
from .exporter import Recorder, _op_timer, document, export, persistent_tensors
from .runtime import END_OF_BACKWARD, PlanError, PlannedStep, communicating, end_backward
from .trace import aten_name, storage_bytes, storage_key, tensors_in, training_step, without_profiler_annotations

MODES = ("ddp", "zero2", "pipeline")
STAGES = 2  # pipeline stages (and ranks) the pipeline mode runs

# NCCL point-to-point within a node of these clusters (cost/cluster.hpp:
# NVLink bus bandwidth in GB/s, latency in us): a send's and a receive's time
# in a stage's graph is latency + bytes / bandwidth, as `collective_us` prices
# send_recv.
P2P_LINKS = {"a100-node": (230.0, 2.0), "dgx-h100": (450.0, 2.0)}


def dist_check(mode, ranks, model_name, batch, *, device, budget, planner, cluster="a100-node", seq_len=64,
               resolution=None, micro_batches=4, times=None, timeout_s=600):
    """Runs the plain and the planned distributed step on `ranks` CPU
    processes and returns what `dist-check --json` prints: identical,
    feasible, under_budget, and per rank its plan's and its step's numbers."""
    if mode not in MODES:
        raise ValueError(f"mode: '{mode}' is none of {', '.join(MODES)}")
    if mode == "pipeline" and ranks != STAGES:
        raise ValueError(f"ranks: the pipeline has {STAGES} stages, one per rank; got --ranks {ranks}")
    if mode in ("ddp", "zero2") and not 1 <= ranks <= 16:
        raise ValueError(f"ranks: {ranks} is not between 1 and 16")
    if batch < 1 or micro_batches < 1:
        raise ValueError("batch and micro-batches must be positive")
    if cluster not in P2P_LINKS:
        raise ValueError(f"cluster: '{cluster}' is none of {', '.join(P2P_LINKS)}")
    memplan = native("planning")
    if planner not in memplan.planners():
        raise ValueError(f"planner: '{planner}' is none of {', '.join(memplan.planners())}")
    if device not in memplan.devices():
        raise ValueError(f"device: '{device}' is none of memplan's devices (memplan models lists them)")
    if model_name != "transformer" and model_name not in models.classification_models():
        raise ValueError(f"model: '{model_name}' is neither a torchvision classification model nor 'transformer'")
    if mode == "pipeline" and model_name != "transformer" and not model_name.startswith("resnet"):
        raise ValueError(f"model: the pipeline splits 'transformer' and the torchvision resnets, not '{model_name}'")
    config = {"mode": mode, "ranks": ranks, "model": model_name, "batch": batch, "device": device,
              "budget": budget, "planner": planner, "cluster": cluster, "seq_len": seq_len,
              "resolution": resolution, "micro_batches": micro_batches, "times": times,
              "port": _free_port(), "timeout_s": timeout_s,
              "threads": max(1, (os.cpu_count() or 1) // ranks)}
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memplan-dist-") as folder:
        config["folder"] = folder
        try:
            torch.multiprocessing.spawn(_rank_main, args=(config,), nprocs=ranks, join=True)
        except (torch.multiprocessing.ProcessRaisedException, torch.multiprocessing.ProcessExitedException) as error:
            raise _rank_error(folder, ranks, error) from None
        per_rank = [json.loads(pathlib.Path(folder, f"rank{r}.json").read_text()) for r in range(ranks)]
    result = {k: config[k] for k in ("mode", "model", "batch", "device", "budget", "planner", "cluster")}
    if mode == "pipeline":
        result["micro_batches"] = micro_batches
    feasible = all(r["feasible"] for r in per_rank)
    result.update(rank_count=ranks, feasible=feasible,
                  identical=all(r["identical"] for r in per_rank) if feasible else None,
                  buffers_identical=all(r["buffers_identical"] for r in per_rank) if feasible else None,
                  under_budget=all(r.get("under_budget") for r in per_rank),
                  wall_s=round(time.perf_counter() - began, 2), ranks=per_rank)
    return result


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_error(folder, ranks, error):
    """The error of the rank that failed first (ValueError for bad input, as
    `check`; the others then lose their peers), else the spawn error."""
    failed = sorted((path.stat().st_mtime_ns, r, path) for r in range(ranks)
                    for path in [pathlib.Path(folder, f"rank{r}.error.json")] if path.exists())
    if not failed:
        return RuntimeError(f"a rank failed: {error}")
    _, r, path = failed[0]
    failure = json.loads(path.read_text())
    others = ", ".join(f"rank {q}" for _, q, _ in failed[1:])
    if failure["input"]:
        return ValueError(f"rank {r}: {failure['message']}" + (f" (then {others} failed too)" if others else ""))
    return RuntimeError(f"rank {r} failed" + (f" (then {others})" if others else "") + f":\n{failure['traceback']}")


def _rank_main(rank, config):
    """One rank: joins the gloo group on the loopback interface, runs the mode, writes its result."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(config["port"]))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(config["threads"])
    folder = pathlib.Path(config["folder"])
    dist.init_process_group("gloo", rank=rank, world_size=config["ranks"],
                            timeout=datetime.timedelta(seconds=config["timeout_s"]))
    try:
        result = {"ddp": _ddp_rank, "zero2": _zero2_rank, "pipeline": _pipeline_rank}[config["mode"]](rank, config)
        (folder / f"rank{rank}.json").write_text(json.dumps(result))
    except Exception as error:
        (folder / f"rank{rank}.error.json").write_text(json.dumps(
            {"message": str(error), "input": isinstance(error, (ValueError, ImportError)),
             "traceback": traceback.format_exc()}))
        raise
    finally:
        dist.destroy_process_group()


# ---- planning one rank --------------------------------------------------------------

def _plan(rank, graph, config, result):
    """Plans `graph` (a memplan.Graph or graph document) for this rank and
    agrees with the other ranks whether every plan is feasible."""
    memplan = native("planning")
    planned = memplan.plan(graph, device=config["device"], budget=config["budget"], planner=config["planner"])
    report = planned.report
    result.update(feasible=bool(report["feasible"]), budget_bytes=report["budget_bytes"],
                  baseline_peak_bytes=report["baseline_peak_bytes"], peak_live_bytes=report.get("peak_live_bytes"),
                  arena_bytes=report.get("arena_bytes"), planned_time_s=report.get("time_s"),
                  baseline_time_s=report.get("baseline_time_s"))
    if not result["feasible"]:
        result["reason"] = report.get("reason")
    everyone = torch.tensor([1 if result["feasible"] else 0])
    dist.all_reduce(everyone, op=dist.ReduceOp.MIN)
    return planned.to_json() if everyone.item() else None


def _snapshot(model, optimizer):
    return copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())


def _restore(model, optimizer, snapshot):
    """Back to the snapshot in place: the parameters keep their storages (DDP's views of them stay valid)."""
    model.load_state_dict(snapshot[0])
    optimizer.load_state_dict(copy.deepcopy(snapshot[1]))


def _outcome(model, losses):
    """What the comparison covers, cloned: the losses, every gradient and
    updated parameter; apart, the buffers (batch norm's running statistics)."""
    out = [torch.as_tensor(loss).clone() for loss in losses]
    for p in model.parameters():
        out += [p.grad.clone() if p.grad is not None else torch.zeros(0), p.detach().clone()]
    return out, [b.clone() for b in model.buffers()]


def _equal(plain, planned):
    return len(plain) == len(planned) and all(torch.equal(a, b) for a, b in zip(plain, planned))


def _compare(plain, planned, result, report):
    (tensors, buffers), (planned_tensors, planned_buffers) = plain, planned
    result.update(identical=_equal(tensors, planned_tensors),
                  max_abs_diff=max((float((a - b).abs().max()) for a, b in zip(tensors, planned_tensors)
                                    if a.numel() and a.shape == b.shape), default=0.0),
                  compared_tensors=len(tensors), buffers_identical=_equal(buffers, planned_buffers), **report)
    result["under_budget"] = result["accounted_peak_bytes"] <= result["budget_bytes"]


class _Clock:
    def __init__(self):
        self.last, self.laps = time.perf_counter(), {}

    def lap(self, name):
        now = time.perf_counter()
        self.laps[name] = round(now - self.last, 2)
        self.last = now


def _replicas_agree(tensors):
    """Whether every rank holds these very tensors (DDP's replicas after the
    all-reduce and the update, though each rank saw other samples)."""
    flat = torch.cat([t.detach().reshape(-1) for t in tensors])
    low, high = flat.clone(), flat.clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    agree = torch.tensor([int(torch.equal(low, flat) and torch.equal(high, flat))])
    dist.all_reduce(agree, op=dist.ReduceOp.MIN)
    return bool(agree.item())


# ---- data parallelism ---------------------------------------------------------------

class _Buckets:
    """DDP's communication hook (as PyTorch's default_hooks.allreduce_hook:
    divide by the world size, all-reduce, in the bucket's own buffer), which
    also names the buckets' buffers to the runner."""

    def __init__(self, world):
        self.world = world
        # storage key -> DDP's bucket buffer: held, so that no other storage
        # takes its address while the runner looks keys up here
        self.buffers = {}

    @staticmethod
    def hook(state, bucket):
        buffer = bucket.buffer()
        state.buffers[storage_key(buffer)] = buffer
        buffer.div_(state.world)
        return dist.all_reduce(buffer, async_op=True).get_future().then(lambda fut: fut.value()[0])


def _shard(config, rank):
    """The model (the same initial weights on every rank) and this rank's
    shard of a batch of ranks x batch samples (cloned: a storage of its own)."""
    n, b = config["ranks"], config["batch"]
    model, inputs, target, loss_fn = models.build(config["model"], n * b, seq_len=config["seq_len"],
                                                  resolution=config["resolution"])
    inputs = tuple(x[rank * b:(rank + 1) * b].clone() for x in inputs)
    return model, inputs, target[rank * b:(rank + 1) * b].clone(), loss_fn


def runnable(rank_graph, exported):
    """The rank's graph document as the runner reads it: memplan's graph
    keeps no `aten` or `in_place` fields, so they come back from the
    exported graph's op of the same name. Communication ops have none."""
    by_name = {op["name"]: op for op in exported["ops"]}
    doc = copy.deepcopy(rank_graph)
    for op in doc["ops"]:
        source = by_name.get(op["name"])
        if source is None:
            if op["type"] not in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", END_OF_BACKWARD):
                raise PlanError(f"graph: the rank's op '{op['name']}' is neither exported nor a collective")
            continue
        for key in ("aten", "in_place"):
            if key in source:
                op[key] = source[key]
    return doc


def _rank_graph(rank, config, mode):
    """Rank `rank`'s shard of the model, its exported single-GPU graph and the
    rank's graph for `mode` (memplan.data_parallel_rank)."""
    model, inputs, target, loss_fn = _shard(config, rank)
    twin = copy.deepcopy(model)
    graph = export(twin, inputs, target, loss_fn, models.sgd(twin), device=config["device"], times=config["times"],
                   name=f"{config['model']}-b{config['batch']}")
    rank_graph = native("planning").data_parallel_rank(graph, mode=mode, ranks=config["ranks"],
                                                       cluster=config["cluster"])
    return model, inputs, target, loss_fn, graph, rank_graph


def _ddp_rank(rank, config):
    clock = _Clock()
    model, inputs, target, loss_fn, graph, rank_graph = _rank_graph(rank, config, "ddp")
    result = {"rank": rank, "graph": rank_graph.name, "graph_ops": rank_graph.num_ops,
              "collectives": sum(op["type"] == "all_reduce" for op in rank_graph.to_json()["ops"])}
    plan = _timed_plan(rank, rank_graph, config, result, clock)
    if plan is None:
        return result
    doc = runnable(rank_graph.to_json(), graph)
    # broadcast_buffers=False: DDP would copy rank 0's batch-norm running
    # statistics to every rank before each forward; training-mode batch
    # norm does not read them, and the rank graph has no such broadcast.
    ddp = torch.nn.parallel.DistributedDataParallel(model, broadcast_buffers=False)
    buckets = _Buckets(config["ranks"])
    ddp.register_comm_hook(buckets, _Buckets.hook)
    optimizer = models.sgd(model)

    def run(_model, inputs, target, loss_fn, optimizer):
        # backward() returns after DDP's finalize_backward has copied the buckets back
        return training_step(ddp, inputs, target, loss_fn, optimizer,
                             on_phase=lambda phase: phase == "update" and end_backward())

    # Two steps first: optimizer state exists, and DDP rebuilds its buckets
    # in gradient order at the second step's forward; the buffers it uses
    # from then on are those the hook sees in the second step.
    run(model, inputs, target, loss_fn, optimizer)
    buckets.buffers.clear()
    run(model, inputs, target, loss_fn, optimizer)
    snapshot = _snapshot(model, optimizer)
    clock.lap("warm_up_s")
    torch.manual_seed(1 + rank)  # both steps draw the same dropout masks
    loss = run(model, inputs, target, loss_fn, optimizer)
    plain = _outcome(model, [loss])
    clock.lap("plain_step_s")
    result["loss"] = float(loss)  # this rank's shard's
    _restore(model, optimizer, snapshot)
    step = PlannedStep(model, optimizer, loss_fn, doc, plan, run=run, communication_buffers=buckets.buffers)
    torch.manual_seed(1 + rank)
    planned = _outcome(model, [step(inputs, target)])
    clock.lap("planned_step_s")
    _compare(plain, planned, result, step.report)
    result["replicas_agree"] = _replicas_agree([p.grad for p in model.parameters()] + list(model.parameters()))
    result["ddp_bucket_bytes"] = sum(storage_bytes(b) for b in buckets.buffers.values())
    return result


# ---- ZeRO stage 2 -------------------------------------------------------------------

class ShardedSGD:
    """ZeRO-2 with models.sgd's optimizer (SGD, momentum 0.9, one tensor at a
    time) on `world` ranks. Every parameter is split into `world` equal
    contiguous chunks of its flattened elements; rank r owns chunk r of each
    (memplan's rank graph gives each optimizer state tensor 1/n of its
    bytes). `buckets` are lists of parameters, in the order backward makes
    their gradients (the rank graph's reduce_scatter ops).

    Backward: a hook after each parameter's AccumulateGrad; when a bucket's
    last gradient exists, the bucket is reduce-scattered: its gradients'
    chunks are staged destination-major in one flat buffer, divided by the
    world size (as DDP averages), and chunk q is reduced onto rank q
    (`dist.reduce`, one per rank: gloo has no reduce_scatter); the rank's
    own reduced chunk is copied out into `shards[name]` (the graph's
    `bucketK.shard`, handed to the runner as communication_outputs), its
    slices become the `.grad` of the rank's parameter chunks, and the
    bucket's full gradients are dropped (`.grad = None`). Step: a plain
    torch.optim.SGD over the rank's parameter chunks (views of the
    parameters), then one all-gather per parameter puts every rank's
    updated chunk into every rank's parameter. The ATen calls around the
    collectives run inside runtime.communicating()."""

    def __init__(self, model, buckets, world, rank, **sgd):
        self.world, self.rank = world, rank
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.names = {id(p): name for name, p in model.named_parameters()}
        for p in self.params:
            if p.numel() % world:
                raise ValueError(f"zero2: parameter '{self.names[id(p)]}' has {p.numel()} elements, which do "
                                 f"not split into {world} equal shards")
        self.buckets = buckets  # [(shard name, [parameters])]
        self.chunk = {id(p): p.detach().view(-1).chunk(world) for p in self.params}
        self.own = [self.chunk[id(p)][rank] for p in self.params]  # leaves: SGD updates them in place
        self.inner = torch.optim.SGD(self.own, foreach=False, **sgd)
        self.own_of = {id(p): own for p, own in zip(self.params, self.own)}
        self.shards = {}
        self.bucket_of, self.waiting = {}, {}
        for b, (_, ps) in enumerate(buckets):
            for p in ps:
                self.bucket_of[id(p)] = b
        self.hooks = []
        for p in self.params:
            node = p.expand_as(p).grad_fn.next_functions[0][0]  # p's AccumulateGrad
            node.register_hook(self._hook(p))
            self.hooks.append(node)  # the node lives as long as this object
        self.checked = None  # a dict: the reduced shards are copied there for the comparison
        self.send = torch.empty(sum(p.numel() for p in self.params) // world, dtype=self.params[0].dtype)
        self.staging_bytes = 0

    @property
    def state(self):
        """The momentum shards, keyed by the full parameters (exporter.persistent_tensors names them so)."""
        return {p: self.inner.state[own] for p, own in zip(self.params, self.own) if own in self.inner.state}

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)

    def zero_grad(self, set_to_none=True):
        for p in self.params + self.own:
            p.grad = None
        self.shards.clear()
        self.waiting = {b: len(ps) for b, (_, ps) in enumerate(self.buckets)}

    def _hook(self, p):
        def done(_grad_inputs, _grad_outputs):
            b = self.bucket_of[id(p)]
            self.waiting[b] -= 1
            if self.waiting[b] == 0:
                self._reduce_scatter(b)
        return done

    def _reduce_scatter(self, b):
        name, ps = self.buckets[b]
        with communicating(), torch.no_grad():
            flat = torch.cat([p.grad.view(-1).chunk(self.world)[q] for q in range(self.world) for p in ps])
            self.staging_bytes = max(self.staging_bytes, storage_bytes(flat))
            flat.div_(self.world)
            parts = flat.chunk(self.world)
            for q in range(self.world):
                dist.reduce(parts[q], dst=q)
            shard = parts[self.rank].clone()
            if self.checked is not None:  # for the comparison: a host copy, as the runner's swaps make
                self.checked[name] = shard.clone()
            del flat, parts
            offset = 0
            for p in ps:
                n = p.numel() // self.world
                self.own_of[id(p)].grad = shard[offset:offset + n]
                offset += n
                p.grad = None
        self.shards[name] = shard

    def step(self):
        self.inner.step()
        # The gradient shards end with the update (the rank graph frees each
        # bucket's shard after its last update reads it), as ZeRO-2 frees them
        for own in self.own:
            own.grad = None
        self.shards.clear()
        with communicating(), torch.no_grad():
            offset = 0
            for p, own in zip(self.params, self.own):
                n = own.numel()
                self.send[offset:offset + n].copy_(own)
                dist.all_gather(list(self.chunk[id(p)]), self.send[offset:offset + n])
                offset += n


def _zero2_buckets(rank_graph_doc, model):
    """(shard name, parameters) per reduce_scatter op of the rank graph, in its order."""
    by_name = dict(model.named_parameters())
    tensors = rank_graph_doc["tensors"]
    out = []
    for op in rank_graph_doc["ops"]:
        if op["type"] == "reduce_scatter":
            grads = [tensors[t]["name"] for t in op["inputs"]]
            if not all(g.endswith(".grad") and g[:-5] in by_name for g in grads):
                raise PlanError(f"graph: '{op['name']}' reads other tensors than parameter gradients")
            out.append((tensors[op["outputs"][0]]["name"], [by_name[g[:-5]] for g in grads]))
    return out


def _zero2_outcome(model, optimizer, losses):
    """_outcome for ZeRO-2: the losses, the rank's gradient shards (the full
    gradients are gone) and every updated parameter."""
    out = [torch.as_tensor(loss).clone() for loss in losses]
    out += [optimizer.checked[name] for name, _ in optimizer.buckets]
    out += [p.detach().clone() for p in model.parameters()]
    return out, [b.clone() for b in model.buffers()]


def _zero2_rank(rank, config):
    clock = _Clock()
    model, inputs, target, loss_fn, graph, rank_graph = _rank_graph(rank, config, "zero2")
    rank_doc = rank_graph.to_json()
    result = {"rank": rank, "graph": rank_graph.name, "graph_ops": rank_graph.num_ops,
              "collectives": sum(op["type"] in ("reduce_scatter", "all_gather") for op in rank_doc["ops"]),
              "reduce_scatters": sum(op["type"] == "reduce_scatter" for op in rank_doc["ops"])}
    optimizer = ShardedSGD(model, _zero2_buckets(rank_doc, model), config["ranks"], rank, lr=0.01, momentum=0.9)
    plan = _timed_plan(rank, rank_graph, config, result, clock)
    if plan is None:
        return result
    doc = runnable(rank_doc, graph)
    training_step(model, inputs, target, loss_fn, optimizer)  # the momentum shards exist, as in the export
    snapshot = _snapshot(model, optimizer)
    clock.lap("warm_up_s")
    torch.manual_seed(1 + rank)
    optimizer.checked = {}
    loss = training_step(model, inputs, target, loss_fn, optimizer)
    plain = _zero2_outcome(model, optimizer, [loss])
    clock.lap("plain_step_s")
    result["loss"] = float(loss)
    _restore(model, optimizer, snapshot)
    step = PlannedStep(model, optimizer, loss_fn, doc, plan, communication_outputs=optimizer.shards)
    torch.manual_seed(1 + rank)
    optimizer.checked = {}
    planned = _zero2_outcome(model, optimizer, [step(inputs, target)])
    clock.lap("planned_step_s")
    _compare(plain, planned, result, step.report)
    result["replicas_agree"] = _replicas_agree(list(model.parameters()))
    result["shard_bytes"] = sum(storage_bytes(t) for t in optimizer.checked.values())
    result["staging_bytes"] = optimizer.staging_bytes
    return result


# ---- pipeline parallelism -----------------------------------------------------------

def _stages(model_name, model):
    """The model split into two stage modules at its middle."""
    if model_name == "transformer":  # embedding and 2 layers | 2 layers, mean over tokens, head
        layers = list(model.encoder.layers)
        half = len(layers) // 2
        return (torch.nn.Sequential(model.embed, *layers[:half]),
                torch.nn.Sequential(*layers[half:], _MeanTokens(), model.head))
    c = dict(model.named_children())  # a resnet: stem, layer1, layer2 | layer3, layer4, pool, fc
    return (torch.nn.Sequential(*(c[k] for k in ("conv1", "bn1", "relu", "maxpool", "layer1", "layer2"))),
            torch.nn.Sequential(c["layer3"], c["layer4"], c["avgpool"], torch.nn.Flatten(1), c["fc"]))


class _MeanTokens(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=1)


class Pipeline:
    """One rank's part of a 2-stage 1F1B pipeline. `iteration` is the step
    (PlannedStep's `run`): every micro-batch's forward and backward in 1F1B
    order, then the optimizer step."""

    def __init__(self, rank, micro_batches, boundary_shape, boundary_dtype):
        self.rank, self.m = rank, micro_batches
        self.peer = 1 - rank
        self.shape, self.dtype = boundary_shape, boundary_dtype

    def schedule(self):
        """(what, micro-batch) in order: forwards F, backwards B, sends S and
        receives R. Warm-up: STAGES - 1 - rank forwards; then one forward and
        one backward in turn; then the remaining backwards."""
        warm = min(STAGES - 1 - self.rank, self.m)
        compute = [("F", i) for i in range(warm)]
        for i in range(self.m - warm):
            compute += [("F", warm + i), ("B", i)]
        compute += [("B", i) for i in range(self.m - warm, self.m)]
        events = []
        for what, i in compute:
            if what == "F" and self.rank > 0:
                events.append(("R", i))  # this micro-batch's activation
            if what == "B" and self.rank < STAGES - 1:
                events.append(("R", i))  # its gradient
            events.append((what, i))
            if what == "F" and self.rank < STAGES - 1:
                events.append(("S", i))
            if what == "B" and self.rank > 0:
                events.append(("S", i))
        return events

    def iteration(self, stage, micro, _target, loss_fn, optimizer, on_phase=lambda phase, held=(): None):
        """on_phase(phase, held): a phase begins; `held` are tensors this
        code keeps until the graph's next op, which the exporter makes read
        them (a micro-batch's output until its backward starts from it, a
        received activation until its gradient is sent)."""
        optimizer.zero_grad(set_to_none=True)
        first = self.rank == 0
        held, losses, outbox, inbox = {}, [], [], []
        events = self.schedule()
        for n, (what, i) in enumerate(events):
            if what == "S":
                outbox.append(i)
            elif what == "R":
                inbox.append(i)
            if what in "SR" and (n + 1 == len(events) or events[n + 1][0] not in "SR"):
                if first:
                    sends, keep = [held[i][0] for i in outbox], ()
                else:  # the gradients of the received activations, which go with them
                    keep = [held.pop(i)[0] for i in outbox]
                    sends = [x.grad for x in keep]
                for i, t in zip(inbox, self._exchange(sends, len(inbox), lambda: keep and on_phase("backward", keep))):
                    held.setdefault(i, [None]).append(t)
                del sends, keep
                outbox, inbox = [], []
            elif what == "F":
                on_phase("forward")
                if first:
                    held[i] = [stage(micro[i])]  # its gradient is appended when it arrives
                else:  # the received activation is a leaf: autograd fills its .grad, which is sent back
                    held[i][0] = held[i].pop().requires_grad_()
                    held[i].append(loss_fn(stage(held[i][0]), micro[i]) / self.m)
                    losses.append(held[i][1].detach())
            elif what == "B":
                # Only `held` refers to a micro-batch's tensors (no local
                # names): what the graph ends, Python lets go of.
                if first:
                    on_phase("backward", held[i][:1])
                    # torch.autograd.backward without its shape check (an ATen call the
                    # trace would take for an op): the engine call it makes
                    torch.autograd.Variable._execution_engine.run_backward(
                        (held[i][0],), (held[i][1],), False, False, (), True, True)
                    on_phase("backward", held.pop(i))  # both were held through the whole backward
                else:
                    on_phase("backward")
                    held[i].pop().backward()
        on_phase("update")
        optimizer.step()
        return tuple(losses)

    def _exchange(self, sends, receives, before_sends):
        """Posts the receives and sends of one step of the schedule together
        (a blocking send would deadlock 1F1B) and waits for all of them. The
        receive buffers are allocated first: in the graph each is a `recv`
        op ahead of the `send` ops."""
        buffers = [torch.empty(self.shape, dtype=self.dtype) for _ in range(receives)]
        before_sends()
        works = [dist.irecv(b, self.peer) for b in buffers] + [dist.isend(t, self.peer) for t in sends]
        for w in works:
            w.wait()
        return buffers


class _StageRecorder(Recorder):
    """The exporter's Recorder, with torch.distributed's calls as memplan
    ops: a receive makes its buffer (the `empty` that allocated it becomes a
    `recv`: not recomputable, timed as the transfer), a send reads its tensor."""

    def __init__(self, persistent, time_op, link):
        super().__init__(persistent, time_op)
        self.link = link  # (GB/s, latency us)
        self.p2p = 0

    def _transfer_us(self, nbytes):
        return round(self.link[1] + nbytes / (self.link[0] * 1e3), 3)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace != "c10d":
            return super().__torch_dispatch__(func, types, args, kwargs)
        name = aten_name(func)
        for t in (t for t in tensors_in(args) if storage_bytes(t)):
            self.p2p += 1
            tid = self.current.get(storage_key(t))
            if name == "recv_":
                op = next((op for op in reversed(self.ops) if tid in op["outputs"]), None)
                if op is None or op.get("aten") != "empty":
                    raise PlanError("pipeline: a receive into a buffer the step did not just allocate")
                op.update(name=f"{self.phase}.recv.{self.p2p}", type="recv", recomputable=False,
                          time_us=self._transfer_us(storage_bytes(t)))
                self.tensors[tid]["name"] = f"{op['name']}.out0"
            elif name == "send":
                tid = self._read(storage_key(t), t)
                inputs = [tid] + [u for u in self.unpacked if u != tid]  # and what the stage held till now
                self.unpacked = []
                for u in inputs:
                    self.readers[u] = self.readers.get(u, 0) + 1
                self.ops.append({"id": len(self.ops), "name": f"{self.phase}.send.{self.p2p}", "type": "send",
                                 "phase": self.phase, "time_us": self._transfer_us(storage_bytes(t)),
                                 "inputs": inputs, "outputs": [], "recomputable": False})
            else:
                raise PlanError(f"pipeline: the stage made a {func} call, which its graph cannot hold")
        return func(*args, **(kwargs or {}))


def export_stage(pipeline, stage, micro, optimizer, loss_fn, *, device, times, cluster, name):
    """The stage's iteration as a memplan-graph document (exporter.export's
    steps: a warm-up iteration, then the traced one; the final gradients
    named and kept by `step_end`)."""
    times = times or ("estimate" if device else "cpu")
    timer = _op_timer(times, device)
    pipeline.iteration(stage, micro, None, loss_fn, optimizer)
    recorder = _StageRecorder(persistent_tensors(stage, optimizer, micro, None), timer, P2P_LINKS[cluster])

    def on_phase(phase, held=()):
        recorder.phase = phase
        for t in held:  # read by the next op, as a saved tensor autograd unpacks
            recorder.unpack(t)

    with without_profiler_annotations(), torch.autograd.graph.saved_tensors_hooks(recorder.pack, recorder.unpack), \
            recorder:
        pipeline.iteration(stage, micro, None, loss_fn, optimizer, on_phase=on_phase)
    return document(recorder, stage, name,
                    f"memplan_torch.distributed, torch {torch.__version__}, 1F1B stage, op times: {times}")


def _timed_plan(rank, graph, config, result, clock):
    """_plan, with the export before it and the planning timed in `result`."""
    clock.lap("export_s")
    plan = _plan(rank, graph, config, result)
    clock.lap("plan_s")
    result["seconds"] = clock.laps
    return plan


def _pipeline_rank(rank, config):
    m, b = config["micro_batches"], config["batch"]
    clock = _Clock()
    model, inputs, target, loss_fn = models.build(config["model"], m * b, seq_len=config["seq_len"],
                                                  resolution=config["resolution"])
    stages = _stages(config["model"], model)
    with torch.no_grad():
        boundary = stages[0](inputs[0][:b])
    stage = stages[rank]
    source = inputs[0] if rank == 0 else target
    micro = tuple(source[i * b:(i + 1) * b].clone() for i in range(m))
    pipeline = Pipeline(rank, m, tuple(boundary.shape), boundary.dtype)
    twin = copy.deepcopy(stage)
    graph = export_stage(pipeline, twin, micro, models.sgd(twin), loss_fn, device=config["device"],
                         times=config["times"], cluster=config["cluster"],
                         name=f"{config['model']}-stage{rank}-m{m}-b{b}")
    result = {"rank": rank, "stage": rank, "graph": graph["name"], "graph_ops": len(graph["ops"]),
              "sends": sum(op["type"] == "send" for op in graph["ops"]),
              "receives": sum(op["type"] == "recv" for op in graph["ops"])}
    plan = _timed_plan(rank, graph, config, result, clock)
    if plan is None:
        return result
    optimizer = models.sgd(stage)
    pipeline.iteration(stage, micro, None, loss_fn, optimizer)  # optimizer state exists, as in the export
    snapshot = _snapshot(stage, optimizer)
    clock.lap("warm_up_s")
    torch.manual_seed(1 + rank)
    losses = pipeline.iteration(stage, micro, None, loss_fn, optimizer)
    plain = _outcome(stage, losses)
    clock.lap("plain_step_s")
    result["loss"] = float(sum(losses)) if losses else None  # the last stage's, over the micro-batches
    _restore(stage, optimizer, snapshot)
    step = PlannedStep(stage, optimizer, loss_fn, graph, plan, run=pipeline.iteration)
    torch.manual_seed(1 + rank)
    planned = _outcome(stage, step(micro, None))
    clock.lap("planned_step_s")
    _compare(plain, planned, result, step.report)
    return result
