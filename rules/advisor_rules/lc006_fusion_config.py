"""LC006: ``all_reduce_fusion_config`` split points out of order or out of range."""

from __future__ import annotations

from typing import Iterable

from advisor_core.engine import Evidence, Finding, Need, Requirements, Rule, RuleContext, Severity
from advisor_rules._common import is_llama

PARAMS_PER_LLAMA_LAYER = 9  # wq, wk, wv, wo, w1, w2, w3, attention_norm, ffn_norm


class FusionConfigOrder(Rule):
    """``parallel.all_reduce_fusion_config`` not strictly increasing, not positive, or beyond the parameter count.

    What
        The split points are parameter indices: gradient AllReduce bucket *i* holds
        the parameters between split *i−1* and split *i*. They must be positive
        integers in strictly increasing order, and the last one cannot exceed the
        number of trainable parameters (for Llama-family configs: embedding +
        9 per layer + final norm + head, divided over pipeline stages).

    Why
        MindSpore raises at compile time on a non-increasing list; an index past the
        parameter count silently yields an empty bucket — the split you tuned
        does nothing (seed: ResNet-50 has 160 weights, split ``[85, 160]``).

    Example
        ``all_reduce_fusion_config: [160, 85]`` or ``[85, 400]`` for a 161-parameter stage.

    Fix
        Sort the indices, drop duplicates and values beyond the parameter count.
    """

    code = "LC006"
    name = "fusion-config-order"
    summary = "all_reduce_fusion_config out of order or out of range"
    severity = Severity.HIGH
    requires = Requirements(any_of=(Need.config("parallel.all_reduce_fusion_config"),))
    tags = ("lint", "communication", "config")
    fix_availability = "sometimes"

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        assert cfg is not None
        val = cfg.get("parallel.all_reduce_fusion_config")
        loc = ctx.config_location("parallel.all_reduce_fusion_config")
        problems: list[str] = []
        if not isinstance(val, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in val):
            problems.append(f"{val!r} is not a list of integers")
            ints: list[int] = []
        else:
            ints = [int(v) for v in val]
            if any(v <= 0 for v in ints):
                problems.append("indices must be positive")
            if any(b <= a for a, b in zip(ints, ints[1:])):
                problems.append("indices must be strictly increasing")
        limit = None
        if ints and is_llama(cfg) and cfg.num_layers:
            stages = max(cfg.pipeline_stages, 1)
            limit = 1 + PARAMS_PER_LLAMA_LAYER * -(-cfg.num_layers // stages) + 2
            if max(ints) > limit:
                problems.append(f"{max(ints)} exceeds the ~{limit} parameters of a stage ({cfg.num_layers} layers over {stages} stage(s))")
        if not problems:
            ctx.skip(f"split points {ints} are increasing and within range")
            return
        fixed = sorted({v for v in ints if v > 0 and (limit is None or v <= limit)})
        patches = []
        if ints and fixed and fixed != ints:
            p = ctx.config_patch(f"set all_reduce_fusion_config to {fixed}", [("parallel.all_reduce_fusion_config", fixed)])
            if p:
                patches.append(p)
        yield Finding(
            code=self.code,
            rule=self.name,
            title="all_reduce_fusion_config: " + "; ".join(problems),
            message=f"parallel.all_reduce_fusion_config = {val!r}: " + "; ".join(problems) + ".",
            severity=Severity.HIGH,
            confidence=0.9,
            evidence=[Evidence(name="split_points", value=str(val))] + ([Evidence(name="parameters_per_stage", value=limit)] if limit else []),
            locations=[loc] if loc else [],
            patches=patches,
            tags=list(self.tags),
        )
