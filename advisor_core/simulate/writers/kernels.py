"""``kernel_details.csv`` (MindSpore ≥ 2.5, Level1, PipeUtilization) and ``op_statistic.csv``.

Header: MindSpore's set (``Device_id`` dropped, ``Step ID`` kept because a schedule is set and
the jit level is O1; ``Block Dim``/``Mix Block Dim`` as MindSpore's constants spell them).
``Name`` is ``<launch op full name>/<device kernel name>``; start times carry CANN's trailing TAB
(``"1750000000000000.123\\t"``); shapes carry literal double quotes (the value is ``"4096,4096"``, CSV-quoted once more);
HCCL rows have ``N/A`` ids, shapes and metrics. Rows are in start-time order.

``op_statistic.csv`` aggregates exactly the durations written to ``kernel_details.csv``
(integer nanoseconds, so totals match to the last digit).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from advisor_core.simulate.hardware import HardwareProfile
from advisor_core.simulate.nodes import Node, TType
from advisor_core.simulate.rankdata import RankData
from advisor_core.simulate.workload import cann_dtype
from advisor_core.simulate.writers.fastfmt import int_text, join, lit_col, take_text, us_text, write_lines

__all__ = ["KERNEL_HEADER", "write_kernel_details", "write_op_statistic", "kernel_display_name", "COMPUTE_STREAM",
           "AICPU_STREAM", "kernel_stream"]

KERNEL_HEADER = (
    "Step ID,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),"
    "Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,"
    "Output Formats,Context ID,aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
    "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),"
    "aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,"
    "aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,"
    "aiv_icache_miss_rate,cube_utilization(%)"
)
COMPUTE_STREAM = 2
# AI_CPU kernels run on a stream of their own beside the AI cores' (msprof-analyze's real sample: AI_CPU and DSA
# kernels on stream 17 interleaved in time with the AI-core kernels of stream 16); HCCL rows carry no stream (N/A).
AICPU_STREAM = 3
CHUNK = 250_000
_PMU_NA = ",".join(["N/A"] * 25)


def kernel_stream(core: str) -> int:
    """The Stream ID a device kernel of accelerator ``core`` runs on (communication kernels have none)."""
    return AICPU_STREAM if core == "AI_CPU" else COMPUTE_STREAM


def kernel_display_name(node: Node, seq: int | None = None) -> str:
    """``<full name>/<kernel>``; HCCL kernels are numbered per launch (``hcom_allReduce__105_0_1``)."""
    k = node.kernel
    assert k is not None
    if k.comm is not None:
        return f"{node.full_name}/{k.kernel}_{seq}_0_1"
    return f"{node.full_name}/{k.kernel}"


def _shapes(types: list[TType | None]) -> tuple[str, str, str]:
    ts = [t for t in types if t is not None]
    if not ts:
        return '""""""', "", ""
    shapes = ";".join(t.cann_shape() for t in ts)
    return f'"""{shapes}"""', ";".join(cann_dtype(t.dtype) for t in ts), ";".join(t.cann_format for t in ts)


def _r(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".") if x else "0"


def _pmu(node: Node, hw: HardwareProfile) -> str:
    k = node.kernel
    assert k is not None
    dur_us = k.ns / 1000.0
    busy = max(0.0, dur_us - hw.kernel_launch_overhead_us)
    mhz = hw.ai_core_frequency_mhz
    if k.core in ("AI_CORE", "MIX_AIC"):
        t = busy
        aic = [t, t * mhz, t * k.cube_fraction, k.cube_fraction, t * 0.06, 0.06, t * 0.3 * k.cube_fraction,
               0.3 * k.cube_fraction, t * k.mte2_fraction, k.mte2_fraction, t * 0.08, 0.08, 0.001]
    else:
        aic = [0.0] * 13
    if k.core in ("AI_VECTOR_CORE", "MIX_AIC"):
        t = busy
        aiv = [t, t * mhz, t * k.vec_fraction, k.vec_fraction, t * 0.05, 0.05, t * k.mte2_fraction, k.mte2_fraction,
               t * 0.6 * k.mte2_fraction, 0.6 * k.mte2_fraction, 0.002]
    else:
        aiv = [0.0] * 11
    cube = 100.0 * k.cube_fraction * busy / dur_us if k.core in ("AI_CORE", "MIX_AIC") and dur_us else 0.0
    vals = aic + aiv + [cube]
    out = []
    for i, v in enumerate(vals):
        is_cycles = i in (1, 14)
        out.append(str(int(round(v))) if is_cycles else _r(v))
    return ",".join(out)


def _node_tables(nodes: list[Node], hw: HardwareProfile) -> tuple[list[str], list[str], list[str], list[str]]:
    """Per kernel node: ``Name,…,"`` (before the start time), the tail after Wait, the Type and the Stream ID."""
    pre, post, types, streams = [], [], [], []
    for n in nodes:
        k = n.kernel
        assert k is not None
        types.append(k.op_type)
        streams.append("N/A" if k.comm is not None else str(kernel_stream(k.core)))
        if k.comm is not None:
            pre.append("")
            post.append("0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A," + _PMU_NA)
            continue
        state = "static" if k.op_type == "TransData" else "dynamic"
        pre.append(f"{kernel_display_name(n)},{k.op_type},{state},{k.core},\"")
        ins = _shapes(list(n.in_types))
        outs = _shapes([n.out] * n.out_tuple if n.out is not None else [])
        mix = str(hw.vector_core_count) if k.core == "MIX_AIC" else "0"
        post.append(f"{k.block_dim},{mix},NO,{ins[0]},{ins[1]},{ins[2]},{outs[0]},{outs[1]},{outs[2]},N/A,{_pmu(n, hw)}")
    return pre, post, types, streams


def write_kernel_details(path: Path, rd: RankData, nodes: list[Node], hw: HardwareProfile, step_id: bool = True) -> None:
    """``kernel_details.csv``; without ``step_id`` the ``Step ID`` column is left out, as MindSpore does
    without a schedule or at jit level O2."""
    pre, post, _, streams = _node_tables(nodes, hw)
    n = len(rd.node_idx)
    comm = rd.is_comm
    # Task IDs and Wait Time count along the compute stream only.
    task = np.zeros(n, dtype=np.int64)
    wait = np.zeros(n, dtype=np.int64)
    ci = np.flatnonzero(~comm)
    task[ci] = np.arange(len(ci)) % 65535 + 1
    if len(ci):
        ends = rd.start[ci] + rd.dur[ci]
        w = np.zeros(len(ci), dtype=np.int64)
        w[1:] = np.maximum(0, rd.start[ci][1:] - ends[:-1])
        wait[ci] = w
    with open(path, "wb") as fh:
        fh.write(((KERNEL_HEADER if step_id else KERNEL_HEADER.removeprefix("Step ID,")) + "\n").encode())
        for a in range(0, n, CHUNK):
            b = min(n, a + CHUNK)
            idx = rd.node_idx[a:b]
            cm = comm[a:b]
            first = take_text(pre, idx)
            if cm.any():
                names = []
                for j in np.flatnonzero(cm):
                    node = nodes[int(idx[j])]
                    k = node.kernel
                    names.append(f"{kernel_display_name(node, int(rd.seq[a + j]))},{k.op_type},N/A,HCCL,\"")  # type: ignore[union-attr]
                first = pc.replace_with_mask(first, pa.array(cm), pa.array(names, type=pa.string()))
            task_txt = pc.if_else(pa.array(cm), lit_col("N/A"), int_text(task[a:b]))
            stream_txt = take_text(streams, idx)
            head = [int_text(rd.step[a:b].astype(np.int64) + 1), lit_col(",4294967295,")] if step_id else [lit_col("4294967295,")]
            lines = join(*head, task_txt, lit_col(","),
                         stream_txt, lit_col(","), first, us_text(rd.start[a:b]), lit_col('\t",'), us_text(rd.dur[a:b]),
                         lit_col(","), us_text(wait[a:b]), lit_col(","), take_text(post, idx), lit_col("\n"))
            write_lines(fh, lines)


def write_op_statistic(path: Path, rd: RankData, nodes: list[Node]) -> dict[tuple[str, str], int]:
    """Per (op type, core) count/total/min/avg/max; returns the totals in ns (for tests)."""
    types = np.array([nodes[i].kernel.op_type for i in range(len(nodes))], dtype=object)  # type: ignore[union-attr]
    cores = np.array([nodes[i].kernel.core for i in range(len(nodes))], dtype=object)  # type: ignore[union-attr]
    key_of_node = {}
    keys: list[tuple[str, str]] = []
    for i in range(len(nodes)):
        k = (types[i], cores[i])
        if k not in key_of_node:
            key_of_node[k] = len(keys)
            keys.append(k)
    node_key = np.array([key_of_node[(types[i], cores[i])] for i in range(len(nodes))], dtype=np.int64)
    kk = node_key[rd.node_idx] if len(rd.node_idx) else np.zeros(0, dtype=np.int64)
    nk = len(keys)
    count = np.bincount(kk, minlength=nk)
    total = np.zeros(nk, dtype=np.int64)
    np.add.at(total, kk, rd.dur)
    mins = np.full(nk, np.iinfo(np.int64).max, dtype=np.int64)
    maxs = np.zeros(nk, dtype=np.int64)
    np.minimum.at(mins, kk, rd.dur)
    np.maximum.at(maxs, kk, rd.dur)
    grand = int(total.sum()) or 1
    rows = []
    for j in sorted(range(nk), key=lambda j: (-int(total[j]), keys[j])):
        if count[j] == 0:
            continue
        t = int(total[j])
        rows.append(
            f"{keys[j][0]},{keys[j][1]},{int(count[j])},{_us(t)},{_us(int(mins[j]))},{t / count[j] / 1000:.3f},"
            f"{_us(int(maxs[j]))},{100.0 * t / grand:.3f}"
        )
    path.write_text("OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
                    + "".join(r + "\n" for r in rows), encoding="utf-8")
    return {keys[j]: int(total[j]) for j in range(nk) if count[j]}


def _us(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"
