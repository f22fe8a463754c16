"""Helpers shared by the built-in rules (not a rule; rules never import each other)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterable

from advisor_core.engine.findings import Location, Severity

if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.ir.model import IRNode

# msprof-analyze's priority model: share of the step time.
HIGH_SHARE_PCT = 5.0
MEDIUM_SHARE_PCT = 3.0

# Assumed when a rule must estimate a time without a profile (documented in each rule's help).
ASSUMED_HBM_GBPS = 1600.0 * 0.6  # 910B-class HBM at a realistic 60 % efficiency
ASSUMED_CUBE_TFLOPS = 313.0 * 0.5  # fp16/bf16 cube at 50 % efficiency

DTYPE_BYTES = {
    "Float64": 8, "Float32": 4, "Float16": 2, "BFloat16": 2, "Int64": 8, "Int32": 4, "Int16": 2, "Int8": 1,
    "UInt8": 1, "Bool": 1, "DT_FLOAT": 4, "DT_FLOAT16": 2, "DT_BF16": 2, "DT_DOUBLE": 8, "DT_INT64": 8, "DT_INT32": 4,
    "DT_INT8": 1, "DT_BOOL": 1, "FLOAT": 4, "FLOAT16": 2, "BF16": 2,
}
# Higher = more precise. Used to tell lossy from lossless cast round trips.
PRECISION = {"Float64": 5, "Float32": 4, "BFloat16": 2, "Float16": 2, "Int64": 3, "Int32": 3, "Int16": 1, "Int8": 0, "UInt8": 0, "Bool": 0}

_LAYER_SEG = re.compile(r"^(\d+)-\w+$")
_CELL_SEG = re.compile(r"^(?P<attr>[A-Za-z_]\w*)-(?P<cls>\w+)$")
_OP_SEG = re.compile(r"^(?P<op>\w+)-op\d+$")


def severity_for_share(pct: float | None, *, floor: Severity = Severity.LOW) -> Severity:
    """msprof-analyze's model: ≥ 5 % of the step is high, ≥ 3 % medium."""
    if pct is None:
        return floor
    if pct >= HIGH_SHARE_PCT:
        return Severity.HIGH
    if pct >= MEDIUM_SHARE_PCT:
        return Severity.MEDIUM
    return floor


def share_pct(part_us: float | None, whole_us: float | None) -> float | None:
    if part_us is None or not whole_us:
        return None
    return 100.0 * part_us / whole_us


def layer_of_scope(scope: str | None) -> int | None:
    """``…/layers-CellList/3-LLamaDecodeLayer/…`` → 3 (``None`` outside a layer list)."""
    if not scope:
        return None
    for seg in scope.split("/"):
        m = _LAYER_SEG.match(seg)
        if m:
            return int(m.group(1))
    return None


def cell_path_in_layer(scope: str | None) -> tuple[str, ...]:
    """Attribute names of the cells between the decoder layer and the op.

    ``…/0-LLamaDecodeLayer/feed_forward-LlamaFeedForward/w1-Linear/Reshape-op3`` →
    ``("feed_forward", "w1")`` (what ``select_recompute`` patterns match).
    """
    if not scope:
        return ()
    segs = scope.split("/")
    start = None
    for i, seg in enumerate(segs):
        if _LAYER_SEG.match(seg):
            start = i + 1
    if start is None:
        # No decoder layer (a small net): the cells below the training wrappers.
        start = 0
        for i, seg in enumerate(segs):
            if seg in ("Default", "recompute_Default", "Gradients") or seg.startswith(("network-", "_backbone-", "_VirtualDatasetCell")):
                start = i + 1
    out = []
    for seg in segs[start:]:
        m = _CELL_SEG.match(seg)
        if m and not _OP_SEG.match(seg):
            out.append(m.group("attr"))
    return tuple(out)


def layer_prefix(scope: str | None) -> str | None:
    """The scope up to and including the decoder layer segment."""
    if not scope:
        return None
    segs = scope.split("/")
    for i, seg in enumerate(segs):
        if _LAYER_SEG.match(seg):
            return "/".join(segs[: i + 1])
    return None


def pattern_for(cell_path: Iterable[str], attr: str) -> str:
    """A ``select_recompute`` pattern: attribute names joined by the literal ``\\.``."""
    return "\\.".join([*cell_path, attr])


def user_source(node: "IRNode") -> tuple[str, int, str] | None:
    """The model-code line that created ``node``: the innermost ``# In file`` frame outside MindSpore itself."""
    best = None
    for src in node.sources or []:
        f = src.file or ""
        if "/site-packages/mindspore/" in f or "/mindspore/ops/" in f or "/mindspore/nn/" in f:
            continue
        if src.line is None:
            continue
        if src.line_end is not None and src.line_end != src.line and best is not None:
            continue  # a function-definition span; the statement inside is more precise
        best = (f, int(src.line), (src.code or "").strip())
    return best


def source_location(node: "IRNode", note: str | None = None) -> Location | None:
    src = user_source(node)
    if src is None:
        return None
    return Location(kind="source", path=src[0], line=src[1], note=note or src[2] or None)


def ir_location(path: str, node: "IRNode", note: str | None = None) -> Location:
    idx = "return" if node.index is None else node.index
    return Location(kind="ir", path=path, line=node.line, node=f"@{node.graph}:%{idx}", op=node.scope, note=note)


def tensor_bytes(shape: Iterable[int] | None, dtype: str | None) -> float | None:
    if shape is None:
        return None
    n = 1
    for d in shape:
        if d is None or d < 0:
            return None
        n *= d
    return float(n * DTYPE_BYTES.get(dtype or "", 2))


def plain(value: Any) -> Any:
    """ruamel scalars/containers → plain Python."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


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
