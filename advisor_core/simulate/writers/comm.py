"""``communication.json`` and ``communication_matrix.json`` for one rank.

Keys are ``step<N>`` → ``collective`` / ``p2p`` → ``<hcom kernel name>@<group hash>`` where the
group hash is msprof-analyze's ``double_hash`` of the group name listed in
``profiler_metadata.json`` ``parallel_group_info`` (so the cluster analyser can map groups to
ranks). Times are ms, sizes MB (10⁶ bytes), bandwidth GB/s = MB/ms, start timestamps µs.
``Elapse Time(ms)`` is exactly the HCCL kernel's duration in ``kernel_details.csv``;
``Transit Time`` is the transfer part, ``Wait``/``Synchronization`` the time spent waiting for the
slowest member (or, for a Receive, for the sender).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from advisor_core.simulate.nodes import Node
from advisor_core.simulate.rankdata import RankData

__all__ = ["double_hash", "write_communication", "LINK_TYPES"]

LINK_TYPES = ("RDMA", "HCCS", "PCIE", "SDMA")


@lru_cache(maxsize=4096)
def double_hash(data: str) -> int:
    """msprof-analyze's group-name hash (``cluster_analyse/common_func/utils.py``)."""
    mask = 0xFFFFFFFF
    h0 = h1 = 0
    for ch in data:
        h0 = (h0 * 29 + ord(ch)) & mask
        h1 = (h1 * 131 + ord(ch)) & mask
    return (h0 << 32) | h1


def _ms(ns: int | float) -> float:
    return round(float(ns) / 1e6, 6)


def _bw_block(link: str | None, size_mb: float, time_ms: float) -> dict:
    out = {}
    for lt in LINK_TYPES:
        if lt == link and time_ms > 0:
            out[lt] = {"Transit Size(MB)": round(size_mb, 6), "Transit Time(ms)": time_ms,
                       "Bandwidth(GB/s)": round(size_mb / time_ms, 4), "Large Packet Ratio": 1.0 if size_mb >= 1.0 else 0.0,
                       "Size Distribution": {f"{size_mb:.6g}": [1, time_ms]}}
        else:
            out[lt] = {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
                       "Size Distribution": {}}
    return out


def _total(ops: dict) -> dict:
    keys = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)")
    tot = {k: 0.0 for k in keys}
    bw = {lt: [0.0, 0.0] for lt in LINK_TYPES}
    start = None
    for op in ops.values():
        t = op["Communication Time Info"]
        start = t["Start Timestamp(us)"] if start is None else min(start, t["Start Timestamp(us)"])
        for k in keys:
            tot[k] += t[k]
        for lt, v in op["Communication Bandwidth Info"].items():
            bw[lt][0] += v["Transit Size(MB)"]
            bw[lt][1] += v["Transit Time(ms)"]
    wait, tr, sync = tot["Wait Time(ms)"], tot["Transit Time(ms)"], tot["Synchronization Time(ms)"]
    info = {"Start Timestamp(us)": start or 0.0, **{k: round(v, 6) for k, v in tot.items()},
            "Wait Time Ratio": round(wait / (wait + tr), 4) if wait + tr else 0,
            "Synchronization Time Ratio": round(sync / (sync + tr), 4) if sync + tr else 0}
    bwi = {}
    for lt, (size, t) in bw.items():
        bwi[lt] = {"Transit Size(MB)": round(size, 6), "Transit Time(ms)": round(t, 6),
                   "Bandwidth(GB/s)": round(size / t, 4) if t else 0, "Large Packet Ratio": 0, "Size Distribution": {}}
    return {"Communication Time Info": info, "Communication Bandwidth Info": bwi}


def write_communication(out_dir: Path, rd: RankData, nodes: list[Node], group_ids: dict[str, str],
                        group_ranks: dict[str, list[int]]) -> None:
    comm: dict[str, dict[str, dict]] = {}
    matrix: dict[str, dict[str, dict]] = {}
    for j in np.flatnonzero(rd.is_comm):
        node = nodes[int(rd.node_idx[j])]
        k = node.kernel
        c = k.comm  # type: ignore[union-attr]
        step = f"step{int(rd.step[j]) + 1}"
        kind = "p2p" if c.op in ("send", "receive") else "collective"
        gid = group_ids[c.group]
        name = f"{k.kernel}_{int(rd.seq[j])}_0_1"  # type: ignore[union-attr]
        key = f"{name}@{double_hash(gid)}"
        dur = int(rd.dur[j])
        transit = min(int(rd.transit[j]), dur)
        wait = dur - transit
        size_mb = c.transit_bytes / 1e6
        op = {
            "Communication Time Info": {
                "Start Timestamp(us)": round(int(rd.start[j]) / 1000.0, 3),
                "Elapse Time(ms)": _ms(dur), "Transit Time(ms)": _ms(transit), "Wait Time(ms)": _ms(wait),
                "Synchronization Time(ms)": _ms(wait), "Idle Time(ms)": 0.0,
                "Wait Time Ratio": round(wait / dur, 4) if dur else 0,
                "Synchronization Time Ratio": round(wait / dur, 4) if dur else 0,
            },
            "Communication Bandwidth Info": _bw_block(c.link, size_mb, _ms(transit)),
        }
        comm.setdefault(step, {"collective": {}, "p2p": {}})[kind][key] = op
        ranks = group_ranks[c.group]
        local = ranks.index(rd.rank)
        n = len(ranks)
        links = {f"{local}-{local}": {"Transport Type": "LOCAL", "Transit Size(MB)": 0, "Transit Time(ms)": 0,
                                      "Bandwidth(GB/s)": 0, "Op Name": name}}
        if c.op == "send" or (kind == "collective" and n > 1):
            dst = ranks.index(ranks[(local + 1) % n]) if kind == "collective" else 1 - local
            links[f"{local}-{dst}"] = {"Transport Type": c.link, "Transit Size(MB)": round(size_mb, 6),
                                       "Transit Time(ms)": _ms(transit),
                                       "Bandwidth(GB/s)": round(size_mb / _ms(transit), 4) if transit else 0, "Op Name": name}
        op_type = c.op.lower()
        mkey = f"{op_type}-top1@{double_hash(gid)}"
        bucket = matrix.setdefault(step, {"collective": {}, "p2p": {}})[kind]
        for mk in (mkey, f"{op_type}-total@{double_hash(gid)}"):
            agg = bucket.setdefault(mk, {})
            for lk, lv in links.items():
                if lk in agg:
                    a = agg[lk]
                    a["Transit Size(MB)"] = round(a["Transit Size(MB)"] + lv["Transit Size(MB)"], 6)
                    a["Transit Time(ms)"] = round(a["Transit Time(ms)"] + lv["Transit Time(ms)"], 6)
                    a["Bandwidth(GB/s)"] = round(a["Transit Size(MB)"] / a["Transit Time(ms)"], 4) if a["Transit Time(ms)"] else 0
                else:
                    agg[lk] = dict(lv)
    for step in comm.values():
        for kind, ops in step.items():
            if ops:
                ops["Total Op Info"] = _total(ops)
    # compact: the C encoder (indent=None) is ~20x faster on runs with tens of thousands of ops
    (out_dir / "communication.json").write_text(json.dumps(comm), encoding="utf-8")
    (out_dir / "communication_matrix.json").write_text(json.dumps(matrix), encoding="utf-8")
