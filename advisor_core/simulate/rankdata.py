"""One rank's simulated timeline, flattened: kernels in start order, overlap analysis, memory curve.

Everything the profile writers need for a rank is derived here once, as int64 nanoseconds:

* ``kernels``: every launch (node index, start, duration, step, HCCL launch number, transfer part);
* overlap analysis exactly as CANN/MindSpore define it: ``Computing`` = union of non-HCCL
  kernels, ``Communication`` = union of HCCL kernels, ``Communication(Not Overlapped)`` =
  communication minus computing, ``Free`` = the profiled window minus both;
* the memory curve: static bytes + runtime reserve + the allocations/frees the stage graph ties to
  kernel ends (saved activations per layer and micro batch, logits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor_core.simulate.schedule import RunSchedule

__all__ = ["RankData", "rank_data", "union", "difference", "complement", "RUNTIME_RESERVED_BYTES"]

RUNTIME_RESERVED_BYTES = 1536 * 1024 * 1024  # runtime, HCCL buffers, workspace (assumption)


@dataclass
class RankData:
    rank: int
    stage: int
    local: int  # index of the rank inside its stage
    node_idx: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    step: np.ndarray  # 0-based
    micro: np.ndarray
    seq: np.ndarray  # HCCL launch number, -1 for compute kernels
    transit: np.ndarray
    is_comm: np.ndarray
    phase: np.ndarray  # F B O K as uint8 codes
    step_start: np.ndarray
    step_end: np.ndarray
    tail_wait: np.ndarray
    computing: np.ndarray  # (n, 2) merged intervals [start, end)
    communication: np.ndarray
    comm_not_overlapped: np.ndarray
    free: np.ndarray
    mem_t: np.ndarray
    mem_bytes: np.ndarray  # total allocated after each event

    @property
    def window(self) -> tuple[int, int]:
        return int(self.step_start[0]), int(self.step_end[-1])

    @property
    def step_time_ns(self) -> np.ndarray:
        return self.step_end - self.step_start

    @property
    def peak_memory_bytes(self) -> int:
        return int(self.mem_bytes.max())


def union(iv: np.ndarray) -> np.ndarray:
    """Merge [start, end) intervals (touching ones too) into disjoint sorted intervals."""
    if len(iv) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    ends = np.maximum.accumulate(iv[:, 1])
    new = np.ones(len(iv), dtype=bool)
    new[1:] = iv[1:, 0] > ends[:-1]
    starts = iv[new, 0]
    idx = np.flatnonzero(new)
    group_end = np.maximum.reduceat(iv[:, 1], idx)
    return np.stack([starts, group_end], axis=1)


def difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a`` minus ``b`` for disjoint sorted interval sets."""
    out: list[tuple[int, int]] = []
    j = 0
    nb = len(b)
    for s, e in a.tolist():
        cur = s
        while j < nb and b[j, 1] <= cur:
            j += 1
        k = j
        while k < nb and b[k, 0] < e:
            bs, be = int(b[k, 0]), int(b[k, 1])
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
            if cur >= e:
                break
            k += 1
        if cur < e:
            out.append((cur, e))
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def complement(iv: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """[lo, hi) minus the disjoint sorted intervals ``iv``."""
    return difference(np.array([[lo, hi]], dtype=np.int64), iv)


_PHASE = {"F": 0, "B": 1, "O": 2, "K": 3}


def rank_data(sched: RunSchedule, stage: int, local: int, static_bytes: int) -> RankData:
    prog = sched.programs[stage]
    parts = {k: [] for k in ("idx", "start", "dur", "step", "micro", "seq", "transit", "phase")}
    for blk in sched.blocks[stage]:
        n = len(blk.idx)
        parts["idx"].append(blk.idx)
        parts["start"].append(blk.start[local])
        parts["dur"].append(blk.dur[local])
        parts["step"].append(np.full(n, blk.step, dtype=np.int32))
        parts["micro"].append(np.full(n, blk.micro, dtype=np.int32))
        parts["seq"].append(blk.seq)
        parts["transit"].append(blk.transit[local])
        parts["phase"].append(np.full(n, _PHASE[blk.phase], dtype=np.uint8))
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}
    order = np.argsort(cat["start"], kind="stable")
    cat = {k: v[order] for k, v in cat.items()}
    is_comm = np.array([prog.kernels[i].kernel.comm is not None for i in range(len(prog.kernels))], dtype=bool)[cat["idx"]]
    ends = cat["start"] + cat["dur"]
    comp = union(np.stack([cat["start"][~is_comm], ends[~is_comm]], axis=1))
    comm = union(np.stack([cat["start"][is_comm], ends[is_comm]], axis=1))
    cno = difference(comm, comp)
    lo, hi = int(sched.step_start[stage][local, 0]), int(sched.step_end[stage][local, -1])
    free = complement(union(np.concatenate([comp, comm])), lo, hi)
    delta = prog.mem_delta[cat["idx"]]
    nz = np.flatnonzero(delta)
    base = static_bytes + RUNTIME_RESERVED_BYTES
    mem_t = np.concatenate([[lo], ends[nz]])
    mem_b = base + np.concatenate([[0], np.cumsum(delta[nz])])
    mo = np.argsort(mem_t, kind="stable")
    return RankData(
        rank=int(prog.ranks[local]), stage=stage, local=local, node_idx=cat["idx"].astype(np.int64),
        start=cat["start"].astype(np.int64), dur=cat["dur"].astype(np.int64), step=cat["step"], micro=cat["micro"],
        seq=cat["seq"].astype(np.int64), transit=cat["transit"].astype(np.int64), is_comm=is_comm, phase=cat["phase"],
        step_start=sched.step_start[stage][local], step_end=sched.step_end[stage][local],
        tail_wait=sched.tail_wait[stage][local], computing=comp, communication=comm, comm_not_overlapped=cno, free=free,
        mem_t=mem_t[mo], mem_bytes=mem_b[mo],
    )
