"""Replaying the stage graphs in time: every rank, every step, every kernel (integer nanoseconds).

Per rank there is one compute stream and one communication stream:

* kernels of a micro batch's forward/backward run back to back on the compute stream;
* blocking collectives (tensor-parallel AllReduce, redistribution AllGather) end when the
  slowest member of the group arrives plus the transfer time; the faster members' kernels last
  longer (they wait inside HCCL, as on a real device);
* a Receive ends when the peer's Send has delivered (its waiting is the pipeline bubble);
* gradient buckets run on the communication stream, each starting when its last gradient of
  the step's final backward exists (and the previous bucket is done), synchronised over the
  data-parallel group; the optimizer waits for all buckets — what is left of them after the
  backward is the exposed tail;
* each step starts by waiting ``gap_ns`` for data (device queue empty: ``Free`` time) — longer
  while the pipeline warms up, until the batch it produces late reaches the device;
* cluster faults act on one rank: a slow-kernel rank runs some kernels slower, a slow-data rank
  waits longer for its batch, and a degraded link moves that rank's share of a transfer slower —
  a collective ends when its slowest member's transfer does, so its peers wait inside HCCL
  (their own transit is unchanged, their wait grows).

Pipeline parallel runs 1F1B per stage (``min(pp - s - 1, m)`` warm-up forwards). Stages are
advanced in dependency order, so the schedule is exact for the model, with no global clock
loop. All arithmetic is on int64 nanoseconds, so every derived sum in the output files is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from advisor_core.simulate import jitter
from advisor_core.simulate.nodes import Node
from advisor_core.simulate.stage import StageGraph
from advisor_core.simulate.workload import Workload

__all__ = ["T0_NS", "Block", "StageProgram", "RunSchedule", "build_program", "run_schedule"]

T0_NS = 1_750_000_000_000_000_000  # 2025-06-15T15:06:40Z: where every simulated clock starts

K_COMPUTE, K_MP, K_RECV, K_SEND = 0, 1, 2, 3


@dataclass
class OpSeq:
    """Kernel sequence of one block kind, as arrays."""

    idx: np.ndarray  # int32, into StageProgram.kernels
    base: np.ndarray  # float64 nominal ns
    kind: np.ndarray  # int8
    keys: np.ndarray  # uint64 jitter identity
    segments: list[tuple[int, int, int]] = field(default_factory=list)  # (start, end, kind)

    @classmethod
    def of(cls, nodes: list[Node], index: dict[str, int], keys: list[str]) -> "OpSeq":
        idx = np.array([index[k] for k in keys], dtype=np.int32)
        base = np.array([nodes[i].kernel.ns for i in idx], dtype=np.float64)  # type: ignore[union-attr]
        kinds = []
        for i in idx:
            c = nodes[i].kernel.comm  # type: ignore[union-attr]
            if c is None:
                kinds.append(K_COMPUTE)
            elif c.op == "receive":
                kinds.append(K_RECV)
            elif c.op == "send":
                kinds.append(K_SEND)
            else:
                kinds.append(K_MP)
        kind = np.array(kinds, dtype=np.int8)
        jk = np.array([jitter.key_of(nodes[i].full_name) for i in idx], dtype=np.uint64)
        seq = cls(idx, base, kind, jk)
        start = 0
        n = len(kinds)
        while start < n:
            if kinds[start] != K_COMPUTE:
                seq.segments.append((start, start + 1, kinds[start]))
                start += 1
                continue
            end = start
            while end < n and kinds[end] == K_COMPUTE:
                end += 1
            seq.segments.append((start, end, K_COMPUTE))
            start = end
        return seq


@dataclass
class StageProgram:
    stage: int
    ranks: np.ndarray  # global rank ids, local order (dp-major, mp-minor)
    graph: StageGraph
    kernels: list[Node]
    fwd: OpSeq
    bwd: OpSeq
    opt: OpSeq
    bucket_idx: np.ndarray
    bucket_base: np.ndarray
    bucket_keys: np.ndarray
    bucket_ready_pos: np.ndarray  # positions in bwd
    mem_delta: np.ndarray  # bytes per kernel index (allocation at the kernel's end)
    dp: int
    mp: int


def build_program(w: Workload, g: StageGraph) -> StageProgram:
    kernels = g.kernel_nodes()
    index = {n.key: i for i, n in enumerate(kernels)}
    fwd = OpSeq.of(kernels, index, g.fwd_seq)
    bwd = OpSeq.of(kernels, index, g.bwd_seq)
    opt = OpSeq.of(kernels, index, g.opt_seq)
    pos = {k: i for i, k in enumerate(g.bwd_seq)}
    order = sorted(g.buckets, key=lambda b: pos[b.ready_after])
    b_idx = np.array([index[b.key] for b in order], dtype=np.int32)
    b_base = np.array([kernels[i].kernel.ns for i in b_idx], dtype=np.float64)  # type: ignore[union-attr]
    b_keys = np.array([jitter.key_of(kernels[i].full_name) for i in b_idx], dtype=np.uint64)
    b_ready = np.array([pos[b.ready_after] for b in order], dtype=np.int64)
    mem = np.zeros(len(kernels), dtype=np.int64)
    for k, d in g.mem_delta.items():
        mem[index[k]] += d
    return StageProgram(g.stage, np.array(w.stage_ranks(g.stage), dtype=np.int64), g, kernels, fwd, bwd, opt, b_idx,
                        b_base, b_keys, b_ready, mem, w.dp, w.mp)


@dataclass
class Block:
    """Kernels of one block on every rank of a stage: ``start``/``dur`` are (n_ranks, n_ops) ns."""

    stage: int
    step: int
    micro: int
    phase: str  # F | B | O (optimizer) | K (gradient buckets, comm stream)
    idx: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    transit: np.ndarray  # (n_ranks, n_ops) each rank's own transfer time in comm kernels (0 for compute)
    seq: np.ndarray  # (n_ops,) HCCL launch number (-1 for compute)


@dataclass
class RunSchedule:
    programs: list[StageProgram]
    blocks: list[list[Block]]  # per stage
    step_start: dict[int, np.ndarray]  # stage → (n_ranks, steps)
    step_end: dict[int, np.ndarray]
    tail_wait: dict[int, np.ndarray]  # exposed gradient communication before the optimizer
    gap_ns: int
    steps: int
    data_wait: dict[int, np.ndarray] = field(default_factory=dict)  # stage → (n_ranks, steps): the wait for data

    def wait_ns(self, stage: int, local: int) -> np.ndarray:
        """Per step, how long the rank waited for its batch at the step start (ns)."""
        return self.data_wait[stage][local] if stage in self.data_wait else np.full(self.steps, self.gap_ns, np.int64)


def _one_f_one_b(pp: int, s: int, m: int) -> list[tuple[str, int]]:
    warm = min(pp - s - 1, m)
    order = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        order.append(("F", warm + i))
        order.append(("B", i))
    order += [("B", i) for i in range(m - warm, m)]
    return order


class _Executor:
    def __init__(self, w: Workload, programs: list[StageProgram], steps: int, gap_ns: int, seed: int,
                 launch_ns: int, faults: tuple = (), data_ready_ns: np.ndarray | None = None,
                 dequeue_ns: int = 0) -> None:
        self.w = w
        self.progs = programs
        self.steps = steps
        self.gap = int(gap_ns)
        self.data_ready = data_ready_ns
        self.dequeue = int(dequeue_ns)
        self.data_wait = {p.stage: np.zeros((len(p.ranks), steps), dtype=np.int64) for p in programs}
        self.seed = seed
        self.launch = launch_ns
        self.T = {p.stage: np.full(len(p.ranks), T0_NS, dtype=np.int64) for p in programs}
        self.comm_free = {p.stage: np.full(len(p.ranks), T0_NS, dtype=np.int64) for p in programs}
        self.rank_f = {p.stage: jitter.rank_factor(seed, p.ranks) for p in programs}
        self.sends: dict[tuple[str, int, int, int], tuple[np.ndarray, np.ndarray]] = {}
        self.blocks: list[list[Block]] = [[] for _ in programs]
        self.seq_counter = {p.stage: 100 for p in programs}
        self.step_start = {p.stage: np.zeros((len(p.ranks), steps), dtype=np.int64) for p in programs}
        self.step_end = {p.stage: np.zeros((len(p.ranks), steps), dtype=np.int64) for p in programs}
        self.tail = {p.stage: np.zeros((len(p.ranks), steps), dtype=np.int64) for p in programs}
        self.bucket_ready: dict[int, np.ndarray] = {}
        self._cluster_faults(faults)

    def _cluster_faults(self, faults: tuple) -> None:
        """Per stage: a kernel-time factor per (rank, kernel), extra data wait per rank, link factor per (rank, kernel)."""
        from advisor_core.simulate.faults import DegradedLink, SlowDataRank, SlowKernelRank

        self.kernel_f: dict[int, np.ndarray] = {}
        self.extra_gap: dict[int, np.ndarray] = {}
        self.link_f: dict[int, np.ndarray] = {}
        for p in self.progs:
            n_r, n_k = len(p.ranks), len(p.kernels)
            kf, lf = np.ones((n_r, n_k)), np.ones((n_r, n_k))
            gap = np.zeros(n_r, dtype=np.int64)
            for f in faults:
                hit = np.flatnonzero(p.ranks == getattr(f, "rank", -1))
                if not len(hit):
                    continue
                r = int(hit[0])
                if isinstance(f, SlowKernelRank):
                    for i, k in enumerate(p.kernels):
                        if k.kernel.comm is None and f.op_type in k.kernel.op_type:  # type: ignore[union-attr]
                            kf[r, i] *= f.factor
                elif isinstance(f, SlowDataRank):
                    gap[r] += int(round(f.extra_wait_us * 1000))
                elif isinstance(f, DegradedLink):
                    for i, k in enumerate(p.kernels):
                        c = k.kernel.comm  # type: ignore[union-attr]
                        if c is not None and (not f.link or c.link == f.link):
                            lf[r, i] *= f.factor
            self.kernel_f[p.stage], self.extra_gap[p.stage], self.link_f[p.stage] = kf, gap, lf

    def group_max(self, p: StageProgram, t: np.ndarray, kind: str) -> np.ndarray:
        grid = t.reshape(p.dp, p.mp)
        if kind == "mp":
            return np.repeat(grid.max(axis=1), p.mp)
        return np.tile(grid.max(axis=0), p.dp)

    def run_seq(self, p: StageProgram, seq: OpSeq, step: int, micro: int, phase: str) -> Block:
        n_r, n_o = len(p.ranks), len(seq.idx)
        start = np.empty((n_r, n_o), dtype=np.int64)
        dur = np.empty((n_r, n_o), dtype=np.int64)
        transit = np.zeros((n_r, n_o), dtype=np.int64)
        seqno = np.full(n_o, -1, dtype=np.int64)
        T = self.T[p.stage]
        jf = self.rank_f[p.stage]
        kf = self.kernel_f[p.stage]
        lf = self.link_f[p.stage]
        cf = jitter.comm_factors(self.seed, step, micro, seq.keys) if n_o else np.zeros(0)
        for a, b, kind in seq.segments:
            if kind == K_COMPUTE:
                f = jitter.kernel_factors(self.seed, p.ranks, step, micro, seq.keys[a:b]) * jf[:, None]
                f = f * kf[:, seq.idx[a:b]]
                d = np.maximum(1, np.rint(seq.base[a:b][None, :] * f)).astype(np.int64)
                ends = T[:, None] + np.cumsum(d, axis=1)
                start[:, a:b] = ends - d
                dur[:, a:b] = d
                T = ends[:, -1].copy()
                continue
            tr = max(1, int(round(seq.base[a] * cf[a])))
            own = np.maximum(1, np.rint(tr * lf[:, seq.idx[a]])).astype(np.int64)  # each rank's share
            transit[:, a] = own
            seqno[a] = self.seq_counter[p.stage]
            self.seq_counter[p.stage] += 1
            if kind == K_MP:
                end = self.group_max(p, T, "mp") + self.group_max(p, own, "mp")
            elif kind == K_SEND:
                self.sends[(phase, step, micro, p.stage)] = (T.copy(), own.copy())
                end = T + own
            else:  # receive: the peer stage's send of the same micro batch
                peer = p.stage - 1 if phase == "F" else p.stage + 1
                s_start, s_tr = self.sends[(phase, step, micro, peer)]
                end = np.maximum(T + self.launch, s_start + s_tr)
                transit[:, a] = s_tr
            start[:, a] = T
            dur[:, a] = end - T
            T = end
        self.T[p.stage] = T
        return Block(p.stage, step, micro, phase, seq.idx, start, dur, transit, seqno)

    def ready(self, s: int, item: tuple[str, int, int]) -> bool:
        phase, step, micro = item
        if phase == "F" and s > 0:
            return ("F", step, micro, s - 1) in self.sends
        if phase == "B" and s < self.w.pp - 1:
            return ("B", step, micro, s + 1) in self.sends
        return True

    def execute(self, p: StageProgram, item: tuple[str, int, int]) -> None:
        phase, step, micro = item
        s = p.stage
        if phase == "D":
            self.step_start[s][:, step] = self.T[s]
            wait = self.gap + self.extra_gap[s]
            if self.data_ready is not None and step < len(self.data_ready):
                # the batch is not in the device queue yet (the pipeline still warming up): wait for it
                wait = np.maximum(wait, self.data_ready[step] - self.T[s] + self.dequeue)
            self.data_wait[s][:, step] = wait
            self.T[s] = self.T[s] + wait
            return
        if phase in ("F", "B"):
            blk = self.run_seq(p, p.fwd if phase == "F" else p.bwd, step, micro, phase)
            self.blocks[s].append(blk)
            if phase == "B" and micro == self.w.micro_batches - 1:
                ends = blk.start + blk.dur
                self.bucket_ready[s] = ends[:, p.bucket_ready_pos] if len(p.bucket_ready_pos) else np.zeros((len(p.ranks), 0), np.int64)
            return
        # tail: gradient buckets on the communication stream, then the optimizer
        T = self.T[s]
        n_r, n_b = len(p.ranks), len(p.bucket_idx)
        if n_b:
            ready = self.bucket_ready[s]
            start = np.empty((n_r, n_b), dtype=np.int64)
            dur = np.empty((n_r, n_b), dtype=np.int64)
            transit = np.zeros((n_r, n_b), dtype=np.int64)
            seqno = np.zeros(n_b, dtype=np.int64)
            cf = jitter.comm_factors(self.seed, step, 0, p.bucket_keys)
            free = self.comm_free[s]
            lf = self.link_f[s]
            for j in range(n_b):
                st = np.maximum(ready[:, j], free)
                tr = max(1, int(round(p.bucket_base[j] * cf[j])))
                own = np.maximum(1, np.rint(tr * lf[:, p.bucket_idx[j]])).astype(np.int64)
                end = self.group_max(p, st, "dp") + self.group_max(p, own, "dp")
                start[:, j], dur[:, j] = st, end - st
                transit[:, j] = own
                seqno[j] = self.seq_counter[s]
                self.seq_counter[s] += 1
                free = end
            self.comm_free[s] = free
            self.blocks[s].append(Block(s, step, 0, "K", p.bucket_idx, start, dur, transit, seqno))
            opt_start = np.maximum(T, free)
        else:
            opt_start = T
        self.tail[s][:, step] = opt_start - T
        self.T[s] = opt_start
        blk = self.run_seq(p, p.opt, step, 0, "O")
        self.blocks[s].append(blk)
        self.step_end[s][:, step] = self.T[s]

    def run(self) -> None:
        pp, m = self.w.pp, self.w.micro_batches
        plans = []
        for p in self.progs:
            items: list[tuple[str, int, int]] = []
            for step in range(self.steps):
                items.append(("D", step, 0))
                items += [(ph, step, i) for ph, i in _one_f_one_b(pp, p.stage, m)]
                items.append(("T", step, 0))
            plans.append(items)
        ptr = [0] * len(self.progs)
        while any(ptr[i] < len(plans[i]) for i in range(len(plans))):
            progressed = False
            for i, p in enumerate(self.progs):
                while ptr[i] < len(plans[i]) and self.ready(p.stage, plans[i][ptr[i]]):
                    self.execute(p, plans[i][ptr[i]])
                    ptr[i] += 1
                    progressed = True
            if not progressed:  # pragma: no cover - 1F1B never deadlocks
                raise RuntimeError("pipeline schedule deadlock")


def run_schedule(w: Workload, programs: list[StageProgram], steps: int, gap_ns: int, seed: int,
                 launch_ns: int, faults: tuple = (), data_ready_ns: np.ndarray | None = None,
                 dequeue_ns: int = 0) -> RunSchedule:
    """Replay ``steps`` steps of every stage (see module docstring); ``faults``: the cluster faults among them.

    ``data_ready_ns`` (absolute, per step): when each batch reaches the device queue while the
    pipeline warms up; a step whose batch is not there yet waits for it (plus ``dequeue_ns``)
    instead of the steady ``gap_ns``.
    """
    ex = _Executor(w, programs, steps, gap_ns, seed, launch_ns, tuple(faults), data_ready_ns, dequeue_ns)
    ex.run()
    return RunSchedule(programs, ex.blocks, ex.step_start, ex.step_end, ex.tail, int(gap_ns), steps, ex.data_wait)
