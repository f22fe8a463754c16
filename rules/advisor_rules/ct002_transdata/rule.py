"""CT002's rule class: its help page, options, and the check that joins the groups of every pipeline stage."""

from __future__ import annotations

import copy
from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import Finding, Measure, Need, Requirements, Rule, RuleContext, RuleOptions, Severity
from advisor_rules._common import (
    ASSUMED_HBM_GBPS,
    conversion_evidence,
    triage_finding,
    fill_stages_without_ir,
    one_f_one_b_step_saving,
    pipeline_micro_batches,
    stage_evidence,
)
from advisor_rules._common import CONVERSION_LAUNCH_US
from advisor_rules.ct002_transdata.estimate import group_cost
from advisor_rules.ct002_transdata.finding import finding
from advisor_rules.ct002_transdata.from_ir import from_ir
from advisor_rules.ct002_transdata.from_kernels import from_kernels
from advisor_rules.ct002_transdata.groups import Group
from advisor_rules.ct002_transdata.measure import transdata_measure


class TransDataExcess(Rule):
    """TransData format conversions that a consistent layout would avoid.

    What
        On Ascend, MatMul-like kernels want ``FRACTAL_NZ`` while many vector ops
        work on ``ND``; the backend inserts ``TransData`` where neighbours disagree.
        From the backend kernel graph (``graph_build_*``, ``hwopt_d_end_graph_*``)
        this rule finds (1) a TransData pair around a single op — ``NZ→ND``, the
        op, ``ND→NZ`` — i.e. one op that forces ``ND`` inside an ``NZ`` chain, in
        every layer, together with the TransData that feed that op's backward
        (nodes whose ``forward_unique_id`` is the op's); (2) TransData on a
        parameter (directly or through ``Load``): the weight is stored ND and
        re-laid-out for its MatMul on every use, forward and backward, every step,
        instead of once; (3) back-to-back TransData that cancel out. Without the IR,
        the sandwich is found in ``kernel_details.csv`` from the kernel order and the
        ``Input/Output Formats`` columns — each stream's own order (``Stream ID``):
        HCCL kernels and other streams' AI_CPU/DSA kernels start in between on a real
        device and never break a sandwich; an op that fell back to AI_CPU runs on its
        own stream and is the one kernel starting after the first TransData ends and
        ending before the second starts. Weights converted only in the first profiled
        step of several are their one-time conversion at first use: reported as such,
        with the time it took once, and no per-step saving is ranked. TransData that an unaligned MatMul needs
        (its producer or consumer is a MatMul with a dim not a multiple of 16) are
        AL001's and left out; everything else is judged whatever the shapes.

    Why
        A TransData reads and writes the whole tensor (with padding to 16): pure
        data movement, often several per layer in forward and backward. The seed
        guide: remove redundant Cast and TransData operators.

    Example
        ``trans_TransData_13`` (FRACTAL_NZ → ND) before and ``trans_TransData_14``
        (ND → FRACTAL_NZ) after ``attention.merger_head_transpose`` in all 32 layers:
        64 conversions, 1.9 ms per step. Or: 28 weights (``attention.wq`` …
        ``feed_forward.w2``) converted ND → FRACTAL_NZ before each forward and backward
        MatMul: 56 TransData per micro batch, 10 ms per step.

    Fix
        Model code (no config key controls this; no patch). ND-forcing op: replace it
        with an op that accepts the special format, or fuse it into its neighbour.
        Weights: keep each weight in the layout its MatMul consumes — convert it once
        (at checkpoint load / parameter creation) instead of per use; do not reshape,
        transpose or otherwise touch the parameter in ``construct`` before the MatMul
        (use the MatMul's ``transpose_b``), so the backend can store it in FRACTAL_NZ.
        The finding names the op or weights and the source line of their consumer.

    Kernel-only triage
        With a profile, no backend IR dump and no group found in the kernel order,
        the rule still says what TransData costs: when Cast and TransData kernels
        together take at least ``triage_min_share_pct`` of the step time (and
        TransData alone at least half of it; TransData in the cells of unaligned
        MatMuls are AL001's and left out), a low-severity finding gives the
        TransData share, ms per step, launches, the cells and layers they run in,
        the format pairs (``Input/Output Formats``) and which IR dump to take
        (``save_graphs`` level 1, ``graph_build_*.ir``). No saving is claimed.

    Time per step: the group's TransData kernels (``kernel_details``, joined to the IR
    nodes by full name) summed over the profiled steps ÷ steps — removing the
    conversions removes those kernels. With pipeline parallel one rank per stage is
    measured with its own stage's IR, and the per-stage savings become step time as
    1F1B does (the slowest stage runs every micro batch on the critical path, the others
    one). Without a profile: per TransData node one kernel per step at the launch floor
    ``launch_us`` (2.0 µs, as CT001's Casts: msprof-analyze's real sample) plus its bytes read
    + written at an assumed HBM bandwidth. While the
    device waits for data every step (MD001's measure) the step is the data pipeline's period
    and the saving shows nothing: it is reported as 0, with the figure once data keeps up in
    the message and ``saving_if_data_keeps_up``.
    """

    code = "CT002"
    name = "transdata-excess"
    summary = "TransData conversions forced by an inconsistent layout"
    severity = Severity.MEDIUM
    requires = Requirements(any_of=(Need.ir("backend"), Need.table("kernels", ("name", "type", "duration_us", "start_ns"))))
    tags = ("compute", "format", "transdata")
    fix_availability = "never"

    class Options(RuleOptions):
        min_share_pct: float = Field(0.5, ge=0, description="report groups costing at least this share of the step, %")
        hbm_gbps: float = Field(ASSUMED_HBM_GBPS, gt=0, description="bandwidth assumed without a profile, GB/s")
        launch_us: float = Field(CONVERSION_LAUNCH_US, ge=0, description="time of one TransData kernel beyond its "
                                 "bytes (launch floor) without a profile, µs")
        triage_min_share_pct: float = Field(5.0, ge=0, description="profile without IR and no group found: report when "
                                            "Cast + TransData take at least this share of the step time, %")

    def rank_evidence(self, rank: Any) -> dict[str, Any]:
        """Sandwiches and weight conversions found in the rank's kernel order (needs the op view's timeline),
        and its Cast/TransData time for the triage."""
        return {"groups": from_kernels(rank.op_view()), "conversions": conversion_evidence(rank)}

    def measure(self, ctx: RuleContext, finding: Finding) -> Measure | None:
        """The TransData kernel time of the finding's group on the run measured (0 once it is gone)."""
        return transdata_measure(self, ctx, finding)

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        units = stage_evidence(ctx)
        first = next((u.rank for u in units if u.rank is not None), None)
        step_us = ctx.step_time_us(first) if first is not None else None
        groups: dict[str, Group] = {}
        for unit in units:
            ir = ctx.ir_graph("backend", unit.dumps) if unit.dumps is not None else None
            if ir is not None:
                found = from_ir(ir)
            elif unit.rank is not None:
                found = copy.deepcopy((ctx.rank_evidence(unit.rank) or {}).get("groups") or {})
            else:
                continue
            for key, g in found.items():
                group_cost(g, unit, self.options.hbm_gbps, self.options.launch_us)
                main = groups.get(key)
                if main is None:
                    groups[key] = g
                    continue
                main.layers |= g.layers
                main.params += [p for p in g.params if p not in main.params]
                main.cost.update(g.cost)
                main.measured = main.measured or g.measured
                main.trans += g.trans
                main.kernel_names += [nm for nm in g.kernel_names if nm not in main.kernel_names]
        if not groups:
            has_ir = any(u.dumps is not None and ctx.ir_graph("backend", u.dumps) is not None for u in units)
            triage = (triage_finding(self, ctx, "TransData", self.options.triage_min_share_pct, key="conversions")
                      if ctx.has_profile and not has_ir else None)
            if triage is not None:
                yield triage
                return
            ctx.skip("no TransData sandwich, parameter TransData or cancelling pair found")
            return
        busy = {u.stage: u.busy_us or 0.0 for u in units}
        micro = pipeline_micro_batches(ctx, units)
        for g in groups.values():
            fill_stages_without_ir(ctx, g.cost, units)
            saving = one_f_one_b_step_saving(g.cost, busy, micro) if len(g.cost) > 1 else sum(g.cost.values())
            f = finding(self, ctx, g, saving, step_us, first, micro)
            if f is not None:
                yield f
