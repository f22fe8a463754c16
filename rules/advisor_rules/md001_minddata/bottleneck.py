"""Evidence from the MindData pipeline files: which op is the bottleneck, from its queues' usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Bottleneck:
    """The pipeline op (or the host→device transfer) that limits the pipeline, and why."""

    op_id: int
    label: str  # "Map(id=2)"
    op_type: str
    workers: int | None
    reason: str
    in_usage: float | None
    out_usage: float | None
    kind: str  # op | leaf | transfer


def find_bottleneck(rank: Any, full_usage: float, empty_usage: float) -> Bottleneck | None:
    """The op whose input queue is full while its output is empty, else a starving leaf, else the transfer."""
    import pandas as pd

    pipe = rank.table("minddata_pipeline") if rank.has_table("minddata_pipeline") else None
    if pipe is None or pipe.empty:
        summ = rank.table("minddata_summary") if rank.has_table("minddata_summary") else None
        if summ is None or summ.empty:
            return None
        pipe = pd.DataFrame(
            {
                "op_id": summ["op_id"],
                "op_type": summ["op_name"].astype(str) + "Op",
                "num_workers": summ["num_workers"],
                "queue_usage_rate": summ["queue_utilization_pct"] / 100.0,
                "queue_empty_freq": summ["queue_empty_freq_pct"] / 100.0,
                "parent_id": summ["parent_id"],
                "children_ids": summ["children_ids"],
            }
        )
    usage = {int(r.op_id): (None if pd.isna(r.queue_usage_rate) else float(r.queue_usage_rate)) for r in pipe.itertuples()}
    by_id = {int(r.op_id): r for r in pipe.itertuples()}
    best: Bottleneck | None = None
    best_gap = -1.0
    for r in pipe.itertuples():
        children = list(r.children_ids or [])
        if pd.isna(r.parent_id) or not children:
            continue
        ins = [usage.get(c) for c in children if usage.get(c) is not None]
        out = usage.get(int(r.op_id))
        if not ins or out is None:
            continue
        in_u = max(ins)
        if in_u >= full_usage and out <= empty_usage and in_u - out > best_gap:
            best_gap = in_u - out
            child = by_id.get(children[0])
            best = Bottleneck(
                int(r.op_id), op_label(r), str(r.op_type), _int(r.num_workers),
                f"its input queue (from {op_label(child) if child is not None else 'its child'}) is {100 * in_u:.1f}% full "
                f"while its own output queue is {100 * out:.1f}% full",
                in_u, out, "op",
            )
    if best is not None:
        return best
    leaves = [r for r in pipe.itertuples() if not list(r.children_ids or []) and not pd.isna(r.parent_id)]
    for r in leaves:
        u = usage.get(int(r.op_id))
        if u is not None and u < full_usage:
            return Bottleneck(int(r.op_id), op_label(r), str(r.op_type), _int(r.num_workers),
                               f"the leaf reader's output queue is only {100 * u:.1f}% full on average",
                               None, u, "leaf")
    non_root = [usage.get(int(r.op_id)) for r in pipe.itertuples() if not pd.isna(r.parent_id)]
    if non_root and all(u is not None and u >= 0.8 for u in non_root):
        root = pipe[pipe["parent_id"].isna()]
        label = op_label(next(root.itertuples())) if not root.empty else "device queue"
        return Bottleneck(-1, label, "transfer", None,
                           "every pipeline queue is full yet the device waits: host→device transfer is the limit",
                           None, None, "transfer")
    return None


def op_label(r: Any) -> str:
    """``Map(id=2)``: MindSpore's name for a pipeline op row."""
    name = str(r.op_type)
    if name.endswith("Op"):
        name = name[:-2]
    return f"{name}(id={int(r.op_id)})"


def _int(v: Any) -> int | None:
    import numpy as np
    import pandas as pd

    try:
        return None if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else int(v)
    except (TypeError, ValueError):
        return None
