#!/usr/bin/python3
"""DTR's simulator on a DTR operator log: the check of memplan's `dtr`.

Kirisame et al., "Dynamic Tensor Rematerialization" (ICLR 2021), §4 and
Appendix: the simulator replays a log, keeps every storage until its last
handle is released (eager eviction of dead storages), and, when an
allocation would exceed the budget, evicts the storage with the smallest
h_DTR^eq = c / (m * s), c its compute plus that of each evicted equivalence
class next to it, m its size, s its staleness. Evicted storages are
recomputed, recursively, when an op needs them. This file restates the
rules of the prototype's simulator (uwsampl/dtr-prototype, `simrd`) in a
few flat loops, independently of memplan's C++; `tests/test_dtr_corpus`
and tools/paper_tables compare memplan's `dtr` with it.

The rules, as the prototype has them:
- reading (simrd's parser): lines before ANNOTATE START are ignored; a
  CONSTANT is a storage made when its line comes and locked for good; a
  CALL makes one storage per result with ALIAS -1 and a view (no bytes, the
  argument's storage) per other result; a MUTATE makes a new storage per
  mutated argument, of that argument's storage size, and releases the old
  handle; COPY takes one more reference, COPY_FROM rebinds a handle; what is
  still referenced at the end is rematerialised and locked;
- a storage's compute is the sum of the distinct ops of its tensors (its
  maker and the views of it); memory counts storages that are material;
- an op runs: its arguments' last access is now, present arguments are
  locked, missing ones are rematerialised in argument order and locked;
  then, if memory + the op's output bytes exceed the budget, storages are
  evicted one by one until they fit; the op runs (the clock advances by its
  time, memory grows by all its output bytes, those of outputs already
  present are given back after), its arguments are unlocked;
- a storage whose last handle goes is evicted at once (it may still be
  rematerialised as someone's argument);
- the candidates are the material, unlocked storages in the order they
  became candidates; the choice is the last with the smallest score
  (first zero ends the scan); the score is infinite at zero staleness;
- eviction makes the storage an equivalence class of its own compute,
  merged with those of its evicted neighbours (storages of its tensors'
  parents and children); rematerialising it takes its compute out of its
  class without splitting it;
- the run fails when nothing is left to evict (OOM) or when the recompute
  time exceeds the iteration's compute (the prototype's overhead limit 2).
The result is clock / compute without eviction (the clock starts at 1 ns).

Usage: tools/dtr_simulator.py LOG [RATIO ...]  (default 0.3 0.5 0.7 0.9);
prints the no-eviction peak, the compute, and per ratio the budget and the
slowdown (or OOM / thrashed).
"""

import json
import math
import sys


class Storage:
    __slots__ = ("sid", "size", "compute", "material", "tensors", "locks", "refs",
                 "pinned", "last_access", "node", "ops")

    def __init__(self, sid, size):
        self.sid = sid
        self.size = size
        self.compute = 0
        self.material = False
        self.tensors = []
        self.locks = 0
        self.refs = 0
        self.pinned = False
        self.last_access = -math.inf
        self.node = None  # its equivalence-class node while evicted
        self.ops = set()


class Op:
    __slots__ = ("time", "sizes", "total", "outputs")

    def __init__(self, time, sizes):
        self.time = time
        self.sizes = sizes
        self.total = sum(sizes)
        self.outputs = []


class Tensor:
    __slots__ = ("parents", "children", "op", "index", "storage", "defined", "is_view")

    def __init__(self, parents, op, index, storage):
        self.parents = list(parents)
        self.children = []
        self.op = op
        self.index = index
        self.storage = storage
        self.defined = False
        self.is_view = bool(storage.tensors)
        if id(op) not in storage.ops:
            storage.ops.add(id(op))
            storage.compute += op.time
        storage.tensors.append(self)
        storage.refs += 1


class Node:
    """Union-find node of an evicted equivalence class (value at the root)."""
    __slots__ = ("parent", "value")

    def __init__(self, value):
        self.parent = None
        self.value = value

    def root(self):
        n = self
        while n.parent is not None:
            n = n.parent
        r = n
        n = self
        while n.parent is not None:  # path compression
            n.parent, n = r, n.parent
        return r


def read_log(path):
    """The schedule: ('op', args, time, sizes, aliases) | ('get', h) |
    ('pin', h) | ('release', h), h a handle number (simrd's parser)."""
    lines = [json.loads(line) for line in open(path) if line.strip()]
    for k, j in enumerate(lines):
        if j["INSTRUCTION"] == "ANNOTATE" and j["ANNOTATION"] == "START":
            lines = lines[k + 1:]
            break
    handle = {}   # log name -> tensor number
    refs = []     # per tensor number: references the log holds
    storage_size = []
    out = []
    k = 0

    def new(size):
        refs.append(1)
        storage_size.append(size)
        return len(refs) - 1

    while k < len(lines):
        j = lines[k]
        what = j["INSTRUCTION"]
        k += 1
        if what == "CONSTANT":
            m = lines[k]
            k += 1
            t = new(int(m["MEMORY"]))
            out.append(("op", [], 0, [int(m["MEMORY"])], [-1], [t]))
            out.append(("pin", t))
            handle[j["NAME"]] = t
        elif what == "COPY":
            t = handle[j["SRC"]]
            handle[j["DST"]] = t
            refs[t] += 1
            out.append(("get", t))
        elif what == "RELEASE":
            if j["NAME"] in handle:
                t = handle[j["NAME"]]
                refs[t] -= 1
                out.append(("release", t))
        elif what == "CALL":
            args = [handle[a] for a in j["ARGS"]]
            sizes, aliases, results = [], [], []
            for name in j["RESULT"]:
                mem, alias = lines[k], lines[k + 1]
                k += 2
                a = int(alias["ALIAS"])
                size = 0 if a != -1 else int(mem["MEMORY"])
                t = new(size if a == -1 else storage_size[args[a]])
                sizes.append(size)
                aliases.append(a)
                results.append(t)
                handle[name] = t
            out.append(("op", args, int(j["TIME"]), sizes, aliases, results))
        elif what == "MUTATE":
            args = [handle[a] for a in j["ARGS"]]
            sizes = [storage_size[args[m]] for m in j["MUTATE"]]
            results = [new(s) for s in sizes]
            out.append(("op", args, int(j["TIME"]), sizes, [-1] * len(sizes), results))
            for m, t in zip(j["MUTATE"], results):
                old = handle[j["ARGS"][m]]
                handle[j["ARGS"][m]] = t
                refs[old] -= 1
                out.append(("release", old))
        elif what == "COPY_FROM":
            old = handle[j["DST"]]
            t = handle[j["SRC"]]
            handle[j["DST"]] = t
            refs[old] -= 1
            refs[t] += 1
            out.append(("release", old))
            out.append(("get", t))
    for name, t in handle.items():
        if refs[t] > 0:
            out.append(("pin", t))
    return out


class OutOfMemory(Exception):
    pass


class Thrashed(Exception):
    pass


class Runtime:
    def __init__(self, budget, remat_limit=math.inf, free_pinned=False):
        self.budget = budget
        self.free_pinned = free_pinned
        self.remat_limit = remat_limit
        self.memory = 0
        self.peak = 0
        self.clock = 1
        self.compute = 0
        self.remat = 0
        self.pool = {}  # candidates, in the order they became candidates
        self.tensors = {}
        self.next_storage = 0

    # -- candidates and locks
    def lock(self, s):
        if s.locks == 0:
            del self.pool[s]
        s.locks += 1

    def unlock(self, s):
        s.locks -= 1
        if s.locks == 0:
            self.pool[s] = None

    # -- h_DTR^eq
    def evicted_neighbours(self, s):
        seen = {}
        for t in s.tensors:
            for u in t.parents + t.children:
                n = u.storage
                if not n.material and n is not s:
                    seen[id(n)] = n
        return seen.values()

    def score(self, s):
        cost = s.compute
        roots = set()
        for n in self.evicted_neighbours(s):
            r = n.node.root()
            if id(r) not in roots:
                roots.add(id(r))
                cost += r.value
        denom = s.size * (self.clock - s.last_access)
        return cost / denom if denom > 0 else math.inf

    def choose(self):
        best, best_score = None, math.inf
        for s in self.pool:
            h = self.score(s)
            if h <= best_score:
                best, best_score = s, h
            if h == 0:
                break
        return best

    def evict(self, s):
        s.material = False
        self.memory -= s.size
        del self.pool[s]
        for t in s.tensors:
            t.defined = False
        s.node = Node(s.compute)
        for n in self.evicted_neighbours(s):
            a, b = n.node.root(), s.node.root()
            if a is not b:
                a.parent = b
                b.value += a.value

    def make_room(self, size):
        while self.memory + size > self.budget:
            if not self.pool:
                raise OutOfMemory()
            self.evict(self.choose())

    # -- running ops
    def run(self, t, remat):
        op = t.op
        others = [u for u in op.outputs if u is not t]
        dup = [u for u in others if u.defined]
        made = [u.storage for u in others + [t] if not u.storage.material]
        self.clock += op.time
        if remat:
            self.remat += op.time
        else:
            self.compute += op.time
        self.memory += op.total
        self.peak = max(self.peak, self.memory)
        for u in op.outputs:
            u.storage.material = True
            u.defined = True
        for u in dup:
            self.memory -= op.sizes[u.index]
        for s in made:
            self.pool[s] = None
            if s.node is not None:  # back from eviction: its class loses its compute
                s.node.root().value -= s.compute
                s.node = None

    def materialise(self, t, remat=True):
        for p in t.parents:
            p.storage.last_access = self.clock
        missing = [p for p in t.parents if not p.defined]
        for p in t.parents:
            if p.defined:
                self.lock(p.storage)
        for p in missing:
            if not p.defined:
                self.materialise(p)
            self.lock(p.storage)
        if self.memory + t.op.total > self.budget:
            self.make_room(t.op.total)
        self.run(t, remat)
        for p in t.parents:
            self.unlock(p.storage)
        if self.remat > self.remat_limit:
            raise Thrashed()

    def op(self, args, time, sizes, aliases, results):
        op = Op(time, sizes)
        parents = [self.tensors[a] for a in args]
        for i, (a, r) in enumerate(zip(aliases, results)):
            if a == -1:
                s = Storage(self.next_storage, sizes[i])
                self.next_storage += 1
                s.node = None
            else:
                s = parents[a].storage
            t = Tensor(parents, op, i, s)
            op.outputs.append(t)
            self.tensors[r] = t
        fresh = [t.storage for t in op.outputs if not t.is_view]
        for s in fresh:  # a storage not made yet counts as an evicted class of 0
            s.node = Node(0)
        for p in parents:
            p.children.extend(op.outputs)
        self.materialise(op.outputs[0], remat=False)
        for t in op.outputs:
            t.storage.last_access = self.clock

    def release(self, t):
        s = t.storage
        s.refs -= 1
        if s.refs == 0 and s.material and (self.free_pinned or not s.pinned):
            if s.pinned:  # the baseline's rule (simrd's RuntimeV1): freed, locks and all
                s.locks, s.pinned = 0, False
                self.pool[s] = None
            self.evict(s)

    def pin(self, t):
        if not t.defined:
            self.materialise(t)
        if not t.storage.pinned:
            self.lock(t.storage)
            t.storage.pinned = True

    def replay(self, schedule):
        for cmd in schedule:
            if cmd[0] == "op":
                self.op(*cmd[1:])
            elif cmd[0] == "get":
                self.tensors[cmd[1]].storage.refs += 1
            elif cmd[0] == "release":
                self.release(self.tensors[cmd[1]])
            else:
                self.pin(self.tensors[cmd[1]])
        return self


def baseline(schedule):
    """(peak bytes, compute ns) without a budget: storages go with their
    last handle."""
    rt = Runtime(math.inf, free_pinned=True).replay(schedule)
    return rt.peak, rt.compute


def slowdown(schedule, budget, compute):
    """clock / compute under `budget`; 'OOM' or 'thrashed' where it fails."""
    rt = Runtime(budget, remat_limit=compute)
    try:
        rt.replay(schedule)
    except OutOfMemory:
        return "OOM"
    except Thrashed:
        return "thrashed"
    return rt.clock / compute


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 1
    sys.setrecursionlimit(100000)
    schedule = read_log(argv[1])
    peak, compute = baseline(schedule)
    ratios = [float(r) for r in argv[2:]] or [0.3, 0.5, 0.7, 0.9]
    print(f"no-eviction peak {peak} B, compute {compute / 1e6:.1f} ms")
    for r in ratios:
        budget = int(peak * r)
        v = slowdown(schedule, budget, compute)
        print(f"{r} {budget} {v if isinstance(v, str) else f'{v:.4f}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
