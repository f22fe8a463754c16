"""The queue of ranks the lanes of a local pool share: each lane takes its next rank itself, when it is free.

The client's lane and the pool's worker processes (:mod:`advisor_core.engine.rankwork`)
take rank indices from the two ends of one queue held in shared memory: the workers from
the left (the largest ranks), the client from the right. A worker takes its rank as it
begins a job, so no rank is bound to a lane before that lane is free, and no message has
to reach the client and come back between a worker's ranks. (When the client handed out
the ranks, that round trip waited for its interpreter, which its own lane holds: near the
end of a run, with one rank given at a time so that none waits in a busy lane, a worker
idled 80–150 ms for its last rank.)
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Callable, Sequence
from typing import Any


class QueueStuck(RuntimeError):
    """The queue's lock was not let go in time: a process died holding it."""


class SharedRankQueue:
    """Rank indices in a fixed order, taken from either end by processes of one pool.

    Made from the pool's ``multiprocessing`` context before the pool starts, and handed to
    its workers as they start (the pool's initializer arguments): like any ``multiprocessing``
    lock it cannot travel in a job. Each index is taken once, by one process.
    """

    LOCK_TIMEOUT_S = 10.0  # a take holds the lock for microseconds; longer means its holder died in it
    LOCK_POLL_S = 0.1  # how often a waiting take asks whether to give up before that

    def __init__(self, order: Sequence[int], ctx: Any = None) -> None:
        """``ctx``: the pool's ``multiprocessing`` context (raises ``OSError`` where it cannot make a lock, as
        where POSIX semaphores are not available); ``None``: a queue for this process's threads only."""
        if ctx is None:
            self._lock: Any = threading.Lock()
            self._slots: Any = array("q", order)
            self._ends: Any = array("q", [0, len(order)])
        else:
            self._lock = ctx.Lock()
            self._slots = ctx.RawArray("q", list(order))
            self._ends = ctx.RawArray("q", [0, len(order)])  # [left, right): what is still queued

    def take_left(self, give_up: Callable[[], bool] = lambda: False) -> int | None:
        """The leftmost index still queued (``None``: none is). Raises :class:`QueueStuck` when the lock is held
        for :data:`LOCK_TIMEOUT_S`, or sooner once ``give_up()`` says so (the other processes are gone)."""
        return self._take(left=True, give_up=give_up)

    def take_right(self, give_up: Callable[[], bool] = lambda: False) -> int | None:
        """The rightmost index still queued (``None``: none is); as :meth:`take_left`."""
        return self._take(left=False, give_up=give_up)

    def __len__(self) -> int:
        """How many are still queued (read without the lock: a hint, which a take may make stale at once)."""
        return max(0, self._ends[1] - self._ends[0])

    def left_behind(self) -> list[int]:
        """What is still queued, read without the lock: for when no other process can take any more."""
        return list(self._slots[self._ends[0]:self._ends[1]])

    def _take(self, *, left: bool, give_up: Callable[[], bool]) -> int | None:
        deadline = time.monotonic() + self.LOCK_TIMEOUT_S
        while not self._lock.acquire(timeout=min(self.LOCK_POLL_S, self.LOCK_TIMEOUT_S)):
            if give_up() or time.monotonic() >= deadline:
                raise QueueStuck("the rank queue's lock was not let go: a worker process died holding it")
        try:
            start, end = self._ends[0], self._ends[1]
            if start >= end:
                return None
            if left:
                self._ends[0] = start + 1
                return int(self._slots[start])
            self._ends[1] = end - 1
            return int(self._slots[end - 1])
        finally:
            self._lock.release()
