"""The fix: ``select_recompute`` with the blocking ops added and cell patterns renamed, in the config's own form."""

from __future__ import annotations

import copy
from typing import Any

from advisor_core.config.recompute import DEFAULT_SELECT
from advisor_core.config.training import TrainingConfig, split_pointer
from advisor_core.engine import RuleContext, Safety
from advisor_rules._common import plain
from advisor_rules.rc001_recompute.issues import Issue


def with_value(cfg: TrainingConfig, pointer: str, value: Any) -> TrainingConfig:
    """A copy of ``cfg`` with ``pointer`` set to ``value``."""
    data = copy.deepcopy(plain(cfg.data))
    node = data
    parts = split_pointer(pointer)
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
    return TrainingConfig(data, cfg.path)


def replace_patterns(value: Any, replaces: dict[str, str]) -> Any:
    """``select_recompute`` with cell patterns swapped for primitive patterns, form kept."""
    if isinstance(value, list):
        return [replaces.get(v, v) if isinstance(v, str) else v for v in value]
    if isinstance(value, dict):
        return {replaces.get(k, k): v for k, v in value.items()}
    return value


def new_select(cfg: TrainingConfig, issues: list[Issue]) -> Any:
    """The fixed ``select_recompute`` in the form the config uses, or ``None`` when nothing changes."""
    loc = cfg.located("recompute.select_recompute")
    if not loc.present:
        return None
    value = plain(loc.value)
    adds = sorted({p for i in issues for p in i.add_patterns})
    replaces = dict(i.replace_pattern for i in issues if i.replace_pattern)
    if not adds and not replaces:
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        new = replace_patterns(value, replaces)
        new += [a for a in adds if a not in new]
    elif isinstance(value, dict):
        new = replace_patterns(value, replaces)
        # An added blocker must cover every layer any configured pattern covers (a Reshape costs
        # nothing to recompute), else the op it unblocks stays blocked in the extra layers.
        template = union_counts(list(value.values()))
        for a in adds:
            new.setdefault(a, template)
    elif value is True:
        new = [replaces.get(v, v) for v in DEFAULT_SELECT] + adds
    elif isinstance(value, list):  # per-stage counts of the default patterns → dict form keeps the counts
        new = {p: value for p in [replaces.get(v, v) for v in DEFAULT_SELECT] + adds}
    else:
        return None
    return None if new == value else new


def union_counts(values: list[Any]) -> Any:
    """The per-layer selection covering all ``values`` (bools, per-stage counts, 2-D per-chunk counts)."""
    if any(v is True for v in values):
        return True
    lists = [v for v in values if isinstance(v, list)]
    if not lists:
        return True
    if all(isinstance(x, list) for v in lists for x in v):
        rows = max(len(v) for v in lists)
        return [union_counts([v[i] for v in lists if i < len(v)]) for i in range(rows)]
    out: list[Any] = []
    for i in range(max(len(v) for v in lists)):
        col = [v[i] for v in lists if i < len(v)]
        out.append(True if any(c is True for c in col) else
                   max((int(c) for c in col if isinstance(c, (int, float)) and not isinstance(c, bool)), default=0))
    return out


def select_patch(ctx: RuleContext, issues: list[Issue], new: Any) -> Any:
    """The unsafe patch setting ``select_recompute`` to ``new`` (``None`` when nothing changes)."""
    if new is None:
        return None
    adds = sorted({p for i in issues for p in i.add_patterns})
    replaces = [i.replace_pattern for i in issues if i.replace_pattern]
    return ctx.config_patch(
        "make select_recompute effective: " + ", ".join([f"add {a!r}" for a in adds] + [f"{o!r} → {n!r}" for o, n in replaces]),
        [("recompute.select_recompute", new)],
        safety=Safety.UNSAFE,
        description="recomputes the ops that block the configured ones: less activation memory, more forward time",
    )
