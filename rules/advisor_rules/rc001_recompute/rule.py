"""RC001's rule class: its help page, options, and the check that joins the IR's and the config's verdicts."""

from __future__ import annotations

from typing import Iterable

from pydantic import Field

from advisor_core.engine import Finding, Measure, Need, Requirements, Rule, RuleContext, RuleOptions, Severity
from advisor_rules._common import layer_of_scope
from advisor_rules.rc001_recompute.finding import finding
from advisor_rules.rc001_recompute.from_config import from_config, layer_structure
from advisor_rules.rc001_recompute.from_ir import from_ir
from advisor_rules.rc001_recompute.issues import Issue, ir_nodes_of, merge_issue
from advisor_rules.rc001_recompute.measure import recompute_measure


class RecomputeNotEffective(Rule):
    """Operators configured for recomputation that MindSpore does not recompute.

    What
        Compares what ``recompute_config`` asks for with what the compiled graph
        does. In the IR (``NN_validate_*.ir``) a configured op carries
        ``recompute: Bool(1)``; it is really recomputed only when a copy with
        ``duplicated: Bool(1)`` and the same ``(recompute_sub_graph, recompute_id)``
        exists among the backward nodes. For each configured-but-not-recomputed op
        the rule explains why: its output reaches the backward pass only through an
        op that is not recomputed (the ``Reshape`` between SiLU and Mul when
        fine-grained multi-copy is off — the seed's Llama2 case; tensor
        redistribution ops on the way are looked through); no backward op needs its
        output at all (recomputing it saves nothing); or the pattern names a cell
        whose only node is its output (a recomputed cell keeps its output — the IR
        shows nothing for it, so this cause comes from the config and MindFormers'
        Llama layer structure). Without an IR, the whole analysis runs on the layer
        structure and the config; with both, the causes are merged: the IR's verdict
        for every op it shows, completed by what only the layer structure shows —
        once a cell pattern is renamed to its primitive, that primitive can be
        blocked in turn (SiLU behind ``feed_forward.w1.reshape``), which the IR of
        the current config cannot show. An op the IR shows recomputed in every
        layer is no issue, whatever the config alone would say.

    Why
        Select recompute exists to trade a little forward time for activation
        memory. A pattern that is not effective costs nothing and saves nothing —
        the memory you budgeted for is not there, and a larger batch or fewer full
        recompute layers you planned on will not fit.

    Example
        ``select_recompute: ['feed_forward\\.mul', 'feed_forward\\.w1\\.activation']``
        with fine-grained multi-copy off: Mul has ``recompute: Bool(1)`` but no
        duplicated copy, because ``feed_forward.w2.reshape`` (Mul → w2) is not
        recomputed; ``activation`` is a one-op cell, and once SiLU is named,
        ``feed_forward.w1.reshape`` (SiLU → Mul) blocks it the same way.

    Fix
        Add the missing patterns (``'feed_forward\\.w1\\.reshape'``,
        ``'feed_forward\\.w2\\.reshape'``) and name the primitive instead of the cell
        (``'feed_forward\\.w1\\.activation\\.silu'`` for ``…\\.activation``), in the
        form the config already uses (list, per-stage list or dict). The patch is
        unsafe: a memory/time trade-off.

    Estimate
        The fixed configuration is resolved like the current one, and per layer
        the ops it newly duplicates and the tensors it stops keeping for the
        backward are found (``effective_recompute``). Memory: the tensors' sizes
        come from the IR output types of their producers (per device, after
        slicing), net of the inputs the copies must keep instead; per pipeline
        stage they are summed over the stage's layers and multiplied by the micro
        batches whose activations are alive at the peak (1F1B keeps
        ``min(pipeline_stage − stage, micro_batch_num)`` on stage ``s``; without
        pipeline, micro batches run forward-then-backward one at a time: 1). The
        saving is what the highest peak drops by (per-stage peaks from
        ``memory_record.csv`` when every stage was profiled, else the stage with
        the most saved). Time: the copies run the same forward kernels once more
        per micro batch before its backward; per stage that is their measured
        kernel time per step (``kernel_details.csv`` joined to the IR nodes by
        full name, else to the layer ops by scope; views such as Reshape have no
        kernel), ``d_s`` per micro batch. Without pipeline the step grows by all
        of it. With 1F1B a step is ``m − 1`` slots of the slowest stage plus one
        slot of every stage (a slot: one micro batch's forward + backward,
        ``T_s`` = (computing + communication not overlapped − bubble) per step / m
        from ``step_trace_time.csv``), so it grows by ``(m − 1)·(max(T_s + d_s) −
        max T_s) + Σ d_s`` — ``(m + pp − 1)·d`` when the stages are alike, which
        is assumed when not every stage was profiled. Without a profile the
        kernels are priced from their bytes over HBM bandwidth (matmuls from their
        FLOPs). With an IR but no config, the blocking ops' outputs are what is
        freed (× ``pp − stage`` of the profiled rank) and the chain's kernels what
        it costs. The added forward time fills the device's wait for data first:
        while the device waits W per step (MD001's measure) the step grows by
        ``max(0, cost − W)`` only; the full cost is in ``saving_if_data_keeps_up``.
    """

    code = "RC001"
    name = "recompute-not-effective"
    summary = "recompute configured but not applied"
    severity = Severity.MEDIUM
    requires = Requirements(any_of=(Need.ir("frontend"), Need.config("recompute.select_recompute")))
    tags = ("memory", "recompute")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        device_memory_gb: float = Field(64.0, gt=0, description="device HBM used to judge how much the lost saving matters, GB")

    def measure(self, ctx: RuleContext, finding: Finding) -> Measure | None:
        """The forward kernel time of the ops to recompute, recomputed copies included."""
        return recompute_measure(ctx, finding)

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        ir = ctx.ir_graph("frontend")
        ir_conf = ir is not None and any(
            n.is_recompute_configured or (n.scope or "").startswith("recompute_") for n in ir.iter_nodes()
        )
        has_select = cfg is not None and cfg.located("recompute.select_recompute").present
        if not ir_conf and not has_select:
            ctx.skip("no op is configured for recomputation (no recompute: Bool(1) in the IR, no select_recompute)")
            return
        structure = layer_structure(cfg)
        issues: dict[tuple, Issue] = {}
        effective: set[tuple] = set()  # (layer, cell path, attribute) the IR shows recomputed
        if ir_conf:
            issues, effective = from_ir(ir)
        if has_select:
            # The IR shows what the current patterns did; the config's layer structure also judges
            # the patterns the fix brings in (a cell pattern renamed to a primitive that is blocked
            # in turn). An op the IR shows effective in every layer is not an issue; an issue both
            # show is merged, so the patch carries every pattern either one found missing.
            shown = {lay for lay in (layer_of_scope(n.scope) for n in ir.iter_nodes()) if lay is not None} if ir_conf else set()
            for key, issue in from_config(cfg, structure).items():
                if key in issues:
                    merge_issue(issues[key], issue)
                    continue
                seen = issue.layers & shown
                done = bool(seen) and all(
                    any(e[0] == lay and e[1] == issue.op_path for e in effective) if issue.replace_pattern
                    else (lay, issue.op_path[:-1], issue.op_path[-1]) in effective for lay in seen)
                if not done:
                    issues[key] = issue
                    issue.nodes = ir_nodes_of(ir, issue) if ir is not None else []
        if not issues:
            ctx.skip(f"every configured op is recomputed ({'IR' if ir_conf else 'config'})")
            return
        yield finding(self, ctx, list(issues.values()), ir if ir_conf else None, structure, ir)
