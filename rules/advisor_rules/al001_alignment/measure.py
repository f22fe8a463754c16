"""AL001's measure for ``advisor compare``: the kernel time of the MatMuls the finding's config key shapes.

On the run measured, the MatMul dims are read and traced to config keys as ``check``
does (with that run's config, so after a fix the padded dim is found under the same
key); the MatMuls with a K or N dim from the finding's key, and the activation TransData
of their cells (the conversions an unaligned dim brings; weight-format TransData are not
counted, as in the estimate), are summed per step on one rank per pipeline stage and
combined as the estimate is (1F1B). Without a config on a run, the dims equal to the
finding's dim are taken.
"""

from __future__ import annotations

from typing import Any

from advisor_core.engine import Finding, Measure, RuleContext
from advisor_rules._common import stage_measure
from advisor_rules.al001_alignment.dims import Dim, dims_from_kernels, map_config_keys
from advisor_rules.al001_alignment.finding import short_key
from advisor_rules.al001_alignment.saving import param_transdata_scopes, weight_transdata
from advisor_rules.al001_alignment.shapes import TRANSDATA_OPS, rank_matmuls


def _key(finding: Finding) -> str | None:
    """The config key (short form, ``hidden_size``) the finding is about, from its title."""
    head, sep, _ = finding.title.partition(" gives unaligned MatMul dim ")
    return head if sep else None


def matmul_measure(ctx: RuleContext, finding: Finding) -> Measure | None:
    """µs per step of the MatMuls (and their cells' activation TransData) shaped by the finding's key on ``ctx``'s run."""
    key = _key(finding)
    dim = next((int(e.value) for e in finding.evidence if e.name == "dim" and str(e.value).isdigit()), None)
    cfg = ctx.config

    def values(view: Any, rank: Any) -> set[int]:
        dims: dict[tuple[int, str], Dim] = {}
        dims_from_kernels(view, rank, dims)
        if key is None or cfg is None:
            return {dim} if dim is not None else set()
        map_config_keys(cfg, cfg.model_parallel, dims)
        return {d.value for d in dims.values() if d.config_key and short_key(d.config_key) == key
                and (d.role != "M" or key == "seq_length")}

    def per_stage(_stage: int, rank: Any, view: Any) -> float | None:
        if not view.has_columns("input_shapes", "output_shapes"):
            return None
        wanted = values(view, rank)
        mms = rank_matmuls(rank, view)
        hit = [r for r, _b, m, kk, n, _a in mms if kk in wanted or n in wanted or (key == "seq_length" and m in wanted)]
        ids = {int(r.Index) for r in hit}
        cells = {str(r.cell) for r in hit if not r.backward}
        ops = view.ops
        weight_td = weight_transdata(ops, mms, param_transdata_scopes(ctx, rank.rank_id))
        td = ops[ops["type"].isin(TRANSDATA_OPS) & ops["cell"].astype(str).isin(cells)]
        ids |= {int(i) for i in td.index if int(i) not in weight_td}
        return float(ops.loc[sorted(ids), "per_step_us"].sum()) if ids else 0.0

    value = stage_measure(ctx, per_stage)
    what = f"MatMuls with a dim from {key}" if key else f"MatMuls with dim {dim}"
    return None if value is None else Measure(f"{what} (and their TransData), per step", value)
