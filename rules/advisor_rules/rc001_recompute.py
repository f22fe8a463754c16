"""RC001: operators configured for recomputation that MindSpore does not recompute."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import Field

from advisor_core.config.model_structure import LayerOp, LayerStructure, llama_layer
from advisor_core.config.recompute import DEFAULT_SELECT, effective_recompute, resolve_recompute
from advisor_core.config.training import TrainingConfig, dtype_bytes, split_pointer
from advisor_core.engine import (
    Evidence,
    Finding,
    Location,
    Need,
    Requirements,
    Rule,
    RuleContext,
    RuleOptions,
    Safety,
    Severity,
)
from advisor_rules._common import (
    ASSUMED_CUBE_TFLOPS,
    ASSUMED_HBM_GBPS,
    cell_path_in_layer,
    ir_location,
    kernel_time_by_scope,
    layer_of_scope,
    pattern_for,
    plain,
    tensor_bytes,
)

# Ops that only forward a tensor: when one sits between a configured op and the backward and is
# not recomputed itself, it blocks the configured op (the seed's Reshape).
_PASS_THROUGH = {"Reshape", "Cast", "Transpose", "ExpandDims", "Squeeze", "Flatten"}
# Views: no kernel of their own (graph_build eliminates them as no-op nodes), so recomputing is free.
_VIEWS = {"Reshape", "ExpandDims", "Squeeze", "Flatten"}
# Plumbing a tensor flows through on its way to the backward; never named by a pattern.
_WALK = {"Depend", "TupleGetItem", "MakeTuple", "Load"}
_INSERTED = ("redistribution_op", "forward_op")  # parallel-inserted ops (tensor redistribution)


@dataclass
class _Issue:
    """One configured op (pattern) that is not recomputed, aggregated over layers."""

    op_path: tuple[str, ...]  # cell path + attribute (the pattern's parts)
    prim: str
    reason: str
    kind: str  # blocked | not-needed | cell-output
    add_patterns: list[str] = field(default_factory=list)  # what to add to make it effective
    replace_pattern: tuple[str, str] | None = None  # (old cell pattern, new primitive pattern)
    layers: set[int] = field(default_factory=set)
    nodes: list[Any] = field(default_factory=list)  # IR nodes: configured, not recomputed
    chain: list[Any] = field(default_factory=list)  # IR nodes recomputed once fixed (IR-only estimate)
    blockers: list[Any] = field(default_factory=list)  # IR nodes whose outputs stop being kept


@dataclass
class _Effect:
    """What applying the fix does: peak memory saved, step time added, and how that was derived."""

    memory_bytes: float = 0.0
    extra_us: float | None = None
    memory_how: str | None = None
    time_how: str | None = None


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
        structure and the config; with both, the IR's verdict wins for every op it
        shows.

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
        it costs.
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
        structure = _structure(cfg)
        issues: dict[tuple, _Issue] = {}
        effective: set[tuple] = set()  # (layer, cell path, attribute) the IR shows recomputed
        if ir_conf:
            issues, effective = self._from_ir(ir)
        if has_select:
            # The IR cannot show a pattern naming a one-op cell (nothing gets marked); the config can.
            # The IR's verdict wins for every layer it shows.
            shown = {lay for lay in (layer_of_scope(n.scope) for n in ir.iter_nodes()) if lay is not None} if ir_conf else set()
            for key, issue in self._from_config(cfg, structure).items():
                seen = issue.layers & shown
                done = bool(seen) and all(
                    any(e[0] == lay and e[1] == issue.op_path for e in effective) if issue.replace_pattern
                    else (lay, issue.op_path[:-1], issue.op_path[-1]) in effective for lay in seen)
                if key not in issues and not done:
                    issues[key] = issue
                    issue.nodes = _ir_nodes_of(ir, issue) if ir is not None else []
        if not issues:
            ctx.skip(f"every configured op is recomputed ({'IR' if ir_conf else 'config'})")
            return
        yield self._finding(ctx, list(issues.values()), ir if ir_conf else None, structure, ir)

    # -- from the IR ------------------------------------------------------------------------------
    def _from_ir(self, ir: Any) -> tuple[dict[tuple, _Issue], set[tuple]]:
        nodes = list(ir.iter_nodes())
        consumers: dict[int, list[Any]] = {}
        for n in nodes:
            for ref in n.operand_refs:
                p = ir.resolve(n, ref) if ref.kind in ("node", "crossref") else None
                if p is not None and hasattr(p, "op"):
                    consumers.setdefault(id(p), []).append(n)
        dup_keys = {n.recompute_key for n in nodes if n.is_duplicated and n.recompute_key}
        configured = [n for n in nodes if n.is_recompute_configured and not n.is_duplicated and not _is_backward(n)]
        conf_ids = {id(n) for n in configured}
        issues: dict[tuple, _Issue] = {}

        def read_by_backward(x: Any) -> bool:
            return any(_is_backward(c) for c in consumers.get(id(x), []))

        def where(x: Any) -> tuple[int | None, tuple[str, ...], str]:
            return layer_of_scope(x.scope), cell_path_in_layer(x.scope), x.instance_name or x.op.lower()

        # A primitive used twice in a cell (Linear's reshape in and out) is effective when any of
        # its calls in that layer is recomputed: judge per (layer, cell path, attribute).
        done = {where(x) for x in configured if x.recompute_key and x.recompute_key in dup_keys}
        effective = set(done)
        for x in configured:
            if where(x) in done:
                continue
            _, path, attr = where(x)
            # Walk forward through non-configured pass-through ops to the tensor backward reads.
            blockers: list[Any] = []
            frontier, seen = [x], {id(x)}
            while frontier:
                nxt = []
                for n in frontier:
                    for c in consumers.get(id(n), []):
                        if _is_backward(c) or id(c) in seen or c.is_duplicated:
                            continue
                        seen.add(id(c))
                        if id(c) in conf_ids:
                            continue
                        if c.op not in _PASS_THROUGH and c.op not in _WALK and not (c.instance_name or "").startswith(_INSERTED):
                            continue  # a real consumer: its backward keeps what it needs itself
                        if read_by_backward(c) and c.op not in _WALK:
                            blockers.append(c)
                        else:
                            nxt.append(c)
                frontier = nxt
            key = (path, attr)
            if blockers:
                adds = sorted({pattern_for(cell_path_in_layer(b.scope), b.instance_name or b.op.lower())
                               for b in blockers if not (b.instance_name or "").startswith(_INSERTED)})
                names = ", ".join(sorted({f"{'.'.join(cell_path_in_layer(b.scope) + ((b.instance_name or b.op),))} ({b.op})"
                                          for b in blockers}))
                issue = issues.setdefault(key, _Issue(path + (attr,), x.op, f"its output reaches the backward pass only through {names}, which is not recomputed", "blocked", adds))
                issue.blockers += blockers
                issue.chain += [x, *blockers]
            else:
                issue = issues.setdefault(key, _Issue(path + (attr,), x.op, "no backward op needs its output, so recomputing it saves nothing", "not-needed"))
            issue.nodes.append(x)
            if where(x)[0] is not None:
                issue.layers.add(where(x)[0])
        # A recomputed cell whose every node is its kept output: the pattern named a one-op cell.
        cells: dict[tuple[str, ...], list[Any]] = {}
        for n in nodes:
            if (n.scope or "").startswith("recompute_") and not n.is_duplicated and cell_path_in_layer(n.scope):
                cells.setdefault(cell_path_in_layer(n.scope), []).append(n)
        for cell, members in cells.items():
            if all(m.cnode_attrs.get("recompute") is False for m in members):
                n = members[0]
                issue = issues.setdefault((cell, "<cell>"), _Issue(cell, n.op, f"the pattern names the cell {'.'.join(cell)}, whose only node ({n.op}) is its output; a recomputed cell keeps its output", "cell-output"))
                issue.replace_pattern = (pattern_for(cell[:-1], cell[-1]), pattern_for(cell, n.instance_name or n.op.lower()))
                issue.nodes += members
                issue.layers |= {lay for lay in (layer_of_scope(m.scope) for m in members) if lay is not None}
        return issues, effective

    # -- from the config and the layer model -------------------------------------------------------
    def _from_config(self, cfg: TrainingConfig, structure: LayerStructure) -> dict[tuple, _Issue]:
        plan = resolve_recompute(cfg, structure)
        issues: dict[tuple, _Issue] = {}
        for use in plan.patterns:
            if use.kind != "select" or not use.match.cells or use.match.prims:
                continue
            for c in use.match.cells:
                ops_in = [o for o in structure.ops if o.path[: len(c)] == c and len(o.path) > len(c)]
                if len(ops_in) == 1:
                    op = ops_in[0]
                    issue = issues.setdefault((c, "<cell>"), _Issue(c, op.prim, f"the pattern names the cell {'.'.join(c)}, whose only node ({op.prim}) is its output; a recomputed cell keeps its output", "cell-output"))
                    issue.replace_pattern = (use.pattern, pattern_for(c, op.attr))
                    issue.layers |= set(use.layers) - plan.full_layers  # full-layer recompute wins there
        replaces = dict(i.replace_pattern for i in issues.values() if i.replace_pattern)
        if replaces:
            # Judge the rest as if the cell patterns already named their primitive: the primitive can
            # itself be blocked (SiLU behind Linear's reshape), and the patch must fix both at once.
            sel = cfg.located("recompute.select_recompute")
            plan = resolve_recompute(_with_value(cfg, sel.pointer or "", _replace(plain(sel.value), replaces)), structure)
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
                blockers = [u for u in structure.consumers(op.out) if u.id not in conf and u.prim in _PASS_THROUGH]
                adds = sorted({pattern_for(b.path[:-1], b.attr) for b in blockers}) if blocked else []
                owner = next((i for i in cell_issues if op.path[: len(i.op_path)] == i.op_path), None)
                if owner is not None:  # the primitive the cell pattern should have named is blocked too
                    if blocked and not set(adds) <= set(owner.add_patterns):
                        owner.add_patterns = sorted(set(owner.add_patterns) | set(adds))
                        owner.reason += f"; naming {op.dotted} instead is not enough either: {why}"
                    continue
                issue = issues.setdefault((op.path[:-1], op.attr), _Issue(op.path, op.prim, why, "blocked" if blocked else "not-needed", adds))
                issue.layers.add(layer)
        return issues

    # -- the fix and what it does -------------------------------------------------------------------
    def _effect(self, ctx: RuleContext, issues: list[_Issue], new_value: Any, structure: LayerStructure, ir: Any) -> _Effect:
        cfg = ctx.config
        rank = next(iter(ctx.run), None) if ctx.run is not None else None
        times, steps = kernel_time_by_scope(rank) if rank is not None else ({}, 1)
        if cfg is None or new_value is None:
            return self._effect_from_ir(issues, times, steps, rank)
        sel = cfg.located("recompute.select_recompute")
        after = resolve_recompute(_with_value(cfg, sel.pointer or "", new_value), structure)
        before = resolve_recompute(cfg, structure)
        pp = max(len(before.stage_layers), 1)
        m = (cfg.micro_batch_num if pp > 1 else cfg.gradient_accumulation_steps) or 1
        meter = _Meter(ir, times, steps, structure, cfg, m)
        stage_mem: list[float] = []
        stage_us: list[float] = []
        for s, layers in enumerate(before.stage_layers):
            freed = extra = 0.0
            for layer in layers:
                eb = effective_recompute(structure, before.configured_ops(layer, structure))
                ea = effective_recompute(structure, after.configured_ops(layer, structure))
                extra += sum(meter.fwd_us(structure.op(o), layer) for o in ea.duplicated - eb.duplicated)
                freed += sum(meter.tensor_bytes(t, layer) for t in eb.saved_after - ea.saved_after)
                freed -= sum(meter.tensor_bytes(t, layer) for t in ea.saved_after - eb.saved_after)
            in_flight = min(pp - s, m) if pp > 1 else 1
            stage_mem.append(max(freed, 0.0) * in_flight)
            stage_us.append(extra)
        eff = _Effect()
        peaks = _stage_peaks(ctx, pp)
        if peaks is not None:
            eff.memory_bytes = max(peaks) - max(p - f for p, f in zip(peaks, stage_mem))
        else:
            eff.memory_bytes = max(stage_mem, default=0.0)
        # 1F1B: a step is (m − 1) slots of the slowest stage plus one slot of every stage, a slot
        # being one micro batch's forward + backward there; the copies lengthen each backward slot.
        grow = [u / m for u in stage_us]
        slots = _stage_slots(ctx, pp, m)
        base = slots if slots is not None else [0.0] * len(grow)
        eff.extra_us = (m - 1) * (max(b + g for b, g in zip(base, grow)) - max(base)) + sum(grow) if grow else None
        top = max(range(len(stage_mem)), key=lambda s: stage_mem[s]) if stage_mem else 0
        if pp > 1:
            eff.memory_how = (f"stage {top}: {len(before.stage_layers[top])} layer(s) × {min(pp - top, m)} micro batch(es) "
                              "in flight under 1F1B" + (", per-stage peaks from memory_record" if peaks is not None else ""))
        src = "measured kernel time" if meter.measured else "kernels priced from their bytes/FLOPs"
        per = ", ".join(f"{u:.0f}" for u in stage_us)
        eff.time_how = f"the recomputed forward kernels take {per} µs per step ({src})"
        if pp > 1:
            eff.time_how += (f" on stages 0–{pp - 1}, and under 1F1B the slowest stage's backward slots grow m − 1 = {m - 1} "
                             "times plus one slot per stage" + ("" if slots is not None else " (stages assumed alike)"))
        return eff

    @staticmethod
    def _effect_from_ir(issues: list[_Issue], times: dict[str, float], steps: int, rank: Any) -> _Effect:
        """No config to resolve: the blockers' outputs are what the fix stops keeping; their chain is what it recomputes."""
        eff = _Effect()
        blockers = {id(b): b for i in issues if i.kind == "blocked" for b in i.blockers}.values()
        stage, pp = _stage_of(rank) if rank is not None else (0, 1)
        in_flight = max(pp - stage, 1)
        eff.memory_bytes = sum(_node_bytes(b) for b in blockers) * in_flight
        chain = {id(x): x for i in issues for x in i.chain}.values()
        measured = [times[n.kernel_full_name] for n in chain if n.kernel_full_name in times]
        eff.extra_us = sum(measured) / steps if measured else None
        if in_flight > 1:
            eff.memory_how = f"{in_flight} micro batches in flight on stage {stage}"
        if measured:
            eff.time_how = "the recomputed ops' measured kernel time"
        return eff

    # -- finding ---------------------------------------------------------------------------------
    def _finding(self, ctx: RuleContext, issues: list[_Issue], ir: Any, structure: LayerStructure, meter_ir: Any) -> Finding:
        cfg = ctx.config
        rank = next(iter(ctx.run), None) if ctx.run is not None else None
        new_value = _new_select(cfg, issues) if cfg is not None else None
        eff = self._effect(ctx, issues, new_value, structure, meter_ir)
        freed = eff.memory_bytes
        lines = []
        for i in sorted(issues, key=lambda x: ".".join(x.op_path)):
            lay = f" in {len(i.layers)} layer(s)" if i.layers else ""
            lines.append(f"{'.'.join(i.op_path)} ({i.prim}){lay}: {i.reason}")
        msg = ["Configured for recomputation but not recomputed: " + "; ".join(lines) + "."]
        if freed:
            msg.append(f"Fixing it frees about {freed / 2**20:.1f} MiB of activations per rank at the peak"
                       + (f" ({eff.memory_how})" if eff.memory_how else "") + ".")
        if eff.extra_us is not None:
            msg.append(f"It costs {eff.extra_us:.1f} µs per step: {eff.time_how or 'the recomputed kernels'}.")
        patch = self._patch(ctx, issues, new_value) if cfg is not None else None
        if cfg is None:
            adds = sorted({p for i in issues for p in i.add_patterns})
            if adds:
                msg.append("Add to select_recompute: " + ", ".join(repr(a) for a in adds) + ".")
        locations: list[Location] = []
        if cfg is not None:
            loc = ctx.config_location("recompute.select_recompute")
            if loc:
                locations.append(loc)
        graph = ir if ir is not None else meter_ir
        if graph is not None:
            for i in issues:
                for n in i.nodes[:2]:
                    locations.append(ir_location(str(graph.path), n, note="configured, not recomputed"))
        share_mem = 100.0 * freed / (self.options.device_memory_gb * 2**30) if freed else 0.0
        sev = Severity.MEDIUM if share_mem >= 1.0 or any(i.kind in ("blocked", "cell-output") for i in issues) else Severity.LOW
        layers_total = len(set().union(*(i.layers for i in issues))) or 1
        return Finding(
            code=self.code,
            rule=self.name,
            title=f"{len(issues)} recompute setting(s) have no effect"
            + (f" ({freed / 2**20:.0f} MiB of activation memory not saved)" if freed else ""),
            message=" ".join(msg),
            severity=sev,
            saving_us=-eff.extra_us if eff.extra_us is not None else None,
            step_time_us=ctx.step_time_us(rank) if rank is not None else None,
            confidence=0.9 if ir is not None else 0.6,
            memory_delta_bytes=-freed if freed else None,
            evidence=[
                Evidence(name="configured_not_recomputed", value=sum(len(i.nodes) or len(i.layers) for i in issues),
                         source="IR" if ir is not None else "config"),
                Evidence(name="layers", value=layers_total),
            ]
            + ([Evidence(name="activation_memory_not_saved", value=round(freed), unit="bytes")] if freed else [])
            + ([Evidence(name="recompute_cost_per_step", value=round(eff.extra_us, 3), unit="µs")] if eff.extra_us is not None else []),
            locations=locations,
            patches=[patch] if patch else [],
            tags=list(self.tags),
        )

    @staticmethod
    def _patch(ctx: RuleContext, issues: list[_Issue], new: Any) -> Any:
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


# -- helpers ---------------------------------------------------------------------------------------
def _is_backward(n: Any) -> bool:
    scope = n.scope or ""
    return bool(n.forward_unique_id) or scope.startswith("Gradients/") or n.cnode_attrs.get("target_grad") is True


def _ir_nodes_of(ir: Any, issue: _Issue) -> list[Any]:
    """Forward IR nodes a config-derived issue is about (the op, or every node of the named cell)."""
    out = []
    for n in ir.iter_nodes():
        if layer_of_scope(n.scope) is None or n.is_duplicated or _is_backward(n):
            continue
        cell = cell_path_in_layer(n.scope)
        if cell == issue.op_path if issue.replace_pattern else cell + (n.instance_name or n.op.lower(),) == issue.op_path:
            out.append(n)
    return out


def _node_bytes(n: Any) -> float:
    t = n.out_types[0] if n.out_types else None
    return tensor_bytes(getattr(t, "shape", None), getattr(t, "dtype", None)) or 0.0


def _structure(cfg: TrainingConfig | None) -> LayerStructure:
    """MindFormers' Llama layer as the config builds it (the same structure the simulator uses)."""
    if cfg is None:
        return llama_layer()
    fgi = cfg.at("/model/model_config/fine_grain_interleave", 1)
    compute = cfg.compute_dtype
    rotary = str(cfg.get("model.rotary_dtype") or compute).lower()
    return llama_layer(fine_grain_interleave=isinstance(fgi, int) and not isinstance(fgi, bool) and fgi > 1,
                       rotary_fp32=rotary == "float32" and compute in ("float16", "bfloat16"))


def _with_value(cfg: TrainingConfig, pointer: str, value: Any) -> TrainingConfig:
    """A copy of ``cfg`` with ``pointer`` set to ``value``."""
    data = copy.deepcopy(plain(cfg.data))
    node = data
    parts = split_pointer(pointer)
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
    return TrainingConfig(data, cfg.path)


def _replace(value: Any, replaces: dict[str, str]) -> Any:
    """``select_recompute`` with cell patterns swapped for primitive patterns, form kept."""
    if isinstance(value, list):
        return [replaces.get(v, v) if isinstance(v, str) else v for v in value]
    if isinstance(value, dict):
        return {replaces.get(k, k): v for k, v in value.items()}
    return value


def _new_select(cfg: TrainingConfig, issues: list[_Issue]) -> Any:
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
        new = _replace(value, replaces)
        new += [a for a in adds if a not in new]
    elif isinstance(value, dict):
        new = _replace(value, replaces)
        # An added blocker must cover every layer any configured pattern covers (a Reshape costs
        # nothing to recompute), else the op it unblocks stays blocked in the extra layers.
        template = _union_counts(list(value.values()))
        for a in adds:
            new.setdefault(a, template)
    elif value is True:
        new = [replaces.get(v, v) for v in DEFAULT_SELECT] + adds
    elif isinstance(value, list):  # per-stage counts of the default patterns → dict form keeps the counts
        new = {p: value for p in [replaces.get(v, v) for v in DEFAULT_SELECT] + adds}
    else:
        return None
    return None if new == value else new


def _union_counts(values: list[Any]) -> Any:
    """The per-layer selection covering all ``values`` (bools, per-stage counts, 2-D per-chunk counts)."""
    if any(v is True for v in values):
        return True
    lists = [v for v in values if isinstance(v, list)]
    if not lists:
        return True
    if all(isinstance(x, list) for v in lists for x in v):
        rows = max(len(v) for v in lists)
        return [_union_counts([v[i] for v in lists if i < len(v)]) for i in range(rows)]
    out: list[Any] = []
    for i in range(max(len(v) for v in lists)):
        col = [v[i] for v in lists if i < len(v)]
        out.append(True if any(c is True for c in col) else
                   max((int(c) for c in col if isinstance(c, (int, float)) and not isinstance(c, bool)), default=0))
    return out


def _stage_of(rank: Any) -> tuple[int, int]:
    """(pipeline stage, stage count) of a profiled rank, from its parallel layout."""
    layout = getattr(rank, "parallel", None)
    pp = int(getattr(layout, "pipeline_stages", None) or 1)
    for g in getattr(layout, "groups", None) or []:
        if g.group_name == "pp" and g.group_rank is not None:
            return int(g.group_rank), pp
    return 0, pp


def _stage_slots(ctx: RuleContext, pp: int, m: int) -> list[float] | None:
    """Per pipeline stage, one micro batch's forward + backward (µs): busy time per step over ``m``.

    Busy = computing + communication not overlapped − bubble (Send/Receive time, which includes
    the waits), from ``step_trace_time.csv`` of a profiled rank of each stage; ``None`` unless
    every stage was profiled.
    """
    if ctx.run is None or pp <= 1:
        return None
    slots: dict[int, float] = {}
    for rank in ctx.run:
        stage, _ = _stage_of(rank)
        if stage in slots or not rank.has_table("step_trace"):
            continue
        st = rank.table("step_trace")
        if st is None or st.empty or "bubble_us" not in st or st["bubble_us"].isna().all():
            continue
        busy = float((st["computing_us"].fillna(0) + st["communication_not_overlapped_us"].fillna(0) - st["bubble_us"].fillna(0)).sum())
        steps = kernel_time_by_scope(rank)[1] if bool(st["whole_run"].all()) else len(st)
        slots[stage] = busy / max(steps, 1) / m
    return [slots[s] for s in range(pp)] if all(s in slots for s in range(pp)) else None


def _stage_peaks(ctx: RuleContext, pp: int) -> list[float] | None:
    """Peak device memory (bytes) per pipeline stage from ``memory_record.csv``, when every stage has some."""
    if ctx.run is None or pp <= 1:
        return None
    peaks: dict[int, float] = {}
    for rank in ctx.run:
        if not rank.has_table("memory_record"):
            continue
        t = rank.table("memory_record")
        if t is None or t.empty:
            continue
        col = "total_allocated_mb" if "total_allocated_mb" in t and t["total_allocated_mb"].max() > 0 else "total_reserved_mb"
        ms = t[t["component"] == "MindSpore"] if (t["component"] == "MindSpore").any() else t
        stage, _ = _stage_of(rank)
        peaks[stage] = max(peaks.get(stage, 0.0), float(ms[col].max()) * 1000 * 1024)  # MindSpore's "MB" = KB / 1000
    return [peaks[s] for s in range(pp)] if all(s in peaks for s in range(pp)) else None


class _Meter:
    """Output sizes and forward kernel time per step of layer ops, measured on one rank where possible.

    IR nodes are matched to layer ops by (layer, cell path, attribute) and call order; kernels by
    their full name. Ops the rank does not hold (other pipeline stages) take the mean over the
    layers it does; with no evidence, sizes follow the config and times the assumed HBM/cube rates.
    """

    def __init__(self, ir: Any, times: dict[str, float], steps: int, structure: LayerStructure, cfg: TrainingConfig,
                 micro: int) -> None:
        self.st, self.times, self.steps, self.micro = structure, times, steps, micro
        self.sizes, self.nbytes = _symbol_sizes(cfg), dtype_bytes(cfg.compute_dtype)
        self.call = {o.id: sum(1 for p in structure.ops[:i] if p.path == o.path) for i, o in enumerate(structure.ops)}
        self.nodes: dict[tuple, list[Any]] = {}
        for n in (ir.iter_nodes() if ir is not None else ()):
            lay = layer_of_scope(n.scope)
            if lay is not None and not n.is_duplicated and not _is_backward(n):
                self.nodes.setdefault((lay, cell_path_in_layer(n.scope) + (n.instance_name or n.op.lower(),)), []).append(n)
        # Without an IR: kernels by (layer, cell path, op type), in op-number order.
        self.kernels: dict[tuple, list[float]] = {}
        if ir is None:
            for scope, us in sorted(times.items(), key=lambda kv: kv[0]):
                segs = scope.split("/")
                if any(s.startswith(("Grad_", "Gradients", "recompute_")) for s in segs) or layer_of_scope(scope) is None:
                    continue
                self.kernels.setdefault((layer_of_scope(scope), cell_path_in_layer(scope), segs[-1].split("-op")[0]), []).append(us)
        self.layers = sorted({k[0] for k in self.nodes} | {k[0] for k in self.kernels})
        self.measured = bool(times) and bool(self.nodes or self.kernels)

    def _node(self, op: LayerOp, layer: int) -> Any:
        ns = self.nodes.get((layer, op.path), [])
        k = self.call[op.id]
        return ns[k] if k < len(ns) else None

    def tensor_bytes(self, tensor: str, layer: int) -> float:
        prod = self.st.by_out.get(tensor)
        if prod is not None:
            for lay in (layer, *self.layers):
                n = self._node(prod, lay)
                if n is not None and _node_bytes(n):
                    return _node_bytes(n)
        return _tensor_size(self.st, tensor, self.sizes, self.nbytes)

    def _measured_us(self, op: LayerOp, layer: int) -> float | None:
        if not self.times:
            return None
        n = self._node(op, layer)
        if n is not None:  # no kernel under the node's name: a view, eliminated in graph_build
            return self.times.get(n.kernel_full_name or "", 0.0) / self.steps
        ks = self.kernels.get((layer, op.path[:-1], op.prim))
        if ks is not None:
            k = sum(1 for o in self.st.ops[: self.st.ops.index(op)] if o.path[:-1] == op.path[:-1] and o.prim == op.prim)
            return ks[k] / self.steps if k < len(ks) else 0.0
        return None

    def fwd_us(self, op: LayerOp, layer: int) -> float:
        """Forward kernel µs per step (all micro batches) of ``op`` in ``layer``."""
        v = self._measured_us(op, layer)
        if v is not None:
            return v
        others = [x for x in (self._measured_us(op, lay) for lay in self.layers) if x is not None]
        if others:
            return sum(others) / len(others)
        if op.prim in _VIEWS:
            return 0.0
        if op.flops:
            n = 1.0
            for part in op.flops.split("*"):
                n *= float(part) if part.isdigit() else self.sizes.get(part, 1)
            return n / max(self.sizes["mp"], 1) / (ASSUMED_CUBE_TFLOPS * 1e6) * self.micro
        moved = sum(_tensor_size(self.st, t, self.sizes, self.nbytes) for t in op.inputs if not t.startswith("param:"))
        moved += _tensor_size(self.st, op.out, self.sizes, self.nbytes)
        return moved / (ASSUMED_HBM_GBPS * 1e3) * self.micro


def _symbol_sizes(cfg: Any) -> dict[str, int]:
    h = cfg.hidden_size or 0
    f, _ = cfg.ffn_hidden_size()
    heads, kv, hd = cfg.num_heads or 1, cfg.num_kv_heads or 1, cfg.head_dim or 1
    return {"b": cfg.micro_batch_size, "s": cfg.seq_length or 1, "h": h, "f": f or 0, "q": heads * hd, "k": kv * hd,
            "mp": cfg.model_parallel}


def _tensor_size(structure: Any, tensor: str, sizes: dict[str, int], nbytes: int) -> float:
    prod = structure.by_out.get(tensor)
    if prod is None:
        if tensor == "x":
            return float(sizes["b"] * sizes["s"] * sizes["h"] * nbytes)
        return 0.0
    n = 1
    for dim in prod.shape:
        for part in dim.split("*"):
            n *= sizes.get(part, 1)
    per = 4 if prod.dtype == "fp32" else nbytes
    if prod.split:  # tensor parallelism divides this dimension across model_parallel ranks
        n //= max(sizes.get("mp", 1), 1)
    return float(n * per)
