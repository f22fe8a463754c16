"""(B) Evidence: the gradient AllReduce in the step tail and its buckets (profile), the parameter list (IR or config)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from advisor_core.engine import RuleContext
from advisor_rules._common import ir_dumps_for, ir_parameters, kernel_scope, llama_parameters, trainable_parameters
from advisor_rules.cm001_comm.readiness import cell_path
from advisor_rules.cm001_comm.stages import receive_slack

if TYPE_CHECKING:  # pragma: no cover - heavy imports are made where used
    import numpy as np
    import pandas as pd

COMM_CORES = ["HCCL", "COMMUNICATION"]
_GRAD_REDUCER = re.compile(r"grad_reducer|GradReducer", re.I)


def hccl_waits(rank: Any) -> dict[str, list[tuple[int, float]]]:
    """``communication.json``'s ``Wait Time`` per HCCL op name: [(start ns, wait µs)], empty without the table."""
    c = rank.table("communication") if rank.has_table("communication") else None
    if c is None or c.empty or not {"op_name", "start_ns", "wait_us"} <= set(c.columns):
        return {}
    c = c[c["start_ns"].notna() & c["wait_us"].notna()]
    out: dict[str, list[tuple[int, float]]] = {}
    for name, st, w in zip(c["op_name"].astype(str), c["start_ns"].astype("int64"), c["wait_us"].astype(float)):
        out.setdefault(name, []).append((int(st), float(w)))
    return out


def _wait_ns(waits: dict[str, list[tuple[int, float]]], kernel_name: str, start: int, end: int) -> int:
    """The HCCL wait of the kernel (same op name, start inside the kernel), ns; 0 when unknown."""
    for st, w in waits.get(kernel_name.rpartition("/")[2], ()):
        if start - 1000 <= st <= end:
            return int(round(min(w * 1000.0, end - start)))
    return 0


def tail_of(rank: Any, view: Any) -> dict[str, Any] | None:
    """Gradient AllReduce transfer per step, the part after the last compute kernel, and that kernel's end, per step.

    Also the buckets as measured: how many gradient AllReduce kernels a step runs (``buckets``,
    the most common count), their mean transfer in time order (``bucket_us``) and how many start
    while the compute stream still runs (``overlapped``).

    An HCCL kernel lasts from the rank's arrival to the end of the transfer; the time it waits
    for the data-parallel peer that finishes its backward last (``Wait Time`` in
    communication.json) is skew between the ranks, which no bucket split removes (the last
    bucket waits for the same peer). So the time counted is the transfer: kernel time minus
    wait, exposed from the slowest member's arrival (the kernel start plus the wait). Kernels
    that still block the compute stream after the last gradient (a pipeline stage's Send of
    its input gradient) hide the transfer's start: the stream idles only from their end, on
    the slowest member as here, so exposure is the time after this rank's stream end minus the
    wait, and readiness is measured from the stream end (``windows``: step start, end, last
    backward kernel end, stream end).

    Reads the op view's timeline (kernel order), so it runs where the view was built; what it
    returns is small: per-step figures and, for :func:`readiness`, the last backward end of
    each (layer, cell path) per step.
    """
    import numpy as np
    import pandas as pd
    from advisor_core.analyses.step_time import mean_step_time_us
    from advisor_core.analyses.step_time import step_windows

    if view is None or view.timeline is None or not len(view.timeline):
        return None
    ops, tl = view.ops, view.timeline
    names = ops["name"].astype(str)
    is_comm_op = ops["is_comm"].to_numpy()
    comm_names = names[is_comm_op]  # only communication ops can be the gradient AllReduce
    grad_ar_op = is_comm_op.copy()
    grad_ar_op[is_comm_op] = (comm_names.str.contains("allReduce|AllReduce", regex=True).to_numpy(bool)
                              & comm_names.str.contains(_GRAD_REDUCER.pattern, case=False, regex=True).to_numpy(bool))
    bwd_op = names.str.contains(r"^Gradients/|/[Gg]rad", regex=True).to_numpy() & ~is_comm_op
    gmask, bwd = grad_ar_op[tl.op], bwd_op[tl.op]
    if not gmask.any():
        return None
    start, end = tl.start_ns, tl.end_ns
    windows = step_windows(rank)
    if windows is None:
        windows = pd.DataFrame({"step": [0], "start_ns": [int(start.min())], "end_ns": [int(end.max())]})
    waits = hccl_waits(rank)
    ar_total, exposed_total, wait_total, steps, bwd_ends = 0.0, 0.0, 0.0, 0, []
    per_step: list[list[tuple[float, bool]]] = []  # the step's buckets in time order: (transfer µs, overlapped)
    fwd_ends: list[int] = []
    comm_k = is_comm_op[tl.op]
    for w in windows.itertuples():  # per step
        lo, hi = np.searchsorted(start, [w.start_ns, w.end_ns], side="left")
        g_in, b_in = gmask[lo:hi], bwd[lo:hi]
        if not g_in.any() or not b_in.any():
            continue
        steps += 1
        e_in = end[lo:hi]
        bwd_end = int(e_in[b_in].max())
        last_ar = int(e_in[g_in].max())
        # the optimizer starts once the buckets are done; whatever else starts before still runs on the stream
        others = ~g_in & (start[lo:hi] < last_ar)
        stream_end = max(bwd_end, int(e_in[others].max()) if others.any() else bwd_end)
        bwd_ends.append((int(w.start_ns), int(w.end_ns), bwd_end, stream_end))
        # where the last micro batch's backward began: the end of the last forward kernel before it ends
        f_in = ~b_in & ~comm_k[lo:hi] & (start[lo:hi] < bwd_end) & (e_in <= bwd_end)
        fwd_ends.append(int(e_in[f_in].max()) if f_in.any() else int(w.start_ns))
        per_step.append([])
        for i in lo + np.flatnonzero(g_in):  # the step's gradient buckets
            s, e = int(start[i]), int(end[i])
            arrive = s + _wait_ns(waits, str(names.iat[int(tl.op[i])]), s, e)  # the slowest peer's arrival
            ar_total += (e - arrive) / 1000.0
            wait_total += (arrive - s) / 1000.0
            per_step[-1].append(((e - arrive) / 1000.0, arrive + 1000 < stream_end))  # 1 µs: timestamp rounding
            # the slowest member idles from its own stream end, ``wait`` later than this rank's
            exposed_total += max(0, e - max(s, stream_end) - (arrive - s)) / 1000.0
    if not steps:
        return None
    first = names.iat[int(tl.op[np.flatnonzero(gmask)[0]])]
    scopes = ops["scope"].where(ops["scope"].notna(), ops["name"]).astype(str).tolist()
    paths = [cell_path(sc) for sc in scopes]  # per distinct op, for the backward ends and the forward order
    last_by_op = _backward_last_by_op(view, bwd, bwd_ends)
    counts = [len(b) for b in per_step]
    buckets = max(set(counts), key=counts.count)
    same = [b for b in per_step if len(b) == buckets]
    return {"ar_us": float(ar_total / steps), "exposed_us": float(exposed_total / steps),
            "buckets": buckets, "bucket_us": [float(np.mean([b[i][0] for b in same])) for i in range(buckets)],
            "overlapped": float(np.mean([sum(o for _, o in b) for b in per_step])),
            "wait_us": float(wait_total / steps), "step_us": mean_step_time_us(rank),
            "slack_us": receive_slack(view, bwd_ends, waits),
            "ar_name": kernel_scope(first) or first, "windows": bwd_ends,
            "bwd_last": _backward_ends(last_by_op, paths),
            "bwd_ops": _backward_op_ends(last_by_op, scopes, len(bwd_ends)),
            "fwd_ends": fwd_ends,
            "fwd_order": _forward_order(view, bwd_op | is_comm_op, paths)}


def _backward_last_by_op(view: Any, bwd: np.ndarray, windows: list[tuple[int, int, int, int]]) -> pd.Series:
    """Last end (ns) of each backward op's kernels per step window: a Series on (op, window), sorted.

    The one pass over the backward kernels that both the per-op and the per-cell ends are read from.
    """
    import numpy as np
    import pandas as pd

    tl = view.timeline
    idx = np.flatnonzero(bwd)
    starts = np.array([w[0] for w in windows], dtype="int64")
    win = np.searchsorted(starts, tl.start_ns[idx], side="right") - 1
    df = pd.DataFrame({"op": tl.op[idx], "win": win, "end": tl.end_ns[idx]})
    return df[df["win"] >= 0].groupby(["op", "win"])["end"].max()


def _backward_op_ends(last: pd.Series, scopes: list[str], windows: int) -> OpEnds:
    """Last end (ns) of each backward op (by its IR full name, ``scopes`` per op), per step window
    (``last``: :func:`_backward_last_by_op`; ``windows``: how many)."""
    import numpy as np
    import pandas as pd

    ops = last.index.get_level_values(0).to_numpy()
    scope_code, names = pd.factorize(pd.Series(scopes, dtype=object).to_numpy()[ops])
    named = scope_code >= 0  # an op without a name (coded -1) is nothing a gradient's producer can be looked up by
    ends = np.full((len(names), windows), OpEnds.NONE, dtype="int64")
    # several ops may share a launch op's full name: the latest of theirs
    np.maximum.at(ends, (scope_code[named], last.index.get_level_values(1).to_numpy()[named]),
                  last.to_numpy(dtype="int64")[named])
    return OpEnds(list(names), ends)


class OpEnds:
    """The last end (ns) of each backward op's kernels per step window, by the op's IR full name.

    What CM001's check reads of a stage representative's tail (:func:`~advisor_rules.cm001_comm.readiness.
    readiness`, through :meth:`get`). Every rank's unit measures it and the client keeps it per rank, so
    it is one array (about 60 KB for a 40-layer model's 2 400 backward ops) rather than a dict of dicts
    (1.5 MB): at hundreds of ranks the difference is the client's memory. The names are interned when
    it arrives, so the ranks of a stage share them.
    """

    NONE = -1  # no kernel of the op in that window

    __slots__ = ("names", "ends", "_rows")

    def __init__(self, names: list[str], ends: np.ndarray) -> None:
        self.names = names
        self.ends = ends
        self._rows: dict[str, int] | None = None

    def get(self, name: str, default: Any = None) -> dict[int, int] | Any:
        """``{window: end ns}`` of the op ``name`` (its windows with a kernel), else ``default``."""
        if self._rows is None:
            self._rows = {n: i for i, n in enumerate(self.names)}
        row = self._rows.get(name)
        if row is None:
            return default
        return {w: int(e) for w, e in enumerate(self.ends[row].tolist()) if e != self.NONE}

    def __len__(self) -> int:
        return len(self.names)

    def __getstate__(self) -> tuple[list[str], np.ndarray]:
        return self.names, self.ends

    def __setstate__(self, state: tuple[list[str], np.ndarray]) -> None:
        import sys

        names, ends = state
        self.__init__([sys.intern(n) for n in names], ends)  # type: ignore[misc]


def _forward_order(view: Any, not_forward: np.ndarray,
                   paths: list[tuple[str, ...]]) -> list[tuple[tuple[str, ...], float]]:
    """Forward compute time per cell (``paths``: :func:`cell_path` per op), in the order the cells first run
    (µs over the profile)."""
    totals = view.ops["total_us"].tolist()
    order: dict[tuple[str, ...], float] = {}
    for path, us, forward in zip(paths, totals, (~not_forward).tolist()):  # distinct ops, in the order they first ran
        if forward:
            order[path] = order.get(path, 0.0) + us
    return list(order.items())


def _backward_ends(last: pd.Series, paths: list[tuple[str, ...]]) -> dict[tuple[str, ...], dict[int, int]]:
    """Last end (ns) of the backward kernels of each cell (``paths``: :func:`cell_path` per op), per step window:
    the latest of its ops' (``last``: :func:`_backward_last_by_op`)."""
    import pandas as pd

    path_code, path_names = pd.factorize(pd.Series(paths))
    df = pd.DataFrame({"path": path_code[last.index.get_level_values(0).to_numpy()],
                       "win": last.index.get_level_values(1).to_numpy(), "end": last.to_numpy()})
    by_cell = df.groupby(["path", "win"])["end"].max()
    by_path: dict[tuple[str, ...], dict[int, int]] = {}
    for path, w, e in zip(by_cell.index.get_level_values(0).tolist(), by_cell.index.get_level_values(1).tolist(),
                          by_cell.tolist()):
        by_path.setdefault(path_names[path], {})[w] = e
    return by_path


def stage_params(ctx: RuleContext, rank: Any, stage: int) -> list[tuple[str, float]]:
    """(name, elements) of the rank's trainable parameters in definition order: IR, else a Llama config.

    ``all_reduce_fusion_config`` indexes this list (bucket i holds parameters [kᵢ₋₁, kᵢ)).
    """
    import numpy as np

    cfg = ctx.config
    rd = ir_dumps_for(ctx, rank.rank_id, stage, cfg.pipeline_stages if cfg is not None else 1,
                      cfg.device_count if cfg is not None else None)
    ir = (ctx.ir_graph("frontend", rd) or ctx.ir_graph("parallel", rd)) if rd is not None else None
    params = [(n, s) for n, s, _ in trainable_parameters(ir_parameters(ir))] if ir is not None else []
    if not params and ctx.config is not None:
        params = [(n, s) for n, s, _ in llama_parameters(cfg, stage if cfg.pipeline_stages > 1 else None)]
    return [(n, float(np.prod(s))) for n, s in params]
