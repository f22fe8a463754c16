"""LC001: recompute patterns that cannot match the model."""

from __future__ import annotations

import re
from typing import Any, Iterable

from advisor_core.config.model_structure import llama_layer
from advisor_core.config.recompute import resolve_recompute, split_pattern
from advisor_core.engine import Evidence, Finding, Need, Requirements, Rule, RuleContext, Severity
from advisor_rules._common import cell_path_in_layer, is_llama


class RecomputePatternUnmatched(Rule):
    """``select_recompute`` / ``select_comm_recompute`` patterns that match nothing.

    What
        Every pattern of ``recompute_config.select_recompute``,
        ``select_comm_recompute`` and their ``*_exclude`` lists is matched the way
        MindFormers does it (split on the literal ``\\.``, each segment
        ``re.fullmatch``-ed against cell attribute names, the last against the
        cell's attributes). With a baseline IR (``--graphs``), patterns are matched
        against the cells and operator instance names that really exist in the
        compiled decoder layers; without one, against MindFormers' Llama decoder
        layer (only for Llama-family configs: ``LlamaConfig``/``LlamaForCausalLM``).
        Invalid regular expressions are reported for every model.

    Why
        A pattern that matches nothing silently recomputes nothing: the memory it
        was meant to save is not saved and the job may run out of memory at a
        larger batch — or you pay for full recompute elsewhere for no reason.

    Example
        ``'feed_forward\\.w1\\.activaton'`` (typo) or ``'mlp\\.mul'`` on a Llama layer
        (the legacy Llama calls the block ``feed_forward``).

    Fix
        Correct the pattern to a cell/operator path that exists (the message lists
        the attributes available at the point where matching failed).
    """

    code = "LC001"
    name = "recompute-pattern-unmatched"
    summary = "recompute patterns that match no cell or operator"
    severity = Severity.MEDIUM
    requires = Requirements(any_of=(Need.config("recompute.select_recompute"), Need.config("recompute.select_comm_recompute")))
    tags = ("lint", "recompute", "config")
    fix_availability = "never"

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        assert cfg is not None
        structure = llama_layer()
        plan = resolve_recompute(cfg, structure)
        names = self._ir_names(ctx)
        llama = is_llama(cfg)
        reported = 0
        for use in plan.patterns:
            if use.default:
                continue
            if use.match.error:
                yield self._finding(ctx, use.pointer, use.pattern, f"is {use.match.error}", "regex")
                reported += 1
                continue
            if names is not None:
                if not _matches_ir(use.pattern, names):
                    yield self._finding(ctx, use.pointer, use.pattern,
                                        "matches no cell or operator instance of the decoder layers in the baseline IR", "ir",
                                        hint=_hint(use.pattern, names))
                    reported += 1
            elif llama and not use.match.matched:
                available = sorted({".".join(p) for p in _paths(structure.tree)})
                yield self._finding(ctx, use.pointer, use.pattern, "matches no cell or operator of a MindFormers Llama decoder layer",
                                    "model", hint=_hint_paths(use.pattern, available))
                reported += 1
        if not reported:
            how = "baseline IR" if names is not None else ("Llama layer model" if llama else "regex syntax only (not a Llama-family model)")
            ctx.skip(f"every recompute pattern matches ({how})")

    @staticmethod
    def _ir_names(ctx: RuleContext) -> set[tuple[str, ...]] | None:
        ir = ctx.ir_graph("frontend")
        if ir is None:
            return None
        out: set[tuple[str, ...]] = set()
        for n in ir.iter_nodes():
            path = cell_path_in_layer(n.scope)
            if not path and n.scope and "Layer" not in n.scope:
                continue
            for i in range(1, len(path) + 1):
                out.add(path[:i])
            if n.instance_name:
                out.add(path + (n.instance_name,))
        return out or None

    def _finding(self, ctx: RuleContext, pointer: str, pattern: str, what: str, basis: str, hint: str = "") -> Finding:
        loc = ctx.config_location(pointer)
        return Finding(
            code=self.code,
            rule=self.name,
            title=f"recompute pattern {pattern!r} {what.split(' (')[0]}",
            message=f"Pattern {pattern!r} at {pointer} {what}; it recomputes nothing." + (f" {hint}" if hint else ""),
            severity=Severity.HIGH if basis == "regex" else Severity.MEDIUM,
            confidence=0.95 if basis in ("regex", "ir") else 0.7,
            evidence=[Evidence(name="pattern", value=pattern), Evidence(name="matched_against", value=basis)],
            locations=[loc] if loc else [],
            tags=list(self.tags),
        )


def _paths(tree: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for c in tree.children:
        out.append(prefix + (c.name,))
        out += _paths(c, prefix + (c.name,))
    for p in tree.prims:
        out.append(prefix + (p,))
    return out


def _matches_ir(pattern: str, names: set[tuple[str, ...]]) -> bool:
    segs = split_pattern(pattern)
    try:
        rxs = [re.compile(s) for s in segs]
    except re.error:
        return False
    for path in names:
        if len(path) == len(rxs) and all(r.fullmatch(p) for r, p in zip(rxs, path)):
            return True
    return False


def _hint(pattern: str, names: set[tuple[str, ...]]) -> str:
    return _hint_paths(pattern, sorted(".".join(p) for p in names))


def _hint_paths(pattern: str, available: list[str]) -> str:
    segs = split_pattern(pattern)
    for depth in range(len(segs), 0, -1):
        prefix = segs[: depth - 1]
        cands = sorted({a.split(".")[depth - 1] for a in available
                        if len(a.split(".")) >= depth and all(re.fullmatch(s, p) for s, p in zip(prefix, a.split(".")))})
        if cands:
            where = ".".join(prefix) or "the layer"
            return f"Attributes available under {where}: {', '.join(cands[:12])}."
    return ""
