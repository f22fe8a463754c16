"""One rank's part of the slow-link check (its per-rank unit): transfers per link type and their exposure."""

from __future__ import annotations

from typing import Any


def _covered(a: Any, b: Any, us: Any, ue: Any) -> Any:
    """Length of [a, b) covered by the disjoint sorted intervals [us, ue), for arrays a, b (ns)."""
    import numpy as np

    if not len(us):
        return np.zeros(len(a))
    cum = np.concatenate([[0], np.cumsum(ue - us)])

    def upto(x: Any) -> Any:
        i = np.searchsorted(us, x, side="right") - 1
        ic = np.clip(i, 0, len(us) - 1)
        inside = np.clip(x - us[ic], 0, ue[ic] - us[ic])
        return np.where(i >= 0, cum[ic] + inside, 0)

    return upto(b) - upto(a)


def _compute_union(view: Any) -> tuple[Any, Any]:
    import numpy as np

    tl = view.timeline if view is not None else None
    if tl is None or not len(tl):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    comp = ~view.ops["is_comm"].to_numpy()[tl.op]
    s, e = tl.start_ns[comp], tl.end_ns[comp]
    if not len(s):
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    ends = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > ends[:-1]
    idx = np.flatnonzero(new)
    return s[new], np.maximum.reduceat(e, idx)


def link_figures(rank: Any) -> dict[str, Any] | None:
    """Per link type: per op arrays of MB moved, own transfer µs and µs not hidden by compute; waits per group
    (µs per step); the step count and step time. ``None`` without ``communication.json`` (or its DB twin)."""
    import numpy as np

    if not (rank.has_table("communication") and rank.has_table("communication_bandwidth")):
        return None
    comm = rank.table("communication")
    bw = rank.table("communication_bandwidth")
    if comm is None or bw is None or comm.empty:
        return None
    steps = max(int(comm["step"].nunique(dropna=False)), 1)
    ops = comm[["step", "op_name", "group", "start_ns", "elapse_us"]].copy()
    us, ue = _compute_union(rank.op_view())
    start = ops["start_ns"].astype("Int64").fillna(0).to_numpy(dtype=np.int64)
    end = start + np.round(ops["elapse_us"].fillna(0.0).to_numpy(dtype=float) * 1000).astype(np.int64)
    have_timeline = len(us) > 0
    ops["exposed_us"] = (ops["elapse_us"].fillna(0.0).to_numpy(dtype=float)
                         - _covered(start, end, us, ue) / 1000.0) if have_timeline else np.nan
    links = bw[(bw["transit_us"].fillna(0) > 0) & (bw["transit_size_mb"].fillna(0) > 0)]
    merged = links.merge(ops, on=["step", "op_name", "group"], how="left")
    per_link = {}
    for lt, part in merged.groupby("link_type", sort=True):
        per_link[str(lt)] = {
            "size_mb": part["transit_size_mb"].to_numpy(dtype=float),
            "transit_us": part["transit_us"].to_numpy(dtype=float),
            "exposed_us": part["exposed_us"].to_numpy(dtype=float),
            # msprof's large-packet share of the op's transfers (unknown counts as small: not judged on hardware)
            "large_ratio": part["large_packet_ratio"].astype(float).fillna(0.0).to_numpy(dtype=float)
            if "large_packet_ratio" in part else np.zeros(len(part)),
        }
    waits = (comm.groupby("group", dropna=True)["wait_us"].sum() / steps).to_dict()
    from advisor_rules._common import steady_breakdown

    bd = steady_breakdown(rank)
    return {"steps": steps, "links": per_link, "waits": {str(k): float(v) for k, v in waits.items()},
            "total_us": bd["total_us"] if bd is not None else None}


def matrix_pairs(rank: Any) -> list[dict[str, Any]]:
    """The rank's links to its peers (group, local source and destination, transport, MB, µs), from its
    communication matrix; read only for a rank found slow."""
    if not rank.has_table("communication_matrix"):
        return []
    mx = rank.table("communication_matrix")
    if mx is None or mx.empty:
        return []
    mx = mx[(mx["src_rank"] != mx["dst_rank"]) & mx["transit_us"].fillna(0).gt(0)]
    g = mx.groupby(["rank_set", "src_rank", "dst_rank", "transport_type"], dropna=True)[
        ["transit_size_mb", "transit_us"]].sum().reset_index()
    cols = list(g.columns)
    return [dict(zip(cols, values)) for values in zip(*(g[c].tolist() for c in cols))]
