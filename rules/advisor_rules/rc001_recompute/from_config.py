"""Issues from the config: ``select_recompute`` resolved on MindFormers' Llama layer structure."""

from __future__ import annotations

from advisor_core.config.model_structure import LayerStructure, llama_layer
from advisor_core.config.recompute import effective_recompute, resolve_recompute
from advisor_core.config.training import TrainingConfig
from advisor_rules._common import pattern_for, plain
from advisor_rules.rc001_recompute.issues import PASS_THROUGH, Issue
from advisor_rules.rc001_recompute.select import replace_patterns, with_value


def layer_structure(cfg: TrainingConfig | None) -> LayerStructure:
    """MindFormers' Llama layer as the config builds it (the same structure the simulator uses)."""
    if cfg is None:
        return llama_layer()
    fgi = cfg.at("/model/model_config/fine_grain_interleave", 1)
    compute = cfg.compute_dtype
    rotary = str(cfg.get("model.rotary_dtype") or compute).lower()
    return llama_layer(fine_grain_interleave=isinstance(fgi, int) and not isinstance(fgi, bool) and fgi > 1,
                       rotary_fp32=rotary == "float32" and compute in ("float16", "bfloat16"))


def from_config(cfg: TrainingConfig, structure: LayerStructure) -> dict[tuple, Issue]:
    """Issues the config implies on MindFormers' Llama layer (one-op cells named, blocked or unneeded ops)."""
    plan = resolve_recompute(cfg, structure)
    issues: dict[tuple, Issue] = {}
    for use in plan.patterns:
        if use.kind != "select" or not use.match.cells or use.match.prims:
            continue
        for c in use.match.cells:
            ops_in = [o for o in structure.ops if o.path[: len(c)] == c and len(o.path) > len(c)]
            if len(ops_in) == 1:
                op = ops_in[0]
                issue = issues.setdefault((c, "<cell>"), Issue(c, op.prim, f"the pattern names the cell {'.'.join(c)}, whose only node ({op.prim}) is its output; a recomputed cell keeps its output", "cell-output"))
                issue.replace_pattern = (use.pattern, pattern_for(c, op.attr))
                issue.layers |= set(use.layers) - plan.full_layers  # full-layer recompute wins there
    replaces = dict(i.replace_pattern for i in issues.values() if i.replace_pattern)
    if replaces:
        # Judge the rest as if the cell patterns already named their primitive: the primitive can
        # itself be blocked (SiLU behind Linear's reshape), and the patch must fix both at once.
        sel = cfg.located("recompute.select_recompute")
        plan = resolve_recompute(with_value(cfg, sel.pointer or "", replace_patterns(plain(sel.value), replaces)), structure)
    cell_issues = [i for i in issues.values() if i.replace_pattern]
    for layer in range(plan.num_layers):
        conf = plan.configured_ops(layer, structure)
        if not conf:
            continue
        eff = effective_recompute(structure, conf)
        dup_paths = {structure.op(d).path for d in eff.duplicated}
        for oid, why in eff.not_recomputed.items():
            op = structure.op(oid)
            if op.path in dup_paths:
                continue  # another call of the same primitive is recomputed: the pattern works
            blocked = "reaches the backward" in why
            blockers = [u for u in structure.consumers(op.out) if u.id not in conf and u.prim in PASS_THROUGH]
            adds = sorted({pattern_for(b.path[:-1], b.attr) for b in blockers}) if blocked else []
            owner = next((i for i in cell_issues if op.path[: len(i.op_path)] == i.op_path), None)
            if owner is not None:  # the primitive the cell pattern should have named is blocked too
                if blocked and not set(adds) <= set(owner.add_patterns):
                    owner.add_patterns = sorted(set(owner.add_patterns) | set(adds))
                    owner.reason += f"; naming {op.dotted} instead is not enough either: {why}"
                continue
            issue = issues.setdefault((op.path[:-1], op.attr), Issue(op.path, op.prim, why, "blocked" if blocked else "not-needed", adds))
            issue.layers.add(layer)
    return issues
