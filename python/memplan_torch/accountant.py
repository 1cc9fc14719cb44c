"""The accountant of a planned step: the bytes that would be on the device.

After every op and action (runtime.py) it adds up the bytes of every storage
of the graph that is still alive -- held by the runner, by autograd or by the
model's Python code: weak references to every tensor seen on it tell -- and
not shrunk into host memory, plus the persistent state on the device. Its
peak is `accounted_peak_bytes`.
"""

import weakref

from .trace import storage_bytes, storage_key


class Accountant:
    def __init__(self):
        self.watched = {}  # storage key -> (bytes, weak references to tensors on it)
        self.parked = {}   # tensor id -> its references while its storage is in host memory
        self.peak = 0

    def track(self, t):
        """A storage the step made (an op's output, a copy, a swap-in)."""
        self.watched[storage_key(t)] = (storage_bytes(t), [weakref.ref(t)])

    def watch(self, tensors):
        """More tensors on storages already tracked (views, arguments)."""
        for t in tensors:
            if storage_bytes(t) and storage_key(t) in self.watched:
                self.watched[storage_key(t)][1].append(weakref.ref(t))

    def park(self, tid, storage):
        """The storage of tensor `tid` is about to shrink into host memory."""
        self.parked[tid] = self.watched.pop(storage.data_ptr(), (storage.nbytes(), []))[1]

    def unpark(self, tid, storage, t):
        """The storage of `tid` has its bytes back (`t` is a tensor on it)."""
        self.watched[storage.data_ptr()] = (storage.nbytes(), self.parked.pop(tid, []) + [weakref.ref(t)])

    def referenced(self, key):
        """Whether a tensor object on the storage at `key` is alive."""
        return any(r() is not None for r in self.watched.get(key, (0, []))[1])

    def measure(self, held, state_bytes):
        """Counts now: `held` are the storage keys the runner holds,
        `state_bytes` the persistent state on the device."""
        live = state_bytes
        for k, (size, refs) in list(self.watched.items()):
            alive = [r for r in refs if r() is not None]
            if alive or k in held:
                live += size
                self.watched[k] = (size, alive)
            else:
                del self.watched[k]
        self.peak = max(self.peak, live)
