"""AL001's rule class: its help page, options, and the check that groups unaligned dims by config key."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import Finding, Measure, Need, Requirements, Rule, RuleContext, RuleOptions, Severity
from advisor_rules._common import stage_representatives
from advisor_rules.al001_alignment.dims import (
    Dim,
    dim_key,
    dims_from_config,
    dims_from_ir,
    dims_from_kernels,
    map_config_keys,
)
from advisor_rules.al001_alignment.finding import finding
from advisor_rules.al001_alignment.fix import new_value
from advisor_rules.al001_alignment.saving import param_transdata_scopes, stage_saving
from advisor_rules.al001_alignment.measure import matmul_measure


class Alignment16(Rule):
    """MatMul-like dimensions that are not multiples of 16 (32 for int8).

    What
        Reads the K and N dimensions of every MatMul-like op — forward ``x·Wᵀ`` and the
        backward ``dX``/``dW`` products — per rank, with the roles of the layer's weight:
        K and N are the weight's dims in every product of its cell, M the tokens, so the
        weight gradient ``dW = dYᵀ·X``, which contracts over the tokens and puts N first,
        neither flags the token count as K nor leaves the vocab dim unpriced as M (the
        weight is the forward MatMul's Parameter operand in the IR, its second operand in
        ``kernel_details``; backward IR nodes name their forward node by
        ``forward_unique_id``, backward kernels share its cell); transposes are inferred
        from the shapes. Dims are per rank, after tensor-parallel slicing: from ``kernel_details.csv`` ``Input/Output
        Shapes`` of one rank per pipeline stage (the head and its vocab dim live on the
        last stage only), from the IR type lines, or, with the config alone, from the
        model dimensions divided by ``model_parallel``. Dynamic dims and the
        batch×sequence M dimension are not flagged. Each unaligned dim is traced back to
        the config key that sets it (``hidden_size``, ``intermediate_size``,
        ``vocab_size``, ``seq_length``, heads × head_dim): one finding per key.

    Why
        The cube unit computes on 16×16 fractals: an unaligned K or N is padded, runs a
        slower non-fractal path, and its operands need ND↔FRACTAL_NZ ``TransData``
        conversions (seed guide: "it is recommended that the calculation on the AI core
        be 16-alignment").

    Example
        ``hidden_size: 4100`` → the q/k/v/o projections have K or N = 4100: those
        MatMuls reach ~80 % of the throughput of the aligned ones in the same profile,
        and each Linear gets TransData on its activation, output, dY, dX and dW.

    Fix
        Pad the config dim up to the next multiple of 16 × ``model_parallel`` (where the
        dim is sliced), so every device's slice is a multiple of 16: a trained
        checkpoint converts by zero-padding, no trained weight is dropped, and the cube
        already pays for the padded size. ``hidden_size`` keeps ``num_heads × head_dim``
        consistent: with an explicit ``head_dim`` the attention width does not change;
        with ``head_dim`` tied to ``hidden_size`` both are rounded; without ``head_dim``
        the nearest multiple of ``num_heads`` × 16 is used. The patch changes the model
        (unsafe: retrain or convert checkpoints).

    Time at stake (with a profile), per key X, per stage, per step:
        * a MatMul whose only unaligned dim(s) come from X: measured time minus its
          padded FLOPs after the fix at the throughput the aligned MatMuls of the same
          profile achieve (≈ time × (1 − 1/penalty); the penalty is measured, 1.25
          assumed without aligned MatMuls). A MatMul also unaligned on another key Y
          keeps its penalty: fixing X alone saves nothing there (only the padded-FLOP
          change), and the message says which keys must be fixed together;
        * the TransData kernels of a Linear cell whose forward MatMul has X as its only
          unaligned key disappear (weight-format conversions — a TransData on a
          ``Load`` of a parameter in ``graph_build``, or weight-shaped outside the
          gradient scope without IR — are not alignment costs and stay);
        * other kernels reading the dim grow by new/old (bytes scale with the dim).
        Stages combine as 1F1B does (``_common.one_f_one_b_step_saving``): with m micro
        batches and per-micro-batch stage times tₛ the step is ≈ Σtₛ + (m−1)·max tₛ.
        While the data pipeline bounds the step (the device waits for data every step:
        MD001's measure), a shorter device time only lengthens that wait: the saving is
        then 0, the figure it becomes once data keeps up is in the message and evidence
        (``saving_if_data_keeps_up``; ``_common.data_bound_effect``).

    Memory: padding adds parameters. For each weight (IR parameter shapes per rank, else
    the Llama structure from the config) whose shape has the dim, the added elements ×
    (weight + optimizer-state bytes, divided by ``data_parallel`` with
    ``enable_parallel_optimizer``, + a gradient-accumulation buffer when micro batches
    accumulate); the largest stage is reported. Activations grow too (not counted).
    """

    code = "AL001"
    name = "alignment-16"
    summary = "MatMul dimensions not multiples of 16"
    severity = Severity.MEDIUM
    requires = Requirements(
        any_of=(
            Need.table("kernels", ("type", "input_shapes", "output_shapes")),
            Need.ir("frontend"),
            Need.ir("parallel"),
            Need.config("model.hidden_size"),
        )
    )
    tags = ("compute", "shapes", "alignment")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        min_dim: int = Field(64, ge=1, description="ignore dims smaller than this (small heads, tiny layers)")
        unaligned_penalty: float = Field(1.25, ge=1.0,
                                         description="MatMul slowdown assumed when the profile has no aligned MatMul to compare")

    def measure(self, ctx: RuleContext, finding: Finding) -> Measure | None:
        """The kernel time of the MatMuls the finding's config key shapes, and their cells' TransData."""
        return matmul_measure(ctx, finding)

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        mp = cfg.model_parallel if cfg is not None else 1
        dims: dict[tuple[int, str], Dim] = {}
        reps = []
        if ctx.run is not None:
            pp = cfg.pipeline_stages if cfg is not None else 1
            reps = [(s, r) for s, r in stage_representatives(ctx.run, pp, cfg.device_count if cfg is not None else None)
                    if r.usable("kernels", ("type", "input_shapes", "output_shapes")) and r.op_view() is not None]
        source = "config"
        views: dict[int, Any] = {}
        if reps:
            for s, r in reps:
                views[s] = r.op_view()
                dims_from_kernels(views[s], r, dims)
            source = "kernel_details.csv"
        elif ctx.ir_graph("parallel") is not None or ctx.ir_graph("frontend") is not None:
            irs = ctx.ir_ranks()
            for rd in {id(x): x for x in (irs[:1] + irs[-1:])}.values():  # first and last stage
                ir = ctx.ir_graph("parallel", rd) or ctx.ir_graph("frontend", rd)
                if ir is not None:
                    dims_from_ir(ir, dims)
            source = "IR"
        elif cfg is not None:
            dims_from_config(cfg, dims)
        if cfg is not None:
            map_config_keys(cfg, mp, dims)
        if not dims:
            ctx.skip(f"no MatMul shape could be read from the {source} (a compact IR dump, MS_DEV_DUMP_IR_FORMAT=0, has "
                     "no type lines; kernel_details without Input Shapes): nothing was checked")
            return
        flagged = [d for d in dims.values() if d.value % d.align and d.value >= self.options.min_dim and d.role != "M"]
        flagged += [d for d in dims.values() if d.role == "M" and d.value % d.align and d.config_key]
        if not flagged:
            ctx.skip(f"every MatMul K/N dim is a multiple of 16 ({source}; {len(dims)} dims checked)")
            return
        by_key: dict[str, list[Dim]] = {}
        for d in flagged:
            by_key.setdefault(dim_key(d), []).append(d)
        new_values = {key: new_value(cfg, group[0]) for key, group in by_key.items()}
        # per-rank old value → (key, new per-rank value), for every flagged key the fix changes
        value_map: dict[int, tuple[str, int]] = {}
        for key, group in by_key.items():
            fix = new_values[key]
            if fix is None:
                continue
            for d in group:
                value_map[d.value] = (key, fix.dim // d.divisor)
            full = group[0].value * group[0].divisor
            if full % 16 and full not in value_map:
                value_map[full] = (key, fix.dim)  # the unsliced dim (e.g. a data-parallel embedding)
        stages = [stage_saving(s, r, views[s], value_map, param_transdata_scopes(ctx, r.rank_id),
                               self.options.unaligned_penalty) for s, r in reps]
        findings = [finding(self, ctx, key, group, new_values[key], stages, value_map, source) for key, group in by_key.items()]
        yield from sorted(findings, key=lambda f: -(f.saving_us or 0.0))
