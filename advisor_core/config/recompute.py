"""``recompute_config`` as MindFormers applies it, and which configured ops really get recomputed.

Resolution (``mindspore-ir-format.md`` §8, MindFormers ``LayerSetting``):

* ``recompute`` (full layer): ``True`` = every layer; a list of ints = per
  pipeline stage, the first *k* layers of each stage; a 2-D list = per
  ``[pp_interleave][stage]``.
* ``select_recompute`` / ``select_comm_recompute``: ``False``; ``True`` or an int
  list → the default patterns (``feed_forward\\.mul``,
  ``feed_forward\\.w1\\.activation\\.silu``; comm: ``.*\\.norm``) on all layers /
  the first *k* of each stage; a list of pattern strings → those patterns on every
  layer; a dict ``{pattern: bool | [k per stage] | [[k]]}``.
* Full-layer recompute wins over select recompute; ``*_exclude`` wins over both.
* A pattern is split on the literal ``\\.``; each segment is ``re.fullmatch``-ed
  against child cell names, the last one against the attributes (child cells or
  primitives) of the cell reached. A primitive match marks that primitive; a
  cell match recomputes the whole cell **except its output** (MindSpore's
  ``output_recompute=False``) — so a pattern naming a one-op cell recomputes
  nothing.

Effectiveness (:func:`effective_recompute`): MindSpore duplicates a configured
op in the backward graph only when its output is needed there — read by some
op's backward, or by another duplicated op. A configured op whose output
reaches the backward pass only through an op that is not recomputed (the
``Reshape`` between SiLU and Mul of the seed's Llama2 case) is configured but
not recomputed, and saves no memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from advisor_core.config.model_structure import Cell, LayerOp, LayerStructure
from advisor_core.config.training import TrainingConfig, as_int

DEFAULT_SELECT = ("feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu")
DEFAULT_COMM = (".*\\.norm",)


@dataclass(frozen=True)
class RecomputeIssue:
    """A problem with the recompute configuration itself (for lint and RC001)."""

    code: str
    pointer: str
    message: str
    severity: str = "error"  # error | warning


@dataclass(frozen=True)
class PatternMatch:
    """What one pattern reached in the layer: primitive paths and cell paths."""

    pattern: str
    prims: tuple[tuple[str, ...], ...]
    cells: tuple[tuple[str, ...], ...]
    error: str | None = None

    @property
    def matched(self) -> bool:
        return bool(self.prims or self.cells)


@dataclass
class PatternUse:
    """One configured pattern: where it is in the YAML, which layers it applies to, what it matches."""

    pattern: str
    kind: str  # select | comm | exclude | comm_exclude
    pointer: str
    layers: frozenset[int]
    match: PatternMatch
    default: bool = False


@dataclass
class RecomputePlan:
    """Resolved recompute configuration over the global layer indices."""

    num_layers: int
    stage_layers: list[list[int]]
    full_layers: frozenset[int]
    patterns: list[PatternUse] = field(default_factory=list)
    issues: list[RecomputeIssue] = field(default_factory=list)
    form: str = "none"  # none | bool | list | stage_list | dict (of select_recompute)

    def configured_ops(self, layer: int, structure: LayerStructure) -> set[str]:
        """Op ids marked for select recompute in ``layer`` (exclusions applied; full layers excluded)."""
        if layer in self.full_layers:
            return set()
        marked: set[str] = set()
        excluded: set[str] = set()
        for use in self.patterns:
            if layer not in use.layers or not use.match.matched:
                continue
            ops = ops_of_match(use.match, structure)
            if use.kind == "select":
                marked |= ops
            elif use.kind == "exclude":
                excluded |= ops
        return marked - excluded


def split_pattern(pattern: str) -> list[str]:
    """MindFormers splits on the literal two characters ``\\.``."""
    return pattern.split("\\.")


def match_pattern(pattern: str, tree: Cell) -> PatternMatch:
    """Match one ``select_recompute`` pattern against a layer's cell tree."""
    segs = split_pattern(pattern)
    try:
        rxs = [re.compile(s) for s in segs]
    except re.error as exc:
        return PatternMatch(pattern, (), (), error=f"not a valid regular expression: {exc}")
    frontier: list[tuple[Cell, tuple[str, ...]]] = [(tree, ())]
    for rx in rxs[:-1]:
        nxt = []
        for cell, path in frontier:
            for child in cell.children:
                if rx.fullmatch(child.name):
                    nxt.append((child, path + (child.name,)))
        frontier = nxt
    prims: list[tuple[str, ...]] = []
    cells: list[tuple[str, ...]] = []
    last = rxs[-1]
    for cell, path in frontier:
        for child in cell.children:
            if last.fullmatch(child.name):
                cells.append(path + (child.name,))
        for p in cell.prims:
            if last.fullmatch(p):
                prims.append(path + (p,))
    return PatternMatch(pattern, tuple(prims), tuple(cells))


def cell_outputs(cell_path: tuple[str, ...], structure: LayerStructure) -> set[str]:
    """Ops under ``cell_path`` whose output is used outside the cell (or is the layer output)."""
    inside = [o for o in structure.ops if o.path[: len(cell_path)] == cell_path and len(o.path) > len(cell_path)]
    inside_ids = {o.id for o in inside}
    outs = set()
    for o in inside:
        users = structure.consumers(o.out)
        if not users or any(u.id not in inside_ids for u in users):
            outs.add(o.id)
    return outs


def ops_of_match(match: PatternMatch, structure: LayerStructure) -> set[str]:
    """Op ids a match marks: every call of a matched primitive; a matched cell minus its outputs."""
    ids: set[str] = set()
    for p in match.prims:
        ids |= {o.id for o in structure.ops if o.path == p}
    for c in match.cells:
        inside = {o.id for o in structure.ops if o.path[: len(c)] == c and len(o.path) > len(c)}
        ids |= inside - cell_outputs(c, structure)
    return ids


# ----------------------------------------------------------------------------- resolution
def _stage_layers(cfg: TrainingConfig) -> list[list[int]]:
    counts = cfg.layers_per_stage() or [cfg.num_layers or 0]
    out, start = [], 0
    for c in counts:
        out.append(list(range(start, start + c)))
        start += c
    return out


def _interleave_num(cfg: TrainingConfig) -> int:
    if cfg.get("pipeline_interleave") in (True, "true", "True"):
        return as_int(cfg.get("pp_interleave_num")) or 1
    return 1


def _layers_from_counts(
    value: Any, pointer: str, stages: list[list[int]], cfg: TrainingConfig, issues: list[RecomputeIssue]
) -> frozenset[int]:
    """Per-stage counts (1-D, or 2-D per interleave chunk) → the global layers they select."""
    pp = len(stages)
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        v = len(value)
        for row_i, row in enumerate(value):
            if len(row) != pp:
                issues.append(RecomputeIssue("stage-list-length", f"{pointer}/{row_i}", f"has {len(row)} entries for {pp} pipeline stage(s)"))
        chosen: set[int] = set()
        for s, layers in enumerate(stages):
            chunks = [layers[i * len(layers) // v : (i + 1) * len(layers) // v] for i in range(v)]
            for ci in range(v):
                row = value[ci] if ci < len(value) else []
                k = as_int(row[s]) if s < len(row) else 0
                chosen |= set(chunks[ci][: max(0, k or 0)])
        return frozenset(chosen)
    if not isinstance(value, list):
        return frozenset()
    bad = [i for i, x in enumerate(value) if as_int(x) is None and not isinstance(x, bool)]
    for i in bad:
        issues.append(RecomputeIssue("bad-stage-count", f"{pointer}/{i}", f"entry {value[i]!r} is not a layer count"))
    if len(value) > pp:
        issues.append(
            RecomputeIssue(
                "stage-list-length",
                pointer,
                f"lists {len(value)} per-stage counts but pipeline_stage is {pp}: the list must have exactly one entry "
                "per stage (MindFormers rejects longer lists)",
            )
        )
    elif len(value) < pp:
        issues.append(
            RecomputeIssue(
                "stage-list-length",
                pointer,
                f"lists {len(value)} per-stage count(s) but pipeline_stage is {pp}; stages {len(value)}..{pp - 1} get none",
            )
        )
    chosen = set()
    for s, layers in enumerate(stages):
        if s >= len(value):
            break
        raw = value[s]
        if raw is True:
            k = len(layers)
        else:
            k = as_int(raw) or 0
        if k > len(layers):
            issues.append(
                RecomputeIssue(
                    "count-capped",
                    f"{pointer}/{s}",
                    f"asks for {k} layers but stage {s} has {len(layers)}; capped at {len(layers)}",
                    severity="warning",
                )
            )
        chosen |= set(layers[: max(0, k)])
    return frozenset(chosen)


def _pattern_uses(
    value: Any,
    pointer: str,
    kind: str,
    defaults: tuple[str, ...],
    stages: list[list[int]],
    all_layers: frozenset[int],
    tree: Cell,
    cfg: TrainingConfig,
    issues: list[RecomputeIssue],
) -> list[PatternUse]:
    uses: list[PatternUse] = []
    if value is None or value is False:
        return uses
    if value is True:
        return [PatternUse(p, kind, pointer, all_layers, match_pattern(p, tree), default=True) for p in defaults]
    if isinstance(value, list) and all(isinstance(x, str) for x in value) and value:
        return [PatternUse(p, kind, f"{pointer}/{i}", all_layers, match_pattern(p, tree)) for i, p in enumerate(value)]
    if isinstance(value, list):
        layers = _layers_from_counts(value, pointer, stages, cfg, issues)
        return [PatternUse(p, kind, pointer, layers, match_pattern(p, tree), default=True) for p in defaults]
    if isinstance(value, dict):
        for pat, v in value.items():
            ptr = f"{pointer}/{str(pat).replace('~', '~0').replace('/', '~1')}"
            if v is True:
                layers = all_layers
            elif v is False or v is None:
                layers = frozenset()
            elif isinstance(v, list):
                layers = _layers_from_counts(v, ptr, stages, cfg, issues)
            else:
                issues.append(RecomputeIssue("bad-form", ptr, f"value {v!r} must be a bool or a per-stage list"))
                layers = frozenset()
            uses.append(PatternUse(str(pat), kind, ptr, layers, match_pattern(str(pat), tree)))
        return uses
    issues.append(RecomputeIssue("bad-form", pointer, f"value {value!r} is not a bool, a list or a mapping"))
    return uses


def resolve_recompute(cfg: TrainingConfig, structure: LayerStructure) -> RecomputePlan:
    """Resolve ``recompute_config`` against a layer structure (see module docstring)."""
    stages = _stage_layers(cfg)
    n = sum(len(s) for s in stages)
    all_layers = frozenset(range(n))
    issues: list[RecomputeIssue] = []
    full_val = cfg.located("recompute.recompute")
    full: frozenset[int] = frozenset()
    if full_val.present:
        v = full_val.value
        if v is True:
            full = all_layers
        elif isinstance(v, list):
            full = _layers_from_counts(v, full_val.pointer or "", stages, cfg, issues)
        elif v not in (False, None):
            issues.append(RecomputeIssue("bad-form", full_val.pointer or "", f"value {v!r} must be a bool or a per-stage list"))
    plan = RecomputePlan(num_layers=n, stage_layers=stages, full_layers=full, issues=issues)
    for key, kind, defaults in (
        ("recompute.select_recompute", "select", DEFAULT_SELECT),
        ("recompute.select_comm_recompute", "comm", DEFAULT_COMM),
        ("recompute.select_recompute_exclude", "exclude", ()),
        ("recompute.select_comm_recompute_exclude", "comm_exclude", ()),
    ):
        loc = cfg.located(key)
        if not loc.present:
            continue
        if kind == "select":
            v = loc.value
            plan.form = (
                "bool" if isinstance(v, bool) else "dict" if isinstance(v, dict)
                else "list" if isinstance(v, list) and v and all(isinstance(x, str) for x in v)
                else "stage_list" if isinstance(v, list) else "none"
            )
        plan.patterns += _pattern_uses(loc.value, loc.pointer or "", kind, defaults, stages, all_layers, structure.tree, cfg, issues)
    for use in plan.patterns:
        if use.match.error:
            issues.append(RecomputeIssue("bad-pattern", use.pointer, f"pattern {use.pattern!r} is {use.match.error}"))
        elif not use.match.matched and use.kind in ("select", "comm"):
            issues.append(
                RecomputeIssue(
                    "pattern-matches-nothing",
                    use.pointer,
                    f"pattern {use.pattern!r} matches no cell or operator of a decoder layer",
                )
            )
    return plan


# ----------------------------------------------------------------------------- effectiveness
@dataclass(frozen=True)
class RecomputeEffect:
    """What select recompute of ``configured`` ops does in one layer."""

    configured: frozenset[str]
    duplicated: frozenset[str]
    not_recomputed: dict[str, str]  # op id → why not
    saved_before: frozenset[str]  # tensors kept for backward without recompute
    saved_after: frozenset[str]  # tensors kept with recompute


def _backward_readers(structure: LayerStructure) -> dict[str, list[LayerOp]]:
    readers: dict[str, list[LayerOp]] = {}
    for op in structure.ops:
        for i in op.saved:
            if i < len(op.inputs) and not op.inputs[i].startswith("param:"):
                readers.setdefault(op.inputs[i], []).append(op)
    return readers


def effective_recompute(structure: LayerStructure, configured: Iterable[str]) -> RecomputeEffect:
    """Which configured ops MindSpore would duplicate, and why the others are not."""
    conf = frozenset(configured)
    by_id = {o.id: o for o in structure.ops}
    readers = _backward_readers(structure)
    dup: set[str] = set()
    changed = True
    while changed:
        changed = False
        for oid in conf - dup:
            op = by_id[oid]
            if op.out in readers or any(op.out in by_id[d].inputs for d in dup):
                dup.add(oid)
                changed = True
    why: dict[str, str] = {}
    for oid in sorted(conf - dup):
        op = by_id[oid]
        users = structure.consumers(op.out)
        blockers = [u for u in users if u.id not in conf]
        if blockers:
            names = ", ".join(f"{u.dotted} ({u.prim})" for u in blockers)
            why[oid] = f"its output reaches the backward pass only through {names}, which is not recomputed"
        else:
            why[oid] = "no backward op needs its output"
    saved_before = frozenset(readers)
    needed = set()
    for t in readers:
        prod = structure.by_out.get(t)
        if prod is None or prod.id not in dup:
            needed.add(t)
    for d in dup:
        for t in by_id[d].inputs:
            if t.startswith("param:"):
                continue
            prod = structure.by_out.get(t)
            if prod is None or prod.id not in dup:
                needed.add(t)
    return RecomputeEffect(conf, frozenset(dup), why, saved_before, frozenset(needed))


def full_layer_saved(structure: LayerStructure) -> frozenset[str]:
    """With full-layer recompute only the layer input is kept."""
    return frozenset({"x"})
