"""``trace_view.json`` (MindSpore ≥ 2.5 layers) and ``step_trace_time.csv`` from the same overlap sets.

``trace_view.json`` is a top-level array. Processes, found by ``process_name``: ``MindSpore``
(``ProfilerStep#<n>`` events, unless ``profiler_steps`` is off — MindSpore itself writes none,
torch_npu does), ``CPU OP`` (the host ``GetNext`` waiting for data each step), ``Scope Layer`` (one event per decoder layer and micro batch),
``Ascend Hardware`` (device kernels on ``Stream 2``), ``HCCL`` (one ``Group <name> Communication``
thread per group; only when there is communication) and ``Overlap Analysis`` (threads
``Computing``, ``Communication``, ``Communication(Not Overlapped)``, ``Free``). ``ts`` and
``dur`` are strings with three decimals, as MindSpore writes them (``str(Decimal)``).

``step_trace_time.csv`` follows MindSpore's ``AscendStepTraceTimeViewer``: one row, ``Step`` 0,
sums of the Overlap Analysis events written as ``str(Decimal)`` (``0`` when there are none);
``Bubble`` = HCCL send/receive time, ``Stage`` = (last − first HCCL start) − ``Bubble``;
``Preparing`` 0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from advisor_core.simulate.nodes import Node
from advisor_core.simulate.rankdata import RankData
from advisor_core.simulate.writers.fastfmt import int_text, join, lit_col, take_text, us_text, write_lines
from advisor_core.simulate.writers.kernels import AICPU_STREAM, COMPUTE_STREAM, kernel_stream

__all__ = ["write_trace_view", "write_step_trace_time", "step_trace_values", "PIDS"]

PIDS = {"CPU OP": 2, "Scope Layer": 3, "Ascend Hardware": 4, "HCCL": 5, "Overlap Analysis": 6}
_OVERLAP_TIDS = {"Computing": 1, "Communication": 2, "Communication(Not Overlapped)": 3, "Free": 4}
_PP_PATTERNS = (re.compile(r"hcom_\w+SendRecv__\d+"), re.compile(r"hcom_send__\d+"), re.compile(r"hcom_receive__\d+"),
                re.compile(r"Receive-op"), re.compile(r"Send-op"))
CHUNK = 250_000


def _us(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(int(ns))
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def _hccl_names(rd: RankData, nodes: list[Node]) -> list[str]:
    out = []
    for j in np.flatnonzero(rd.is_comm):
        k = nodes[int(rd.node_idx[j])].kernel
        out.append(f"{k.kernel}_{int(rd.seq[j])}_0_1")  # type: ignore[union-attr]
    return out


def step_trace_values(rd: RankData, nodes: list[Node]) -> dict[str, str]:
    """The 10 columns exactly as MindSpore's viewer computes them (Decimal arithmetic on 3-decimal µs)."""
    def total(iv: np.ndarray) -> int | None:
        return int((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else None

    def fmt(v: int | None) -> str:
        return "0" if v is None else _us(v)

    comp, comm, cno, free = (total(rd.computing), total(rd.communication), total(rd.comm_not_overlapped), total(rd.free))
    overlapped = None if comm is None and cno is None else (comm or 0) - (cno or 0)
    names = _hccl_names(rd, nodes)
    if names:
        starts = rd.start[rd.is_comm]
        stage_span = int(starts.max() - starts.min())
        bubble_parts = [int(d) for nm, d in zip(names, rd.dur[rd.is_comm]) if any(p.match(nm) for p in _PP_PATTERNS)]
        bubble: int | None = sum(bubble_parts) if bubble_parts else None
        stage = stage_span - (bubble or 0)
        stage_txt, bubble_txt = _us(stage), fmt(bubble)
    else:
        bubble = None
        stage_txt, bubble_txt = "0", "0"
    exclude = None if cno is None and bubble is None else (cno or 0) - (bubble or 0)
    return {
        "Step": "0",
        "Computing": fmt(comp),
        "Communication(Not Overlapped)": fmt(cno),
        "Overlapped": fmt(overlapped),
        "Communication": fmt(comm),
        "Free": fmt(free),
        "Stage": stage_txt,
        "Bubble": bubble_txt,
        "Communication(Not Overlapped and Exclude Receive)": fmt(exclude),
        "Preparing": "0",
    }


def write_step_trace_time(path: Path, rd: RankData, nodes: list[Node]) -> dict[str, str]:
    vals = step_trace_values(rd, nodes)
    path.write_text(",".join(vals) + "\n" + ",".join(vals.values()) + "\n", encoding="utf-8")
    return vals


def _meta(pid: int, name: str, sort: int, labels: str | None = None) -> list[dict]:
    ev = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}]
    if labels is not None:
        ev.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": labels}})
    ev.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}})
    return ev


def _thread(pid: int, tid: int, name: str, sort: int) -> list[dict]:
    return [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": sort}}]


class _Raw(str):
    """An event already rendered as JSON text (bulk events skip the dict + json.dumps round trip)."""


def _x(name: str, pid: int, tid: int, ts: int, dur: int, args: dict | None = None) -> _Raw:
    a = json.dumps(args, separators=(",", ":")) if args else "{}"
    return _Raw(f'{{"ph":"X","name":"{name}","pid":{pid},"tid":{tid},"ts":"{_us(ts)}","dur":"{_us(dur)}","cat":"","args":{a}}}')


def write_trace_view(path: Path, rd: RankData, nodes: list[Node], *, ms_pid: int, device_id: int,
                     group_ids: dict[str, str], gap_ns: int | np.ndarray = 0, profiler_steps: bool = True) -> None:
    """Write the trace (see module docstring). ``group_ids``: group kind (mp, dp, pp_next…) → group name;
    ``profiler_steps``: write the ``ProfilerStep#<n>`` events."""
    small: list[dict | _Raw] = []
    small += _meta(ms_pid, "MindSpore", 1)
    small += _thread(ms_pid, ms_pid, f"Thread {ms_pid}", 0)
    for st in range(len(rd.step_start) if profiler_steps else 0):
        small.append(_x(f"ProfilerStep#{st + 1}", ms_pid, ms_pid, int(rd.step_start[st]),
                        int(rd.step_end[st] - rd.step_start[st])))
    # host side: the dataset's GetNext waits for the device queue at the start of every step
    small += _meta(PIDS["CPU OP"], "CPU OP", 2, labels="CPU")
    small += _thread(PIDS["CPU OP"], 0, "Thread 0", 0)
    for st in range(len(rd.step_start)):
        wait = int(gap_ns[st]) if isinstance(gap_ns, np.ndarray) else int(gap_ns)  # per step when it varies
        small.append(_x("Default/GetNext-op0", PIDS["CPU OP"], 0, int(rd.step_start[st]), max(1, wait),
                        {"type": "HostCpuOps"}))
    small += _meta(PIDS["Scope Layer"], "Scope Layer", 5)
    small += _thread(PIDS["Scope Layer"], 0, "Thread 0", 0)
    small += _scope_layer_events(rd, nodes)
    small += _meta(PIDS["Ascend Hardware"], "Ascend Hardware", 10, labels=f"NPU {device_id}")
    small += _thread(PIDS["Ascend Hardware"], COMPUTE_STREAM, f"Stream {COMPUTE_STREAM}", COMPUTE_STREAM)
    if any(n.kernel is not None and n.kernel.core == "AI_CPU" for n in nodes):
        small += _thread(PIDS["Ascend Hardware"], AICPU_STREAM, f"Stream {AICPU_STREAM}", AICPU_STREAM)
    hccl_tid: dict[str, int] = {}
    if rd.is_comm.any():
        small += _meta(PIDS["HCCL"], "HCCL", 11, labels=f"NPU {device_id}")
        kinds = sorted({nodes[int(i)].kernel.comm.group for i in np.unique(rd.node_idx[rd.is_comm])})  # type: ignore[union-attr]
        for t, kind in enumerate(kinds):
            hccl_tid[kind] = 1000 + t
            small += _thread(PIDS["HCCL"], 1000 + t, f"Group {group_ids[kind]} Communication", t)
        for j, nm in zip(np.flatnonzero(rd.is_comm), _hccl_names(rd, nodes)):
            node = nodes[int(rd.node_idx[j])]
            c = node.kernel.comm  # type: ignore[union-attr]
            small.append(_x(nm, PIDS["HCCL"], hccl_tid[c.group], int(rd.start[j]), int(rd.dur[j]),
                            {"connection_id": int(rd.seq[j]), "model id": 4294967295, "data_type": "FP16",
                             "alg_type": "RING" if c.op != "send" and c.op != "receive" else "P2P",
                             "size(Byte)": int(c.transit_bytes), "comm_group": group_ids[c.group],
                             "mindspore_op": node.full_name}))
    op = PIDS["Overlap Analysis"]
    small += _meta(op, "Overlap Analysis", 20, labels=f"NPU {device_id}")
    for name, tid in _OVERLAP_TIDS.items():
        small += _thread(op, tid, name, tid)
    for name, iv in (("Computing", rd.computing), ("Communication", rd.communication),
                     ("Communication(Not Overlapped)", rd.comm_not_overlapped), ("Free", rd.free)):
        for s, e in iv.tolist():
            small.append(_x(name, op, _OVERLAP_TIDS[name], s, e - s))
    with open(path, "wb") as fh:
        fh.write(b"[\n")
        _write_kernel_events(fh, rd, nodes)
        body = ",\n".join(e if isinstance(e, _Raw) else json.dumps(e, ensure_ascii=False, separators=(",", ":"))
                           for e in small)
        fh.write(body.encode("utf-8"))
        fh.write(b"\n]\n")


def _write_kernel_events(fh, rd: RankData, nodes: list[Node]) -> None:  # type: ignore[no-untyped-def]
    """Device kernels (compute stream) as ``X`` events, each line ending ``,\\n``."""
    pid = PIDS["Ascend Hardware"]
    head, tail = [], []
    for n in nodes:
        k = n.kernel
        assert k is not None
        stream = kernel_stream(k.core)
        head.append(f'{{"ph":"X","name":"{k.kernel}","pid":{pid},"tid":{stream},"ts":"')
        tail.append(f'","cat":"","args":{{"Model Id":4294967295,"Task Type":"{k.core}","Stream Id":{stream},'
                    f'"Task Id":')
    ops = [f',"mindspore_op":"{n.full_name}"}}}},\n' for n in nodes]
    comp = np.flatnonzero(~rd.is_comm)
    task = np.arange(len(comp)) % 65535 + 1
    for a in range(0, len(comp), CHUNK):
        sel = comp[a:a + CHUNK]
        idx = rd.node_idx[sel]
        lines = join(take_text(head, idx), us_text(rd.start[sel]), lit_col('","dur":"'), us_text(rd.dur[sel]),
                     take_text(tail, idx), int_text(task[a:a + CHUNK]), take_text(ops, idx))
        write_lines(fh, lines)


def _scope_layer_events(rd: RankData, nodes: list[Node]) -> list[_Raw]:
    layer = np.array([n.layer if n.layer is not None else -1 for n in nodes], dtype=np.int64)[rd.node_idx]
    keep = (layer >= 0) & (rd.phase <= 1)
    if not keep.any():
        return []
    ends = rd.start + rd.dur
    key = np.stack([rd.step[keep], rd.micro[keep], rd.phase[keep].astype(np.int32), layer[keep]], axis=1)
    order = np.lexsort(key.T[::-1])
    key = key[order]
    st, en = rd.start[keep][order], ends[keep][order]
    brk = np.ones(len(key), dtype=bool)
    brk[1:] = (key[1:] != key[:-1]).any(axis=1)
    idx = np.flatnonzero(brk)
    s_min = np.minimum.reduceat(st, idx)
    e_max = np.maximum.reduceat(en, idx)
    by_time = np.argsort(s_min, kind="stable")
    idx, s_min, e_max = idx[by_time], s_min[by_time], e_max[by_time]
    out: list[_Raw] = []
    for i, a in enumerate(idx):
        _, _, ph, ly = key[a]
        name = f"{ly}-LLamaDecodeLayer" if ph == 0 else f"Gradients/{ly}-LLamaDecodeLayer"
        out.append(_x(name, PIDS["Scope Layer"], 0, int(s_min[i]), int(e_max[i] - s_min[i])))
    return out
