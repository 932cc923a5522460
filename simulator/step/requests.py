"""What the step compiler asks of the network: collective requests, and how often a step runs
each.

The compiler asks ``comm.time_s(kind, group, nbytes)`` (:class:`Comm`) and never knows how the
answer is computed: alpha-beta (screening), the fabric (flow) or the fluid model. Byte
conventions are nccl-tests': all-reduce S is the buffer on each rank; all-gather /
reduce-scatter S is the full (gathered) buffer; all-to-all S is what one rank sends in total;
p2p S is one message.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from typing import NamedTuple, Protocol

from simulator.step.groups import Group


class Comm(Protocol):
    def time_s(self, kind: str, group: Group, nbytes: float) -> float:
        """Seconds for one collective of ``kind`` over ``group`` moving ``nbytes``."""


class CollectiveRequest(NamedTuple):
    """One collective the compiled step needs: the same (kind, group role, stage, bytes) runs
    for every replica of the group at once."""

    kind: str
    group: Group
    nbytes: float

    @property
    def key(self) -> tuple[str, str, int, float]:
        return (self.kind, self.group.role, self.group.stage, float(self.nbytes))


class Ledger:
    """A :class:`Comm` that answers from ``comm`` and counts the requests a compile makes.

    The compiler costs one layer of each kind once per stage and repeats it for every layer of
    that kind: :meth:`recording` collects the requests of that one costing, :meth:`repeat`
    books them ``n`` times. ``counts`` maps :attr:`CollectiveRequest.key` to calls per step
    (per micro-batch for per-layer traffic); ``requests`` lists the distinct requests in the
    order they were first made.
    """

    def __init__(self, comm: Comm, stretch=None):
        self.comm = comm
        self.stretch = stretch
        """Optional group -> factor on its collectives' time (host noise)."""
        self.counts: Counter = Counter()
        self.requests: dict[tuple, CollectiveRequest] = {}
        self._open: list[list[tuple]] | None = None

    def time_s(self, kind: str, group: Group, nbytes: float) -> float:
        req = CollectiveRequest(kind, group, nbytes)
        self.requests.setdefault(req.key, req)
        if self._open is not None:
            self._open.append(req.key)
        else:
            self.counts[req.key] += 1
        t = self.comm.time_s(kind, group, nbytes)
        return t * self.stretch(group) if self.stretch is not None else t

    @contextmanager
    def recording(self):
        """Requests made inside are not counted; the list yielded collects them."""
        self._open = made = []
        try:
            yield made
        finally:
            self._open = None

    def repeat(self, keys: list[tuple], n: int) -> None:
        for k in keys:
            self.counts[k] += n


class ZeroComm:
    """Answers every request with 0 s: a compile that only lists the requests."""

    def time_s(self, kind: str, group: Group, nbytes: float) -> float:
        return 0.0
