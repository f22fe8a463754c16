"""``memory_record.csv``, ``npu_module_mem.csv`` and ``operator_memory.csv`` (MindSpore ≥ 2.5 forms).

* ``memory_record.csv``: ``Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Device Type``;
  a ``MindSpore`` row per allocation event followed by its ``MindSpore+GE`` row (no GE records
  here, so equal values), then ``APP`` rows. MindSpore's unit quirk is kept: bytes / 1024 → KB,
  KB / **1000** → "MB"; timestamps are ``Decimal(ns) / 1000``.
* ``npu_module_mem.csv``: ``Device_id,Component,Timestamp(us),Total Reserved(MB),Device``.
* ``operator_memory.csv``: the 15 torch_npu/MindSpore headers; one row per saved activation of each
  layer and micro batch (allocated by the layer's forward, released by its backward) and one
  never-released row per parameter (release fields ``N/A``); MB = bytes / 1024².
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path

import numpy as np

from advisor_core.simulate.rankdata import RUNTIME_RESERVED_BYTES, RankData
from advisor_core.simulate.stage import StageGraph

__all__ = ["write_memory_files"]


def _mb_quirk(nbytes: float) -> float:
    return float(nbytes) / 1024 / 1000


def _ts(ns: int) -> str:
    return str(Decimal(int(ns)) / 1000)


def _us3(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def write_memory_files(apo: Path, rd: RankData, g: StageGraph, device_id: int) -> None:
    dev = f"NPU:{rd.rank}"
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)", "Device Type"])
    reserved = float(rd.peak_memory_bytes)
    for t, b in zip(rd.mem_t.tolist(), rd.mem_bytes.tolist()):
        row = [_ts(t), _mb_quirk(b), _mb_quirk(reserved), _mb_quirk(b), dev]
        w.writerow(["MindSpore"] + row)
        w.writerow(["MindSpore+GE"] + row)
    lo, hi = rd.window
    app = reserved  # the process's reserved device memory: the peak the run reached
    for t in (lo, hi):
        w.writerow(["APP", str(Decimal(t) / 1000), 0.0, _mb_quirk(app), 0.0, dev])
    (apo / "memory_record.csv").write_text(buf.getvalue(), encoding="utf-8")

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["Device_id", "Component", "Timestamp(us)", "Total Reserved(MB)", "Device"])
    # APP is the whole process (peak included); the others are its parts kept by CANN modules
    modules = [("APP", app), ("HCCL", 200 * 1024 * 1024), ("RUNTIME", RUNTIME_RESERVED_BYTES - 200 * 1024 * 1024),
               ("SLOG", 8 * 1024 * 1024), ("DRV", 64 * 1024 * 1024)]
    for t in (lo, hi):
        for comp, b in modules:
            w.writerow([device_id, comp, _us3(t) + "\t", round(_mb_quirk(b), 3), f"NPU:{device_id}"])
    (apo / "npu_module_mem.csv").write_text(buf.getvalue(), encoding="utf-8")

    header = ("Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),Active Duration(us),"
              "Allocation Total Allocated(MB),Allocation Total Reserved(MB),Allocation Total Active(MB),"
              "Release Total Allocated(MB),Release Total Reserved(MB),Release Total Active(MB),Stream Ptr,Device Type\n")
    mib = 1024 * 1024
    lines = [header]
    a0 = _alloc_at(rd, np.array([lo]))[0] / mib
    for name, t in g.params:
        n = 1
        for d in t.shape:
            n *= d
        nbytes = n * (4 if t.dtype == "float32" else 2)
        lines.append(f"{name},{nbytes / 1024:.3f},{_us3(lo)},N/A,N/A,N/A,N/A,{a0:.6f},{reserved / mib:.6f},{a0:.6f},"
                     f"N/A,N/A,N/A,N/A,{dev}\n")
    idx_of = {n.key: i for i, n in enumerate(g.kernel_nodes())}
    ends_all = rd.start + rd.dur
    for layer in g.layers:
        f_ends = ends_all[rd.node_idx == idx_of[g.layer_fwd_end[layer]]]
        b_ends = ends_all[rd.node_idx == idx_of[g.layer_bwd_end[layer]]]
        k = min(len(f_ends), len(b_ends))
        f_ends, b_ends = f_ends[:k], b_ends[:k]
        fa = _alloc_at(rd, f_ends) / mib
        ba = _alloc_at(rd, b_ends) / mib
        for tensor, nbytes, producer in g.layer_graphs[layer].saved:
            pname = g.by_key[producer].full_name if producer in g.by_key else tensor
            kb = f"{nbytes / 1024:.3f}"
            for ta, tr, aa, ar in zip(f_ends.tolist(), b_ends.tolist(), fa.tolist(), ba.tolist()):
                lines.append(f"{pname},{kb},{_us3(ta)},{_us3(tr)},N/A,{_us3(tr - ta)},N/A,{aa:.6f},{aa:.6f},{aa:.6f},"
                             f"{ar:.6f},{ar:.6f},{ar:.6f},N/A,{dev}\n")
    (apo / "operator_memory.csv").write_text("".join(lines), encoding="utf-8")


def _alloc_at(rd: RankData, t: np.ndarray) -> np.ndarray:
    """Total allocated bytes at each time in ``t`` (the curve is a step function of the event times)."""
    i = np.searchsorted(rd.mem_t, t, side="right") - 1
    return rd.mem_bytes[np.maximum(i, 0)].astype(np.float64)
