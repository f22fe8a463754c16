"""The rank queue the lanes of a local pool share: each index is taken once, from either end, by any process."""

from __future__ import annotations

import multiprocessing as mp
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor_core.engine.lanes import QueueStuck, SharedRankQueue

CTX = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")


@given(order=st.lists(st.integers(0, 10_000), unique=True, max_size=40),
       ends=st.lists(st.booleans(), max_size=50), shared=st.booleans())
def test_takes_from_either_end_give_each_index_once(order: list[int], ends: list[bool], shared: bool) -> None:
    queue = SharedRankQueue(order, CTX if shared else None)  # None: for this process's threads only
    lefts, rights = [], []
    for left in ends:
        got = queue.take_left() if left else queue.take_right()
        if got is None:
            assert len(lefts) + len(rights) == len(order) and len(queue) == 0
            continue
        (lefts if left else rights).append(got)
        assert len(queue) == len(order) - len(lefts) - len(rights)
    # the left takes are a prefix of the order, the right takes its suffix from the end, nothing twice
    assert lefts == order[:len(lefts)]
    assert rights == order[::-1][:len(rights)]
    assert queue.left_behind() == order[len(lefts):len(order) - len(rights)]


def _drain_left(queue: SharedRankQueue, out: mp.SimpleQueue) -> None:  # type: ignore[type-arg]
    taken = []
    while (i := queue.take_left()) is not None:
        taken.append(i)
    out.put(taken)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked processes")
def test_processes_taking_at_once_share_the_indices_out() -> None:
    order = list(range(5_000))
    queue = SharedRankQueue(order, CTX)
    out = CTX.SimpleQueue()
    procs = [CTX.Process(target=_drain_left, args=(queue, out)) for _ in range(2)]
    for p in procs:
        p.start()
    mine = []
    while (i := queue.take_right()) is not None:
        mine.append(i)
    theirs = [out.get() for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert all(p.exitcode == 0 for p in procs)
    assert sorted(mine + theirs[0] + theirs[1]) == order  # each once, whoever took it
    assert theirs[0] == sorted(theirs[0]) and theirs[1] == sorted(theirs[1])  # from the left, in order
    assert mine == sorted(mine, reverse=True)


def _hold_the_lock(queue: SharedRankQueue, held, release) -> None:  # type: ignore[no-untyped-def]
    queue._lock.acquire()
    held.set()
    release.wait(30)
    queue._lock.release()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked processes")
def test_the_lock_is_one_across_processes(monkeypatch) -> None:
    """While another process holds the lock, a take here waits for it (then gives up): one lock, not a copy."""
    queue = SharedRankQueue([1, 2, 3], CTX)
    held, release = CTX.Event(), CTX.Event()
    holder = CTX.Process(target=_hold_the_lock, args=(queue, held, release))
    holder.start()
    try:
        assert held.wait(30)
        monkeypatch.setattr(SharedRankQueue, "LOCK_TIMEOUT_S", 0.2)
        with pytest.raises(QueueStuck):
            queue.take_left()
    finally:
        release.set()
        holder.join(30)
    assert queue.take_left() == 1  # let go: the take that gave up took nothing


def test_a_take_stops_waiting_once_told_to_give_up(monkeypatch) -> None:
    """Once the pool is gone, a lock a dead worker left held is not waited for until the timeout."""
    queue = SharedRankQueue([1, 2], CTX)
    monkeypatch.setattr(SharedRankQueue, "LOCK_TIMEOUT_S", 60.0)
    monkeypatch.setattr(SharedRankQueue, "LOCK_POLL_S", 0.01)
    asked = []

    def gone() -> bool:
        asked.append(1)
        return len(asked) >= 2

    queue._lock.acquire()
    with pytest.raises(QueueStuck):
        queue.take_right(give_up=gone)
    assert len(asked) == 2  # asked after each slice of the wait, given up at the second
    queue._lock.release()


def test_a_lock_never_let_go_is_said(monkeypatch) -> None:
    queue = SharedRankQueue([1, 2, 3], CTX)
    monkeypatch.setattr(SharedRankQueue, "LOCK_TIMEOUT_S", 0.05)
    queue._lock.acquire()  # as a worker killed inside a take leaves it
    with pytest.raises(QueueStuck, match="died holding it"):
        queue.take_right()
    queue._lock.release()
    assert queue.take_right() == 3  # the take that failed took nothing


def test_an_empty_queue_takes_nothing() -> None:
    queue = SharedRankQueue([], CTX)
    assert (queue.take_left(), queue.take_right(), len(queue), queue.left_behind()) == (None, None, 0, [])
