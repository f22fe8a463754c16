"""(A) What a redistribution chain costs per step: its kernels on a profile, else its bytes over HCCS."""

from __future__ import annotations

import re

from typing import Any

from advisor_core.engine import RuleContext
from advisor_rules._common import fold_layer_index, kernel_cell, kernel_scope
from advisor_rules.cm001_comm.chains import COMM_OPS, Chain

# Ops a tensor redistribution is made of (MindSpore's TensorRedistribution): collectives and data movement.
_REDIS_OP = re.compile(r"/(AllGather|AllToAll|AlltoAll|AlltoAllV|ReduceScatter|Split|SplitV|Concat|StridedSlice|Slice)-op\d+$")


def chain_cost(view: Any, ch: Chain, others: set[str]) -> tuple[float, int]:
    """Per-step µs of a chain on one rank, and the kernels counted per step (see Time at stake).

    In the consumer's cell (forward and backward): the redistribution kernels (their IR
    nodes, or kinds the graph has no other node for: the backward's), and the kernels that
    run on the whole gathered tensor — input shaped like the chain's Concat output (the
    consumer, its gradient, conversions around it) — of which 1 − 1/g goes with the fix.
    Without shapes, the consumer's own kernels and its ``Grad_<op>`` kernels stand for those.
    Reads the rank's op view (each op: every launch of one kernel).
    """
    if view is None:
        return 0.0, 0
    ops = view.ops
    leaves = {c.rpartition("/")[2] + "/" for c in ch.cells}
    near = ops[ops["name"].astype(str).str.contains("|".join(re.escape(x) for x in leaves), regex=True)] if leaves else ops.iloc[:0]
    cells = {_any_layer(c) for c in ch.cells}
    consumers = {_any_layer(c) for c in ch.consumer_scopes}
    others = {_any_layer(o) for o in others}
    rows = []
    for r in near.itertuples():
        name = str(r.name)
        cell, bwd, grad = kernel_cell(name)
        if _any_layer(cell) in cells:
            scope = _any_layer(kernel_scope(name) or name)
            rows.append((r, scope, bwd, grad, _REDIS_OP.search(scope.removeprefix("Gradients/")) is not None
                         and scope not in others))
    full = {str(r.output_shapes) for r, scope, _, _, redis in rows
            if redis and "/Concat" in scope and r.output_shapes is not None}
    cons_ops = {s.rpartition("/")[2].split("-op")[0].lower() for s in ch.consumer_scopes}
    total, count = 0.0, 0
    for r, scope, bwd, grad, redis in rows:
        if redis:
            total += float(r.per_step_us)
            count += int(r.count)
            continue
        if ch.gather <= 1:
            continue
        first_in = str(r.input_shapes).split(";")[0].strip('"')
        whole = (any(first_in == f.strip('"') for f in full) if full
                 else scope in consumers or (bwd and re.sub(r"[^a-z]", "", grad.lower()) in {"grad" + o for o in cons_ops}))
        if whole:
            total += float(r.per_step_us) * (1.0 - 1.0 / ch.gather)  # runs on the whole gathered axis
            count += int(r.count)
    return total, round(count / max(view.steps, 1))


def bytes_estimate(ctx: RuleContext, ch: Chain, hccs_gbps: float) -> float:
    """Without a profile: the bytes the chain's collectives output, twice (the gradient is gathered too),
    per micro batch, over ``hccs_gbps`` (µs per step)."""
    import numpy as np

    nbytes = 0.0
    for o in ch.ops:
        if o.op in COMM_OPS and o.out_types:
            shape = getattr(o.out_types[0], "shape", None)
            nbytes += float(np.prod([d for d in shape if d and d > 0])) * 2 if shape else 0.0
    cfg = ctx.config
    micro = (cfg.micro_batch_num if cfg.pipeline_stages > 1 else cfg.gradient_accumulation_steps) if cfg is not None else 1
    return 2 * nbytes * max(micro, 1) / (hccs_gbps * 1e3)


def _any_layer(scope: str) -> str:
    """A scope with its decoder-layer index blanked, so one layer's graph matches every layer's kernels."""
    return fold_layer_index(scope)
