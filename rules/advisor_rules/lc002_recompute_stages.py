"""LC002: recompute forms that do not fit the pipeline stage count."""

from __future__ import annotations

from typing import Iterable

from advisor_core.config.model_structure import llama_layer
from advisor_core.config.recompute import resolve_recompute
from advisor_core.engine import Evidence, Finding, Need, Requirements, Rule, RuleContext, Severity


class RecomputeStageForm(Rule):
    """Per-stage recompute lists that do not fit ``pipeline_stage`` (or a value that is no valid form).

    What
        ``recompute``, ``select_recompute`` and ``select_comm_recompute`` accept a
        bool, a pattern list, a dict, or **per pipeline stage** layer counts
        (``[6, 3, 2, 3]``; 2-D ``[[…], […]]`` per interleave chunk). This check
        resolves them as MindFormers' ``LayerSetting`` does and reports lists with
        more or fewer entries than ``parallel_config.pipeline_stage``, entries that
        are not layer counts, counts larger than the stage's layer count (capped),
        and values of no valid form.

    Why
        MindFormers rejects a per-stage list longer than the stage count at start-up
        (after the job has waited for its devices); a shorter list leaves the last
        stages without recompute — often the out-of-memory stage 0 is fine and the
        mistake only shows after re-partitioning.

    Example
        ``pipeline_stage: 4`` with ``recompute: [6, 3, 2, 3, 1]``.

    Fix
        One entry per stage; counts no larger than the stage's layers.
    """

    code = "LC002"
    name = "recompute-stage-form"
    summary = "per-stage recompute lists that do not match pipeline_stage"
    severity = Severity.HIGH
    requires = Requirements(any_of=(Need.config("recompute.recompute"), Need.config("recompute.select_recompute"),
                                    Need.config("recompute.select_comm_recompute")))
    tags = ("lint", "recompute", "config")
    fix_availability = "never"

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        assert cfg is not None
        plan = resolve_recompute(cfg, llama_layer())
        stages = [len(s) for s in plan.stage_layers]
        found = False
        for issue in plan.issues:
            if issue.code not in ("stage-list-length", "bad-stage-count", "count-capped", "bad-form"):
                continue
            found = True
            loc = ctx.config_location(issue.pointer)
            yield Finding(
                code=self.code,
                rule=self.name,
                title=f"{issue.pointer.split('/recompute_config/')[-1]} {issue.message.split(';')[0]}",
                message=f"{issue.pointer}: {issue.message}. Layers per stage: {stages}.",
                severity=Severity.HIGH if issue.severity == "error" else Severity.LOW,
                confidence=0.95,
                evidence=[Evidence(name="pipeline_stage", value=cfg.pipeline_stages), Evidence(name="layers_per_stage", value=stages)],
                locations=[loc] if loc else [],
                tags=list(self.tags),
            )
        if not found:
            ctx.skip(f"recompute forms fit {cfg.pipeline_stages} pipeline stage(s) ({stages} layers)")
