"""LC005: fewer micro batches than pipeline stages."""

from __future__ import annotations

from typing import Iterable

from pydantic import Field

from advisor_core.engine import Evidence, Finding, Need, Requirements, Rule, RuleContext, RuleOptions, Severity


class MicroBatchNum(Rule):
    """``micro_batch_num`` smaller than ``pipeline_stage``.

    What
        With pipeline parallelism (``pipeline_stage`` > 1) each step is split into
        ``micro_batch_num`` micro batches; the 1F1B schedule needs at least one
        micro batch per stage to fill the pipeline.

    Why
        MindSpore rejects ``micro_batch_num < pipeline_stage``; and just at the
        limit, the bubble is (pp − 1)/(m + pp − 1) of the step: with pp = 4, m = 4,
        43 % of the time stages sit idle. MindFormers' own large-model configs use
        m ≥ 4 × pp (Llama2-70B: pp 8, m 128).

    Example
        ``pipeline_stage: 4`` with ``micro_batch_num: 2``.

    Fix
        Raise ``micro_batch_num`` (the patch sets it to 4 × ``pipeline_stage``, or, for
        a large bubble, the smallest value that brings it to about 10 %; it changes
        the global batch unless ``batch_size`` is lowered — unsafe).

    Also reported (medium): ``micro_batch_num`` ≥ ``pipeline_stage`` but a 1F1B bubble
    above ``max_bubble_pct`` (default 25 %) of the step.
    """

    code = "LC005"
    name = "micro-batch-num"
    summary = "micro_batch_num smaller than pipeline_stage"
    severity = Severity.HIGH
    requires = Requirements(any_of=(Need.config("parallel_config.pipeline_stage"),))
    tags = ("lint", "parallel", "pipeline", "config")
    fix_availability = "always"

    class Options(RuleOptions):
        max_bubble_pct: float = Field(25.0, ge=0, le=100, description="report a 1F1B bubble above this share of the step, %")

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        assert cfg is not None
        pp, m = cfg.pipeline_stages, cfg.micro_batch_num
        if pp <= 1:
            ctx.skip("no pipeline parallelism")
            return
        bubble = 100.0 * (pp - 1) / (m + pp - 1)
        if m >= pp:
            if bubble > self.options.max_bubble_pct:
                yield self._bubble(ctx, pp, m, bubble)
            else:
                ctx.skip(f"micro_batch_num {m} ≥ pipeline_stage {pp}; 1F1B bubble {bubble:.0f}% of the step")
            return
        target = 4 * pp
        patch = ctx.config_patch(f"set micro_batch_num to {target}", [("parallel_config.micro_batch_num", target)],
                                 description="fills the pipeline; lower batch_size to keep the global batch")
        loc = ctx.config_location("parallel_config.micro_batch_num")
        yield Finding(
            code=self.code,
            rule=self.name,
            title=f"micro_batch_num {m} < pipeline_stage {pp}",
            message=(f"With {pp} pipeline stages and {m} micro batch(es) MindSpore refuses to compile, and the 1F1B bubble "
                     f"would be {bubble:.0f}% of the step. Use at least {pp} (MindFormers uses ≥ 4× the stage count)."),
            severity=Severity.HIGH,
            confidence=0.95,
            evidence=[Evidence(name="pipeline_stage", value=pp), Evidence(name="micro_batch_num", value=m),
                      Evidence(name="bubble_share", value=round(bubble, 1), unit="%")],
            locations=[loc] if loc else [],
            patches=[patch] if patch else [],
            tags=list(self.tags),
        )

    def _bubble(self, ctx: RuleContext, pp: int, m: int, bubble: float) -> Finding:
        target = m
        while 100.0 * (pp - 1) / (target + pp - 1) > 10.0:
            target += pp
        after = 100.0 * (pp - 1) / (target + pp - 1)
        patch = ctx.config_patch(f"set micro_batch_num to {target}", [("parallel_config.micro_batch_num", target)],
                                 description="smaller bubble; lower batch_size to keep the global batch")
        loc = ctx.config_location("parallel_config.micro_batch_num")
        return Finding(
            code=self.code,
            rule=self.name,
            title=f"1F1B pipeline bubble {bubble:.0f}% of the step (micro_batch_num {m}, pipeline_stage {pp})",
            message=(f"With {pp} stages and {m} micro batches each stage idles (pp − 1)/(m + pp − 1) = {bubble:.0f}% of the step "
                     f"waiting for the pipeline to fill and drain. {target} micro batches would bring it to {after:.0f}%."),
            severity=Severity.MEDIUM,
            confidence=0.8,
            evidence=[Evidence(name="pipeline_stage", value=pp), Evidence(name="micro_batch_num", value=m),
                      Evidence(name="bubble_share", value=round(bubble, 1), unit="%", threshold=self.options.max_bubble_pct)],
            locations=[loc] if loc else [],
            patches=[patch] if patch else [],
            tags=list(self.tags),
        )
