"""Evidence from the MindData pipeline files: which op is the bottleneck, from its queues' usage.

MindInsight's reading of the queues (seed 003): an op whose input queue is full while its
output queue is empty (low on average, or empty in most samples) is slow; the leaf reader is slow when its queue and every queue after it
are low; when every queue is full yet the device waits — or the device queue is empty while
the host queue is full — the host→device transfer is the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor_rules.md001_minddata.wait import Wait

EMPTY_MOST = 0.5  # an output queue empty in at least this share of its samples counts as empty


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


def pipeline_frame(rank: Any) -> Any:
    """The ``minddata_pipeline`` table, else one built from MindSpore's summary; ``None`` without either."""
    import pandas as pd

    pipe = rank.table("minddata_pipeline") if rank.has_table("minddata_pipeline") else None
    if pipe is not None and not pipe.empty:
        return pipe
    summ = rank.table("minddata_summary") if rank.has_table("minddata_summary") else None
    if summ is None or summ.empty:
        return None
    return pd.DataFrame(
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


def find_bottleneck(rank: Any, full_usage: float, empty_usage: float, wait: Wait | None = None) -> Bottleneck | None:
    """The op whose input queue is full while its output is empty, else a starving leaf, else the transfer.

    ``wait`` (the rank's :func:`~advisor_rules._common.data_wait`) decides first when its queues
    say the device queue runs empty while the host queue stays full: that is the transfer,
    whatever the pipeline's own queues look like.
    """
    import pandas as pd

    if wait is not None and wait.bound == "transfer":
        return _transfer(rank, wait)
    pipe = pipeline_frame(rank)
    if pipe is None:
        return None
    usage = {int(r.op_id): (None if pd.isna(r.queue_usage_rate) else float(r.queue_usage_rate)) for r in pipe.itertuples()}
    empty_freq = {int(r.op_id): (None if pd.isna(r.queue_empty_freq) else float(r.queue_empty_freq)) for r in pipe.itertuples()}
    by_id = {int(r.op_id): r for r in pipe.itertuples()}
    parent = {int(r.op_id): (None if pd.isna(r.parent_id) else int(r.parent_id)) for r in pipe.itertuples()}
    best: Bottleneck | None = None
    best_gap = -1.0
    for r in pipe.itertuples():
        children = list(r.children_ids or [])
        out = usage.get(int(r.op_id))
        # an op without an output queue of its own (the sink-mode root) hands its input straight on
        if not children or out is None:
            continue
        ins = [usage.get(c) for c in children if usage.get(c) is not None]
        if not ins:
            continue
        in_u = max(ins)
        # empty: low on average, or empty in most samples (a queue of 2 batches can't show 20 % on average)
        out_empty = out <= empty_usage or (empty_freq.get(int(r.op_id)) or 0.0) >= EMPTY_MOST
        if in_u >= full_usage and out_empty and in_u - out > best_gap:
            best_gap = in_u - out
            child = by_id.get(children[0])
            freq = empty_freq.get(int(r.op_id))
            best = Bottleneck(
                int(r.op_id), op_label(r), str(r.op_type), _int(r.num_workers),
                f"its input queue (from {op_label(child) if child is not None else 'its child'}) is {100 * in_u:.1f}% full "
                f"while its own output queue is {100 * out:.1f}% full"
                + (f" (empty in {100 * freq:.0f}% of samples)" if out > empty_usage and freq is not None else ""),
                in_u, out, "op",
            )
    if best is not None:
        return best
    for r in pipe.itertuples():
        if list(r.children_ids or []):
            continue
        chain = _queues_after(int(r.op_id), usage, parent)
        if chain and all(u < full_usage for _, u in chain):
            u = chain[0][1]
            after = ", ".join(f"{op_label(by_id[o])} {100 * v:.1f}%" for o, v in chain[1:])
            return Bottleneck(int(r.op_id), op_label(r), str(r.op_type), _int(r.num_workers),
                              f"the leaf reader's output queue is only {100 * u:.1f}% full on average"
                              + (f", and so is every queue after it ({after})" if after else ""),
                              None, u, "leaf")
    queues = [u for u in usage.values() if u is not None]
    if wait is not None and wait.bound and queues and all(u >= 0.8 for u in queues):
        return _transfer(rank, wait, pipe)
    return None


def _queues_after(op_id: int, usage: dict[int, float | None], parent: dict[int, int | None]) -> list[tuple[int, float]]:
    """The op's own output queue and every queue up to the root, as (op id, usage); ops without a queue skipped."""
    out = []
    node: int | None = op_id
    while node is not None:
        u = usage.get(node)
        if u is not None:
            out.append((node, u))
        node = parent.get(node)
    return out


def _transfer(rank: Any, wait: Wait, pipe: Any = None) -> Bottleneck:

    if pipe is None:
        pipe = pipeline_frame(rank)
    label = "host→device transfer"
    if pipe is not None and not pipe.empty:
        root = pipe[pipe["parent_id"].isna()]
        if not root.empty and str(root.iloc[0]["op_type"]).startswith(("DataQueue", "DeviceQueue")):
            label = op_label(next(root.itertuples()))  # the op that pushes batches to the device
    if wait.device_empty_share is not None and wait.host_empty_share is not None:
        reason = (f"the device queue is empty at {100 * wait.device_empty_share:.0f}% of the steady GetNext calls while "
                  f"the host queue is empty in only {100 * wait.host_empty_share:.0f}% of the steps: the pipeline keeps "
                  "the host queue filled, the batches wait on the host→device copy")
    else:
        reason = "every pipeline queue is full yet the device waits: the host→device copy is the limit"
    return Bottleneck(-1, label, "transfer", None, reason, None, None, "transfer")


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
