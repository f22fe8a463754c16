"""``kernel_details`` of one rank: kernel names → IR full names, time and launches per scope, fixed cost."""

from __future__ import annotations

import re
from typing import Any

# Accelerator cores whose kernels are communication (their time is waiting as much as working).
COMM_CORE_NAMES = {"HCCL", "COMMUNICATION"}
# ``<launch op full name>/<device kernel name>``: the part up to the ``<Op>-op<N>`` segment.
_KERNEL_SCOPE = re.compile(r"^(?P<scope>.*?/[A-Za-z]\w*-op\d+)(?:/.*)?$")


def kernel_scope(name: str) -> str | None:
    """The IR full name a kernel was launched for.

    MindSpore writes ``<launch op full name>/<device kernel name>``
    (``Default/…/MatMul-op3/aclnnMatmul_MatMulV3Common_MatMulV3``); a bare full name
    (CPU profiler, data dump) is its own scope; GE names (``trans_TransData_13``) have none.
    """
    m = _KERNEL_SCOPE.match(name)
    return m.group("scope") if m else None


def kernel_time_by_scope(rank: Any) -> tuple[dict[str, float], int]:
    """Total kernel µs per IR full name over the profile, and the number of steps it covers."""
    if not rank.has_table("kernels"):
        return {}, 1
    cols = rank.columns("kernels") or []
    want = [c for c in ("name", "duration_us", "step_id") if c in cols]
    k = rank.table("kernels", want)
    if k is None or k.empty:
        return {}, 1
    steps = int(k["step_id"].dropna().nunique()) if "step_id" in k else 0
    if not steps:
        from advisor_core.analyses.step_time import step_windows

        w = step_windows(rank)
        steps = len(w) if w is not None else 1
    scopes = k["name"].astype(str).map(kernel_scope)
    sums = k.assign(scope=scopes).dropna(subset=["scope"]).groupby("scope")["duration_us"].sum()
    return {str(s): float(v) for s, v in sums.items()}, max(steps, 1)


def kernel_launches_by_scope(rank: Any) -> dict[str, int]:
    """Number of kernel launches per IR full name over the profile (pairs with :func:`kernel_time_by_scope`)."""
    if not rank.has_table("kernels"):
        return {}
    k = rank.table("kernels", ["name"])
    if k is None or k.empty:
        return {}
    counts = k["name"].astype(str).map(kernel_scope).dropna().value_counts()
    return {str(s): int(v) for s, v in counts.items()}


def kernel_fixed_cost_us(rank: Any) -> float:
    """Per-launch fixed cost of a device kernel (µs), measured as the shortest compute kernel of the profile.

    A memory-bound kernel lasts fixed cost + bytes / bandwidth; the shortest kernel of a
    training step (a cast or update of a tiny tensor) moves next to nothing, so its
    duration is the fixed part (launch, scheduling, tail). 0 without kernels.
    """
    if not rank.has_table("kernels"):
        return 0.0
    cols = rank.columns("kernels") or []
    k = rank.table("kernels", [c for c in ("duration_us", "accelerator_core") if c in cols])
    if k is None or k.empty:
        return 0.0
    if "accelerator_core" in k:
        k = k[~k["accelerator_core"].astype(str).isin(COMM_CORE_NAMES)]
    d = k["duration_us"].dropna()
    d = d[d > 0]
    return float(d.min()) if not d.empty else 0.0


def kernel_cell(name: str) -> tuple[str, bool, str]:
    """(cell scope, is-backward, gradient segment) of a kernel name (AL001, CM001).

    Forward and backward kernels of one cell share the cell scope:
    ``Gradients/Default/…/wq-Linear/Grad_MatMul/TransData-op1/trans_TransData_7`` →
    (``Default/…/wq-Linear``, True, ``Grad_MatMul``); a recomputed copy's
    ``recompute_`` prefix is dropped.
    """
    scope = kernel_scope(name) or name
    segs = [s.removeprefix("recompute_") for s in scope.split("/") if s != "Gradients"]
    grads = [s for s in segs[:-1] if s.lower().startswith("grad")]
    keep = [s for s in segs[:-1] if not s.lower().startswith("grad")]
    return "/".join(keep), scope.startswith("Gradients/") or bool(grads), (grads[-1] if grads else "")
