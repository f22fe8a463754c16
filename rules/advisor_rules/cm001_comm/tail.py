"""(B) Evidence: the gradient AllReduce in the step tail (profile), the parameter list (IR or config), readiness."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from advisor_core.engine import RuleContext
from advisor_rules._common import ir_dumps_for, ir_parameters, kernel_scope, llama_parameters, trainable_parameters
from advisor_rules.cm001_comm.stages import receive_slack

if TYPE_CHECKING:  # pragma: no cover - heavy imports are made where used
    import numpy as np

COMM_CORES = ["HCCL", "COMMUNICATION"]
_GRAD_REDUCER = re.compile(r"grad_reducer|GradReducer", re.I)
# ``<attribute>-<CellClass>`` (``layer1-SequentialCell``, ``0-ResidualBlock``, ``wq-Linear``); ops end in ``-op<N>``
_CELL_SEG = re.compile(r"^(?P<attr>\w+?)-(?P<cls>[A-Za-z_]\w*)$")
_OP_SEG = re.compile(r"^\w+-op\d+$")


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
    grad_ar_op = (is_comm_op & names.str.contains("allReduce|AllReduce", regex=True).to_numpy()
                  & names.str.contains(_GRAD_REDUCER.pattern, case=False, regex=True).to_numpy())
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
    counts = [len(b) for b in per_step]
    buckets = max(set(counts), key=counts.count)
    same = [b for b in per_step if len(b) == buckets]
    return {"ar_us": float(ar_total / steps), "exposed_us": float(exposed_total / steps),
            "buckets": buckets, "bucket_us": [float(np.mean([b[i][0] for b in same])) for i in range(buckets)],
            "overlapped": float(np.mean([sum(o for _, o in b) for b in per_step])),
            "wait_us": float(wait_total / steps), "step_us": mean_step_time_us(rank),
            "slack_us": receive_slack(view, bwd_ends, waits),
            "ar_name": kernel_scope(first) or first, "windows": bwd_ends,
            "bwd_last": _backward_ends(view, bwd, bwd_ends), "bwd_ops": _backward_op_ends(view, bwd, bwd_ends),
            "fwd_ends": fwd_ends,
            "fwd_order": _forward_order(view, bwd_op | is_comm_op)}


def _backward_op_ends(view: Any, bwd: np.ndarray, windows: list[tuple[int, int, int, int]]) -> dict[str, dict[int, int]]:
    """Last end (ns) of each backward op (by its IR full name), per step window."""
    import numpy as np
    import pandas as pd

    tl, ops = view.timeline, view.ops
    idx = np.flatnonzero(bwd)
    starts = np.array([w[0] for w in windows], dtype="int64")
    win = np.searchsorted(starts, tl.start_ns[idx], side="right") - 1
    scopes = ops["scope"].where(ops["scope"].notna(), ops["name"]).astype(str).to_numpy()
    df = pd.DataFrame({"op": tl.op[idx], "win": win, "end": tl.end_ns[idx]})
    last = df[df["win"] >= 0].groupby(["op", "win"])["end"].max()
    out: dict[str, dict[int, int]] = {}
    for (op, w), e in last.items():
        d = out.setdefault(str(scopes[int(op)]), {})
        d[int(w)] = max(d.get(int(w), 0), int(e))
    return out


def gradient_kernels(ir: Any, trained: set[str]) -> dict[str, str]:
    """Per trainable parameter, the full name of the backward kernel that produces its gradient.

    The optimizer updates each parameter from its gradient (``ApplyMomentum(w, m, lr, grad, …)``,
    ``AdamWeightDecay(w, m, v, …, grad)``); followed back through what only carries it (the
    grad reducer's AllReduce and mean, casts, ``TupleGetItem`` of a multi-output gradient such as
    BatchNormGrad's), the gradient comes from a node under ``Gradients/``: whatever the model and
    its kernel names, that kernel's end is when the gradient exists.
    """
    out: dict[str, str] = {}
    for n in ir.iter_nodes():
        refs = n.operand_refs
        if not refs or "optimizer" not in (n.scope or ""):
            continue
        p = ir.resolve(n, refs[0])
        name = getattr(p, "name", None) if p is not None and not hasattr(p, "op") else None
        if name not in trained or name in out:
            continue
        for r in refs[1:]:
            src = _gradient_source(ir, n, r)
            if src is not None:
                out[name] = src
                break
    return out


# Nodes a gradient passes through without a kernel of their own (views and plumbing)
_NO_KERNEL = {"TupleGetItem", "MakeTuple", "Depend", "Load", "UpdateState", "Reshape", "ExpandDims", "Squeeze", "Flatten"}


def _gradient_source(ir: Any, node: Any, ref: Any) -> str | None:
    cur = ir.resolve(node, ref) if ref.kind in ("node", "crossref") else None
    for _ in range(12):
        if cur is None or not hasattr(cur, "op"):
            return None
        if (cur.scope or "").startswith("Gradients/") and cur.op not in _NO_KERNEL:
            return cur.kernel_full_name or cur.scope
        nxt = [r for r in cur.operand_refs if r.kind in ("node", "crossref")]
        if not nxt:
            return None
        cur = ir.resolve(cur, nxt[0])
    return None


def _forward_order(view: Any, not_forward: np.ndarray) -> list[tuple[tuple[str, ...], float]]:
    """Forward compute time per cell (:func:`cell_path`), in the order the cells first run (µs over the profile)."""
    ops = view.ops
    keep = ~not_forward
    scopes = ops["scope"].where(ops["scope"].notna(), ops["name"]).astype(str)[keep]
    totals = ops["total_us"].to_numpy()[keep]
    order: dict[tuple[str, ...], float] = {}
    for sc, us in zip(scopes, totals):  # distinct ops, in the order they first ran
        path = cell_path(sc)
        order[path] = order.get(path, 0.0) + float(us)
    return list(order.items())


def cell_path(scope: str) -> tuple[str, ...]:
    """Every cell attribute on a kernel's scope, outermost first, whatever the model.

    ``Gradients/Default/network-WithLossCell/_backbone-ResNet/layer1-SequentialCell/0-ResidualBlock/
    conv1-Conv2d/Grad_Conv2D/Conv2DBackpropFilter-op0`` → ``(network, _backbone, layer1, 0, conv1)``:
    the ``Gradients``/``recompute_`` wrappers, gradient segments and the op are not cells.
    """
    out = []
    for seg in scope.split("/"):
        seg = seg.removeprefix("recompute_")
        if _OP_SEG.match(seg):
            break
        m = _CELL_SEG.match(seg)
        if m:
            out.append(m.group("attr"))
    return tuple(out)


def _backward_ends(view: Any, bwd: np.ndarray, windows: list[tuple[int, int, int, int]]) -> dict[tuple[str, ...], dict[int, int]]:
    """Last end (ns) of the backward kernels of each cell (:func:`cell_path`), per step window."""
    import numpy as np
    import pandas as pd

    tl, ops = view.timeline, view.ops
    idx = np.flatnonzero(bwd)
    starts = np.array([w[0] for w in windows], dtype="int64")
    win = np.searchsorted(starts, tl.start_ns[idx], side="right") - 1
    op = tl.op[idx]
    scopes = ops["scope"].where(ops["scope"].notna(), ops["name"]).astype(str)
    path_code, path_names = pd.factorize(pd.Series([cell_path(sc) for sc in scopes]))
    df = pd.DataFrame({"path": path_code[op], "win": win, "end": tl.end_ns[idx]})
    df = df[df["win"] >= 0]
    last = df.groupby(["path", "win"])["end"].max()
    by_path: dict[tuple[str, ...], dict[int, int]] = {}
    for (path, w), e in last.items():
        by_path.setdefault(path_names[path], {})[int(w)] = int(e)
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


def stage_gradient_kernels(ctx: RuleContext, rank: Any, stage: int, names: set[str]) -> dict[str, str]:
    """:func:`gradient_kernels` of the rank's IR: the kernel graph first (its names are the profile's), else the front end."""
    cfg = ctx.config
    rd = ir_dumps_for(ctx, rank.rank_id, stage, cfg.pipeline_stages if cfg is not None else 1,
                      cfg.device_count if cfg is not None else None)
    for kind in ("backend", "frontend"):
        ir = ctx.ir_graph(kind, rd) if rd is not None else None
        found = gradient_kernels(ir, names) if ir is not None else {}
        if found:
            return found
    return {}


def model_root(params: list[tuple[str, float]], paths: Any) -> tuple[str, ...]:
    """The cells that wrap the model on the kernels' scopes (``(network, _backbone)``), found from the parameters.

    A parameter ``layer1.0.conv1.weight`` belongs to cell ``(layer1, 0, conv1)``; the scopes carry
    that cell behind the training wrappers. The wrapper prefix most parameters' cells sit behind is
    the root; it keeps ``conv1`` (the stem) apart from ``layer1.0.conv1``.
    """
    behind: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for kp in paths:
        for i in range(len(kp)):
            behind.setdefault(kp[i:], []).append(kp[:i])
    votes: dict[tuple[str, ...], int] = {}
    for name, _ in params:
        for root in set(behind.get(tuple(name.split(".")[:-1]), ())):
            votes[root] = votes.get(root, 0) + 1
    return max(votes, key=lambda r: (votes[r], -len(r))) if votes else ()


def readiness(tail: dict[str, Any], params: list[tuple[str, float]]) -> list[float]:
    """Per parameter: when its gradient exists in the step's last backward, µs relative to the stream's end (≤ 0).

    A parameter's gradient is ready when the backward kernels of its cell and the cells inside it
    end (``layer1.0.conv1.weight`` → ``…/layer1-SequentialCell/0-ResidualBlock/conv1-Conv2d/…``,
    ``model.layers.3.feed_forward.w2.weight`` → ``…/layers-CellList/3-LLamaDecodeLayer/
    feed_forward-LlamaFeedForward/w2-Linear/…``), behind the wrappers :func:`model_root` finds; all
    micro batches launch the same kernels, so the last end in a step is the last micro batch's.
    Averaged over the profiled steps; a parameter without kernels of its own counts as ready at the end.

    Best evidence first: the IR's data flow names the kernel that produces each gradient
    (:func:`gradient_kernels`); compilers defer weight gradients (a real MindSpore ResNet-50 kernel
    graph runs most conv weight gradients after the input gradients of the earlier blocks), so the
    cell's last backward kernel is not when its gradient exists. Without that, backward kernel names
    are trusted when they tell the parameters apart: most parameters
    (:data:`NAMED_SHARE`) have backward kernels of their own and the gradients come out in the
    reverse of the parameter order (at most :data:`INVERSIONS` of the pairs the other way round).
    MindSpore's graph reuse can break that: identical blocks share one compiled backward, whose
    kernels all carry the first block's scope (a real ResNet-50 dump names every BatchNormGrad after
    the stem's ``bn1``). Then the forward kernels, which keep their cells, place each gradient: the
    backward runs the forward in reverse, so a cell's gradient is ready once the backward has done the
    share of the last micro batch's backward that the cells after it take in the forward.
    """
    from_ir = _from_gradient_kernels(tail, params)
    if from_ir is not None:
        tail["ready_from"] = "the kernels producing them (IR data flow)"
        return from_ir
    ready, named = _from_backward_names(tail, params)
    tail["ready_from"] = "the backward kernels of their cells"
    if named >= NAMED_SHARE * len(params) and _inversions(ready) <= INVERSIONS:
        return ready
    mirrored = _from_forward_order(tail, params)
    if mirrored is None:
        return ready
    tail["ready_from"] = ("the backward reaches their cells in reverse forward order (backward kernel names do not "
                          "tell the parameters apart)")
    return mirrored


NAMED_SHARE = 0.8
INVERSIONS = 0.2


def _from_gradient_kernels(tail: dict[str, Any], params: list[tuple[str, float]]) -> list[float] | None:
    """Readiness from each gradient's producing kernel (:func:`gradient_kernels`), when most are in the profile."""
    import numpy as np

    producers, ends, windows = tail.get("grad_kernels") or {}, tail.get("bwd_ops") or {}, tail["windows"]
    found = [ends.get(producers.get(name, "")) for name, _ in params]
    if sum(f is not None for f in found) < NAMED_SHARE * len(params):
        return None
    out = []
    for f in found:
        rel = [((f.get(wi, bwd_end) if f else bwd_end) - stream_end) / 1000.0
               for wi, (_, _, bwd_end, stream_end) in enumerate(windows)]
        out.append(float(np.mean(rel)) if rel else 0.0)
    return out


def _from_backward_names(tail: dict[str, Any], params: list[tuple[str, float]]) -> tuple[list[float], int]:
    import numpy as np

    by_path, windows = tail["bwd_last"], tail["windows"]
    root = model_root(params, by_path)
    out, named = [], 0
    for name, _ in params:
        cell = root + tuple(name.split(".")[:-1])
        mine = [wins for kp, wins in by_path.items() if kp[:len(cell)] == cell]
        named += bool(mine)
        rel = []
        for wi, (_, _, bwd_end, stream_end) in enumerate(windows):
            ends = [wins[wi] for wins in mine if wi in wins]
            rel.append(((max(ends) if ends else bwd_end) - stream_end) / 1000.0)
        out.append(float(np.mean(rel)) if rel else 0.0)
    return out, named


def _inversions(ready: list[float]) -> float:
    """Share of parameter pairs whose gradient is ready in parameter order (earlier parameter first)."""
    import numpy as np

    r = np.asarray(ready, dtype=float)
    later = np.triu(np.ones((len(r), len(r)), dtype=bool), 1)  # pairs i < j
    diff = r[None, :] - r[:, None]  # ready[j] − ready[i]
    pairs = int((later & (diff != 0)).sum())
    return float((later & (diff > 0)).sum()) / pairs if pairs else 0.0


def _from_forward_order(tail: dict[str, Any], params: list[tuple[str, float]]) -> list[float] | None:
    import numpy as np

    order = tail.get("fwd_order") or []
    total = sum(us for _, us in order)
    if not total or not tail.get("fwd_ends"):
        return None
    root = model_root(params, [p for p, _ in order])
    before, acc = [], 0.0
    for _, us in order:
        before.append(acc)
        acc += us
    out = []
    for name, _ in params:
        cell = root + tuple(name.split(".")[:-1])
        hit = [b for (kp, _), b in zip(order, before) if kp[:len(cell)] == cell]
        share = min(hit) / total if hit else 0.0  # forward time of the cells before it: their backward comes after
        rel = [(bwd_end - share * (bwd_end - fwd_end) - stream_end) / 1000.0
               for (_, _, bwd_end, stream_end), fwd_end in zip(tail["windows"], tail["fwd_ends"])]
        out.append(float(np.mean(rel)) if rel else 0.0)
    return out
