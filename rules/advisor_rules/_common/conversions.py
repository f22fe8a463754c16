"""Conversion triage from kernels alone: how much device time Cast and TransData take, and where.

Without an IR dump a profile cannot tell a redundant Cast from a needed one, but it does
say how much the conversions cost — the seed guide's own trigger ("too many conversion
operators and the conversion takes a long time"). This module measures it from a rank's
op view: share of the step's device time (the mean step time), µs per step, launches per step, the cells and
layers they run in (layer indices folded, so ``layers.N.attention.wq`` is one place) and
the dtype or format pairs they convert.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor_core.opview.names import fold_layer_index

if TYPE_CHECKING:  # pragma: no cover - heavy imports are made where used
    import pandas as pd


# What one conversion kernel (Cast, TransData) costs beyond its bytes, µs per launch: the launch floor.
# Measured on msprof-analyze's real kernel sample (test/ut/advisor/advisor_backend/compute_advice/
# kernel_details.csv, a 910-class device): its 47 AI_VECTOR_CORE Cast kernels moving under 1 MB take
# 1.54–3.22 µs whatever their size (median 1.88, mean 2.07 µs), while the 21 moving 28–472 MB take the
# floor plus their bytes at a median 1290 GB/s — so a conversion lasts launch + bytes / bandwidth, and a
# sum over many small ones is their count × the mean. 2.0 µs is also the simulator's
# ``kernel_launch_overhead_us`` (every simulated kernel pays it), so the rules and the reference agree.
CONVERSION_LAUNCH_US = 2.0

CAST_TYPES = ("Cast",)
TRANSDATA_TYPES = ("TransData", "TransDataRNN")


@dataclass
class ConversionTime:
    """One kind of conversion kernel on one rank (small and picklable: a rule's rank evidence)."""

    rank_id: int
    kind: str  # Cast | TransData
    us_per_step: float
    launches_per_step: float
    device_us_per_step: float  # the step's device time: mean step time, else compute kernel time per step
    both_us_per_step: float  # Cast + TransData per step
    places: list[tuple[str, float, list[int]]] = field(default_factory=list)  # (cell, µs/step, layers), largest first
    pairs: list[tuple[str, float]] = field(default_factory=list)  # ("Float32→Float16", µs/step), largest first
    example: str | None = None  # the longest op's kernel name

    @property
    def share_pct(self) -> float:
        return 100.0 * self.us_per_step / self.device_us_per_step if self.device_us_per_step else 0.0

    @property
    def both_share_pct(self) -> float:
        return 100.0 * self.both_us_per_step / self.device_us_per_step if self.device_us_per_step else 0.0


def conversion_estimate_us(nbytes: float, launches: int, hbm_gbps: float, launch_us: float) -> float:
    """µs of ``launches`` conversion kernels moving ``nbytes`` together, without a profile: each pays the launch
    floor, and the bytes stream at ``hbm_gbps`` (:data:`CONVERSION_LAUNCH_US` says where the model comes from)."""
    return launches * launch_us + nbytes / (hbm_gbps * 1e3)  # bytes / (GB/s) → µs


def unaligned_matmul_cells(ops: pd.DataFrame) -> set[str]:
    """Forward cells of MatMul ops with a dim (of an operand's last two) not a multiple of 16.

    The TransData launched in those cells pad for the MatMul: an alignment cost (AL001's),
    not a layout problem.
    """
    mm = ops["type"].astype(str).str.contains("MatMul").to_numpy(bool)
    # distinct ops, and of those only the two columns read (a namedtuple per op of the whole view costs more)
    return {cell for shapes, cell in zip(ops["in_shapes"].to_numpy()[mm], ops["forward_cell"].to_numpy()[mm])
            if _has_unaligned_dim(shapes)}


def _has_unaligned_dim(shapes: tuple[tuple[int, ...], ...]) -> bool:
    return any(d > 0 and d % 16 for shape in shapes for d in shape[-2:])


# the view's columns a conversion's figures read (taking only these keeps the row selections cheap)
_CONVERSION_COLUMNS = ("name", "type", "forward_cell", "layer", "count", "total_us", "per_step_us",
                       "in_dtypes", "out_dtypes", "in_formats", "out_formats")


def conversion_time(rank: Any, kind: str) -> ConversionTime | None:
    """Cast (``kind="Cast"``) or TransData time of ``rank`` from its op view (``None`` without kernels).

    TransData in the cells of unaligned MatMuls are left out (AL001 explains them).
    """
    return conversion_evidence(rank)[kind]


def _conversion_time(rank: Any, view: Any, ops: pd.DataFrame, kind: str) -> ConversionTime:
    """:func:`conversion_time` on ``ops``, the view's compute ops without the padding TransData."""
    import pandas as pd

    types = CAST_TYPES if kind == "Cast" else TRANSDATA_TYPES
    mine = ops[ops["type"].isin(types)]
    both = ops[ops["type"].isin(CAST_TYPES + TRANSDATA_TYPES)]
    steps = view.steps
    from advisor_core.analyses.step_time import mean_step_time_us

    device = mean_step_time_us(rank) or float(ops["total_us"].sum()) / steps
    out = ConversionTime(rank.rank_id, kind, float(mine["total_us"].sum()) / steps, float(mine["count"].sum()) / steps,
                         device, float(both["total_us"].sum()) / steps)
    if mine.empty:
        return out
    per_step = mine["per_step_us"].tolist()
    # distinct ops; the layer-folded place is worked out once per distinct cell
    where_of: dict[str, str] = {}
    cells: dict[str, tuple[float, set[int]]] = {}
    for cell, name, layer, t_op in zip(mine["forward_cell"].tolist(), mine["name"].tolist(),
                                        mine["layer"].tolist(), per_step):
        text = cell or name
        where = where_of.get(text)
        if where is None:
            where = where_of[text] = fold_layer_index(text)
        t, layers = cells.get(where, (0.0, set()))
        cells[where] = (t + t_op, layers | ({int(layer)} if pd.notna(layer) else set()))
    out.places = sorted(((c, t, sorted(ls)) for c, (t, ls) in cells.items()), key=lambda x: -x[1])
    pairs: dict[str, float] = {}
    ins, outs = ("in_dtypes", "out_dtypes") if kind == "Cast" else ("in_formats", "out_formats")
    for a, b, t_op in zip(mine[ins].tolist(), mine[outs].tolist(), per_step):
        key = f"{a[0] if a else '?'}→{b[0] if b else '?'}"
        pairs[key] = pairs.get(key, 0.0) + t_op
    out.pairs = sorted(pairs.items(), key=lambda kv: -kv[1])
    out.example = str(mine.sort_values("total_us", ascending=False)["name"].iloc[0])
    return out


def short_place(cell: str) -> str:
    """``Default/…/layers-CellList/N-LLamaDecodeLayer/attention-LLamaAttention/wq-Linear`` → ``layers.N.attention.wq``."""
    segs = [s for s in cell.split("/") if s and s not in ("Default", "Gradients")]
    attrs = []
    for s in segs:
        if s.startswith(("network-", "_backbone-", "_VirtualDatasetCell")):
            continue
        attr = s.split("-", 1)[0]
        attrs.append(attr)
    return ".".join(attrs[-4:]) or cell


IR_ADVICE = {
    "Cast": ("dump the IR of the same run (MS_DEV_SAVE_GRAPHS=1, or save_graphs: 1 in the MindFormers context; "
             "MS_DEV_DUMP_IR_PASSES=validate,graph_build keeps only the two files needed) and analyse the profile with "
             "it: the final front-end graph (NN_validate_*.ir) says which Casts the model code or AMP wrote and the "
             "backend kernel graph (graph_build_*.ir) which the backend added, so CT001 can tell redundant ones"),
    "TransData": ("dump the backend kernel graph of the same run (MS_DEV_SAVE_GRAPHS=1, or save_graphs: 1 in the "
                  "MindFormers context; MS_DEV_DUMP_IR_PASSES=graph_build keeps just graph_build_*.ir) and analyse the "
                  "profile with it: TransData nodes and the device formats of their neighbours exist only there, so "
                  "CT002 can tell an ND-forcing op or a weight converted every step"),
}


def conversion_evidence(rank: Any) -> dict[str, ConversionTime | None]:
    """Cast and TransData time of one rank: what a rule's ``rank_evidence`` returns for the triage.

    Computed once per rank (CT001 and CT002 both ask for it); treat it as read-only.
    """
    return rank.cached("conversion_evidence", lambda: _conversion_evidence(rank))


def _conversion_evidence(rank: Any) -> dict[str, ConversionTime | None]:
    view = rank.op_view()
    if view is None or view.ops.empty:
        return {"Cast": None, "TransData": None}
    all_ops = view.ops
    padding = unaligned_matmul_cells(all_ops)
    keep = ~all_ops["is_comm"].to_numpy(bool) & ~(all_ops["type"].isin(TRANSDATA_TYPES)
                                                  & all_ops["forward_cell"].isin(padding)).to_numpy(bool)
    ops = all_ops.loc[keep, [c for c in _CONVERSION_COLUMNS if c in all_ops.columns]]
    return {kind: _conversion_time(rank, view, ops, kind) for kind in ("Cast", "TransData")}


def triage_finding(rule: Any, ctx: Any, kind: str, min_share_pct: float, key: str | None = None) -> Any:
    """A low-severity finding when conversions take at least ``min_share_pct`` of the step (``None`` otherwise).

    The rank where Cast + TransData weigh most stands for the run; the finding reports this
    rule's kind (Cast or TransData) when it alone is at least half the threshold, and says
    which IR dump would name the redundant ones. No saving is claimed: which conversions
    can go is exactly what the kernels cannot tell. Each rank's figures come from the
    rule's rank evidence (:func:`conversion_evidence`, under ``key`` when the evidence is
    a mapping holding more), measured where the rank was read.
    """
    from advisor_core.engine import Evidence, Finding, Location, Severity

    if ctx.run is None:
        return None
    measured = []
    for r in ctx.run:
        ev = ctx.rank_evidence(r) or {}
        ev = ev.get(key, {}) if key else ev
        c = (ev or {}).get(kind)
        if c is not None and c.device_us_per_step > 0:
            measured.append(c)
    if not measured:
        return None
    worst = max(measured, key=lambda c: (c.both_share_pct, c.us_per_step))
    rank = ctx.run.rank(worst.rank_id)
    if worst.both_share_pct < min_share_pct:
        ctx.skip(f"Cast and TransData kernels take {worst.both_share_pct:.1f}% of the step on rank {worst.rank_id} "
                 f"(< {min_share_pct}%)")
        return None
    if worst.share_pct < min_share_pct / 2:
        ctx.skip(f"conversions take {worst.both_share_pct:.1f}% of the step on rank {worst.rank_id}, but {kind} "
                 f"kernels only {worst.share_pct:.1f}% (< {min_share_pct / 2}%)")
        return None
    places = "; ".join(f"{short_place(c)} {t / 1000:.2f} ms" + (f" ({len(ls)} layers)" if len(ls) > 1 else "")
                       for c, t, ls in worst.places[:3])
    pairs = ", ".join(f"{p} {t / 1000:.2f} ms" for p, t in worst.pairs[:3])
    what = "dtype" if kind == "Cast" else "format"
    msg = [
        f"On rank {worst.rank_id}, {kind} kernels run {worst.us_per_step / 1000:.2f} ms per step "
        f"({worst.launches_per_step:.0f} launches), {worst.share_pct:.1f}% of the {worst.device_us_per_step / 1000:.2f} ms "
        f"step; Cast and TransData together {worst.both_share_pct:.1f}%.",
        f"Most time in: {places}." if places else "",
        f"By {what}: {pairs}." if pairs else "",
        "The kernels alone cannot tell which conversions are redundant (a lossy round trip, a cast the backend undoes, "
        "an op forcing ND) and which the model needs; to find out, " + IR_ADVICE[kind] + ".",
    ]
    src = rank.table_source("kernels")
    return Finding(
        code=rule.code,
        rule=rule.name,
        title=(f"{kind} kernels take {worst.share_pct:.1f}% of the step ({worst.us_per_step / 1000:.2f} ms); "
               "an IR dump would tell which are redundant"),
        message=" ".join(m for m in msg if m),
        severity=Severity.LOW,
        saving_us=None,
        step_time_us=ctx.step_time_us(rank),
        confidence=0.3,
        evidence=[
            Evidence(name=f"{kind.lower()}_time_per_step", value=round(worst.us_per_step, 3), unit="µs",
                     source="kernel_details.csv"),
            Evidence(name=f"{kind.lower()}_share", value=round(worst.share_pct, 3), unit="%"),
            Evidence(name="conversion_share", value=round(worst.both_share_pct, 3), unit="%", threshold=min_share_pct),
            Evidence(name=f"{kind.lower()}_launches_per_step", value=round(worst.launches_per_step, 1)),
        ],
        locations=[Location(kind="profile", path=str(src[0]) if src else None, table="kernels", op=worst.example,
                            rank=worst.rank_id, note=f"the longest {kind} kernel")],
        rank=worst.rank_id,
        tags=list(rule.tags),
    )
