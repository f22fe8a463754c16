"""What ``advisor compare`` measures for a finding: the kernel time of a selection of ops, as step time.

A rule's ``measure`` (called once on the run before a fix and once on the run after it,
with the finding of the run before) names the ops its finding is about by something that
survives the fix — the cells the finding points at, with the decoder-layer index folded,
and the op primitives — never by op instance. :func:`stage_measure` sums the selected
ops' kernel time per step on one rank per pipeline stage and turns the per-stage sums
into step time as the estimates do (:func:`~advisor_rules._common.pipeline.one_f_one_b_step_saving`),
so that before − after is comparable with the finding's estimated saving.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Iterable

from advisor_core.opview.names import LAYER_ITEM, fold_layer_index, forward_cell
from advisor_rules._common.pipeline import (
    micro_batches_per_step,
    one_f_one_b_step_saving,
    stage_busy_and_micro,
    stage_representatives,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

def fold_layer(scope: str) -> str:
    """A cell or op scope with its decoder-layer index folded and a recompute copy's prefix dropped:
    ``…/layers-CellList/3-LLamaDecodeLayer/…`` → ``…/layers-CellList/N-LLamaDecodeLayer/…``."""
    return fold_layer_index(scope.removeprefix("recompute_"))


def finding_ops(finding: Any, note: str | None = None) -> list[str]:
    """The op full names (IR node or kernel scope) the finding's locations point at (with ``note``, only those)."""
    return [str(loc.op) for loc in finding.locations if loc.op and (note is None or (loc.note or "") == note)]


def folded_cells(names: Iterable[str]) -> set[str]:
    """The forward cells of op full names, layer folded (forward and backward kernels of a cell share it)."""
    return {fold_layer(forward_cell(n)) for n in names if n}


def primitive_of(name: str) -> str:
    """``…/Cast-op3`` (or a kernel name below it) → ``Cast``."""
    m = re.search(r"/([A-Za-z]\w*)-op\d+(?:/|$)", name)
    return m.group(1) if m else ""


def in_cells(ops: pd.DataFrame, cells: set[str]) -> pd.Series:
    """Mask of the op view's ops whose forward cell (layer folded) is one of ``cells``."""
    folded = ops["forward_cell"].fillna("").astype(str).str.replace("^recompute_", "", regex=True)
    return folded.str.replace(LAYER_ITEM, r"/N-\1", regex=True).isin(cells)


def stage_measure(ctx: Any, per_stage: Callable[[int, Any, Any], float | None]) -> float | None:
    """Step time of what ``per_stage(stage, rank, op_view)`` returns (kernel µs per step on that stage).

    ``None`` when no stage's representative rank has an op view (nothing measured).
    """
    if ctx.run is None:
        return None
    cfg = ctx.config
    pp = cfg.pipeline_stages if cfg is not None else 1
    reps = stage_representatives(ctx.run, pp, cfg.device_count if cfg is not None else None)
    measured: dict[int, tuple[Any, float]] = {}
    for stage, rank in reps:
        view = rank.op_view()
        if view is None or view.ops.empty:
            continue
        value = per_stage(stage, rank, view)
        if value is not None:
            measured[stage] = (rank, float(value))
    return stages_step_time(ctx, measured)


def stages_step_time(ctx: Any, measured: dict[int, tuple[Any, float]]) -> float | None:
    """Step time of ``measured``: stage → (its representative rank, kernel µs per step there), combined as the
    estimates are (1F1B over the stages' busy times and the micro batches); ``None`` when nothing was measured."""
    if not measured:
        return None
    busy: dict[int, float] = {}
    counted: list[int | None] = []
    for stage, (rank, _) in measured.items():
        b, m = stage_busy_and_micro(rank)
        busy[stage] = b or 0.0
        counted.append(m)
    times = {stage: value for stage, (_, value) in measured.items()}
    return one_f_one_b_step_saving(times, busy, micro_batches_per_step(ctx.config, counted))


def selected_time(view: Any, mask: pd.Series) -> float:
    """Kernel µs per step of the op view's ops in ``mask``."""
    return float(view.ops.loc[mask, "per_step_us"].sum())
