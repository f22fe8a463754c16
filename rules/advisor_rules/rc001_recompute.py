"""RC001: operators configured for recomputation that MindSpore does not recompute."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import Field

from advisor_core.config.model_structure import llama_layer
from advisor_core.config.recompute import effective_recompute, resolve_recompute
from advisor_core.config.training import dtype_bytes
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
    cell_path_in_layer,
    ir_location,
    kernel_time_by_scope,
    layer_of_scope,
    pattern_for,
    plain,
    tensor_bytes,
)

_PASS_THROUGH = {"Reshape", "Cast", "Transpose", "ExpandDims", "Squeeze", "Flatten", "Depend", "TupleGetItem", "MakeTuple"}


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
    freed_bytes: float = 0.0  # per layer, per micro batch
    extra_nodes: list[Any] = field(default_factory=list)  # IR nodes (forward) to be recomputed once fixed
    nodes: list[Any] = field(default_factory=list)


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
        fine-grained multi-copy is off — the seed's Llama2 case); no backward op
        needs its output at all (recomputing it saves nothing); or the pattern names
        a cell whose only node is its output (a recomputed cell keeps its output).
        Without an IR, the same analysis runs on MindFormers' Llama layer structure
        and the config.

    Why
        Select recompute exists to trade a little forward time for activation
        memory. A pattern that is not effective costs nothing and saves nothing —
        the memory you budgeted for is not there, and a larger batch or fewer full
        recompute layers you planned on will not fit.

    Example
        ``select_recompute: ['feed_forward\\.mul', 'feed_forward\\.w1\\.activation\\.silu']``
        with fine-grained multi-copy off: Mul and SiLU have ``recompute: Bool(1)``
        but no duplicated copy, because ``feed_forward.w1.reshape`` (SiLU → Mul) and
        ``feed_forward.w2.reshape`` (Mul → w2) are not recomputed.

    Fix
        Add the missing patterns (``'feed_forward\\.w1\\.reshape'``,
        ``'feed_forward\\.w2\\.reshape'``), or name the primitive instead of the cell
        (``'feed_forward\\.w1\\.activation\\.silu'`` for ``…\\.activation``), in the
        form the config already uses (list, per-stage list or dict). The finding
        states both effects: peak memory saved and the forward time the recompute
        adds (the patch is unsafe: a memory/time trade-off).
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
        ir = ctx.ir_graph("frontend")
        if ir is not None and any(n.is_recompute_configured for n in ir.iter_nodes()):
            issues = self._from_ir(ir)
            source = "IR"
        elif ctx.config is not None and ctx.config.located("recompute.select_recompute").present:
            issues = self._from_config(ctx)
            source = "config"
            ir = None
        else:
            ctx.skip("no op is configured for recomputation (no recompute: Bool(1) in the IR, no select_recompute)")
            return
        if not issues:
            ctx.skip(f"every configured op is recomputed ({source})")
            return
        f = self._finding(ctx, issues, ir, source)
        if f is not None:
            yield f

    # -- from the IR ------------------------------------------------------------------------------
    @staticmethod
    def _is_backward(n: Any) -> bool:
        scope = n.scope or ""
        return bool(n.forward_unique_id) or scope.startswith("Gradients/") or n.cnode_attrs.get("target_grad") is True

    def _from_ir(self, ir: Any) -> list[_Issue]:
        nodes = list(ir.iter_nodes())
        consumers: dict[int, list[Any]] = {}
        producer_of: dict[int, list[Any]] = {}
        for n in nodes:
            for ref in n.operand_refs:
                p = ir.resolve(n, ref) if ref.kind in ("node", "crossref") else None
                if p is not None and hasattr(p, "op"):
                    consumers.setdefault(id(p), []).append(n)
                    producer_of.setdefault(id(n), []).append(p)
        dup_keys = {n.recompute_key for n in nodes if n.is_duplicated and n.recompute_key}
        configured = [n for n in nodes if n.is_recompute_configured and not n.is_duplicated and not self._is_backward(n)]
        conf_ids = {id(n) for n in configured}
        issues: dict[tuple, _Issue] = {}

        def read_by_backward(x: Any) -> bool:
            return any(self._is_backward(c) for c in consumers.get(id(x), []))

        # A primitive used twice in a cell (Linear's reshape in and out) is effective when any of
        # its calls in that layer is recomputed: judge per (layer, cell path, attribute).
        effective: set[tuple] = set()
        for x in configured:
            if x.recompute_key and x.recompute_key in dup_keys:
                effective.add((layer_of_scope(x.scope), cell_path_in_layer(x.scope), x.instance_name or x.op.lower()))
        for x in configured:
            if x.recompute_key and x.recompute_key in dup_keys:
                continue  # recomputed
            if (layer_of_scope(x.scope), cell_path_in_layer(x.scope), x.instance_name or x.op.lower()) in effective:
                continue
            path = cell_path_in_layer(x.scope)
            attr = x.instance_name or x.op.lower()
            key = (path, attr)
            # Walk forward through non-configured pass-through ops to the tensor backward reads.
            blockers: list[Any] = []
            frontier = [x]
            seen = {id(x)}
            reached = False
            while frontier:
                nxt = []
                for n in frontier:
                    for c in consumers.get(id(n), []):
                        if self._is_backward(c) or id(c) in seen or c.is_duplicated:
                            continue
                        seen.add(id(c))
                        if id(c) in conf_ids:
                            continue
                        if c.op in _PASS_THROUGH and c.op not in ("Depend", "MakeTuple", "TupleGetItem"):
                            if read_by_backward(c):
                                blockers.append(c)
                                reached = True
                            else:
                                nxt.append(c)
                frontier = nxt
            if reached:
                adds = sorted({pattern_for(cell_path_in_layer(b.scope), b.instance_name or b.op.lower()) for b in blockers})
                names = ", ".join(sorted({f"{'.'.join(cell_path_in_layer(b.scope) + ((b.instance_name or b.op),))} ({b.op})" for b in blockers}))
                issue = issues.setdefault(key, _Issue(path + (attr,), x.op, f"its output reaches the backward pass only through {names}, which is not recomputed", "blocked", adds))
                issue.extra_nodes += blockers
                for b in blockers:
                    issue.freed_bytes += self._bytes(b) / max(1, len({layer_of_scope(b.scope) for b in blockers}))
            elif x.cnode_attrs.get("recompute") is False or (x.scope or "").startswith("recompute_") and x.cnode_attrs.get("recompute") is False:
                issue = issues.setdefault(key, _Issue(path + (attr,), x.op, "it is the output of a recomputed cell, which MindSpore keeps", "cell-output"))
            else:
                issue = issues.setdefault(key, _Issue(path + (attr,), x.op, "no backward op needs its output, so recomputing it saves nothing", "not-needed"))
            issue.nodes.append(x)
            lay = layer_of_scope(x.scope)
            if lay is not None:
                issue.layers.add(lay)
            if issue.kind == "blocked":
                issue.extra_nodes.append(x)
        # A recomputed cell whose every node is its kept output: the pattern named a one-op cell.
        for n in nodes:
            if (n.scope or "").startswith("recompute_") and n.cnode_attrs.get("recompute") is False and not n.is_duplicated:
                cell = cell_path_in_layer(n.scope)
                siblings = [m for m in nodes if cell and cell_path_in_layer(m.scope) == cell and (m.scope or "").startswith("recompute_")]
                if cell and all(m.cnode_attrs.get("recompute") is False for m in siblings):
                    attr = n.instance_name or n.op.lower()
                    key = (cell, "<cell>")
                    issue = issues.setdefault(key, _Issue(cell, n.op, f"the pattern names the cell {'.'.join(cell)}, whose only node ({n.op}) is its output; a recomputed cell keeps its output", "cell-output"))
                    issue.replace_pattern = (pattern_for(cell[:-1], cell[-1]), pattern_for(cell, attr))
                    issue.nodes.append(n)
                    lay = layer_of_scope(n.scope)
                    if lay is not None:
                        issue.layers.add(lay)
        return list(issues.values())

    @staticmethod
    def _bytes(n: Any) -> float:
        t = n.out_types[0] if n.out_types else None
        return tensor_bytes(getattr(t, "shape", None), getattr(t, "dtype", None)) or 0.0

    # -- from the config and the layer model -------------------------------------------------------
    def _from_config(self, ctx: RuleContext) -> list[_Issue]:
        cfg = ctx.config
        fgi = cfg.at("/model/model_config/fine_grain_interleave", 1)
        structure = llama_layer(fine_grain_interleave=isinstance(fgi, int) and not isinstance(fgi, bool) and fgi > 1)
        plan = resolve_recompute(cfg, structure)
        issues: dict[tuple, _Issue] = {}
        sizes = _symbol_sizes(cfg)
        nbytes = dtype_bytes(cfg.compute_dtype)
        for use in plan.patterns:
            if use.kind == "select" and use.match.cells and not use.match.prims:
                cells = use.match.cells
                for c in cells:
                    ops_in = [o for o in structure.ops if o.path[: len(c)] == c and len(o.path) > len(c)]
                    if len(ops_in) == 1:
                        op = ops_in[0]
                        issue = issues.setdefault((c, "<cell>"), _Issue(c, op.prim, f"the pattern names the cell {'.'.join(c)}, whose only node ({op.prim}) is its output; a recomputed cell keeps its output", "cell-output"))
                        issue.replace_pattern = (use.pattern, pattern_for(c, op.attr))
                        issue.layers |= set(use.layers)
        replaces = dict(i.replace_pattern for i in issues.values() if i.replace_pattern)
        if replaces:
            # Judge the rest as if the cell patterns already named their primitive: a primitive can
            # itself be blocked (SiLU behind Linear's reshape), and the patch must fix both at once.
            import copy

            from advisor_core.config.training import TrainingConfig

            data = copy.deepcopy(plain(cfg.data))
            sel = data["recompute_config"]["select_recompute"]
            data["recompute_config"]["select_recompute"] = _replace(sel, replaces)
            plan = resolve_recompute(TrainingConfig(data, cfg.path), structure)
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
                key = (op.path[:-1], op.attr)
                blockers = [u for u in structure.consumers(op.out) if u.id not in conf]
                kind = "blocked" if "reaches the backward" in why else "not-needed"
                adds = sorted({pattern_for(b.path[:-1], b.attr) for b in blockers if b.prim in _PASS_THROUGH}) if kind == "blocked" else []
                issue = issues.setdefault(key, _Issue(op.path, op.prim, why, kind, adds))
                issue.layers.add(layer)
            if any(i.kind == "blocked" for i in issues.values()):
                # Memory the fix would free: what the fixed configuration stops saving.
                fixed = set(conf)
                for i in issues.values():
                    for p in i.add_patterns:
                        from advisor_core.config.recompute import match_pattern, ops_of_match

                        fixed |= ops_of_match(match_pattern(p, structure.tree), structure)
                after = effective_recompute(structure, fixed)
                freed = sum(_tensor_size(structure, t, sizes, nbytes) for t in eff.saved_after - after.saved_after)
                added = sum(_tensor_size(structure, t, sizes, nbytes) for t in after.saved_after - eff.saved_after)
                for i in issues.values():
                    if i.kind == "blocked":
                        i.freed_bytes = max(freed - added, 0.0) / max(1, sum(1 for j in issues.values() if j.kind == "blocked"))
                        i.extra_nodes = sorted(after.duplicated - eff.duplicated)
        return list(issues.values())

    # -- finding ---------------------------------------------------------------------------------
    def _finding(self, ctx: RuleContext, issues: list[_Issue], ir: Any, source: str) -> Finding | None:
        cfg = ctx.config
        rank = next(iter(ctx.run), None) if ctx.run is not None else None
        times, steps = kernel_time_by_scope(rank) if rank is not None else ({}, 1)
        step_us = ctx.step_time_us(rank) if rank is not None else None
        in_flight = cfg.pipeline_stages if (cfg is not None and cfg.pipeline_stages > 1) else 1
        layers_total = len(set().union(*(i.layers for i in issues))) or 1
        freed = 0.0
        for i in issues:
            per_layer = i.freed_bytes
            freed += per_layer * (len(i.layers) if source == "config" else 1) * in_flight
        if source == "IR":
            # IR holds every layer of the rank: freed_bytes were summed per blocker node already.
            freed = sum(self._bytes(b) for i in issues for b in {id(x): x for x in i.extra_nodes if x.op in _PASS_THROUGH}.values()) * in_flight
        extra_us = None
        if source == "IR" and times:
            nodes = {id(x): x for i in issues for x in i.extra_nodes}.values()
            measured = [times[n.kernel_full_name] for n in nodes if n.kernel_full_name in times]
            extra_us = sum(measured) / steps if measured else None

        lines = []
        for i in sorted(issues, key=lambda x: ".".join(x.op_path)):
            lay = f" in {len(i.layers)} layer(s)" if i.layers else ""
            lines.append(f"{'.'.join(i.op_path)} ({i.prim}){lay}: {i.reason}")
        msg = ["Configured for recomputation but not recomputed: " + "; ".join(lines) + "."]
        if freed:
            msg.append(f"Fixing it frees about {freed / 2**20:.1f} MiB of activations per rank at peak"
                       + (f" ({in_flight} micro-batches in flight)" if in_flight > 1 else "") + ".")
        if extra_us is not None:
            msg.append(f"It costs {extra_us:.1f} µs more forward work per step (the recomputed ops' kernel time).")
        patch = self._patch(ctx, issues) if cfg is not None else None
        if patch is None and cfg is None:
            adds = sorted({p for i in issues for p in i.add_patterns})
            if adds:
                msg.append("Add to select_recompute: " + ", ".join(repr(a) for a in adds) + ".")
        locations: list[Location] = []
        if cfg is not None:
            loc = ctx.config_location("recompute.select_recompute")
            if loc:
                locations.append(loc)
        if ir is not None:
            for i in issues:
                for n in i.nodes[:2]:
                    locations.append(ir_location(str(ir.path), n, note="configured, not recomputed"))
        share_mem = 100.0 * freed / (self.options.device_memory_gb * 2**30) if freed else 0.0
        sev = Severity.MEDIUM if share_mem >= 1.0 or any(i.kind == "blocked" for i in issues) else Severity.LOW
        return Finding(
            code=self.code,
            rule=self.name,
            title=f"{len(issues)} recompute setting(s) have no effect"
            + (f" ({freed / 2**20:.0f} MiB of activation memory not saved)" if freed else ""),
            message=" ".join(msg),
            severity=sev,
            saving_us=-extra_us if extra_us is not None else None,
            step_time_us=step_us,
            confidence=0.9 if source == "IR" else 0.6,
            memory_delta_bytes=-freed if freed else None,
            evidence=[
                Evidence(name="configured_not_recomputed", value=sum(len(i.nodes) or len(i.layers) for i in issues), source=source),
                Evidence(name="layers", value=layers_total),
            ]
            + ([Evidence(name="activation_memory_not_saved", value=round(freed), unit="bytes")] if freed else [])
            + ([Evidence(name="recompute_cost_per_step", value=round(extra_us, 3), unit="µs")] if extra_us is not None else []),
            locations=locations,
            patches=[patch] if patch else [],
            tags=list(self.tags),
        )

    def _patch(self, ctx: RuleContext, issues: list[_Issue]) -> Any:
        cfg = ctx.config
        loc = cfg.located("recompute.select_recompute")
        if not loc.present:
            return None
        value = plain(loc.value)
        adds = sorted({p for i in issues for p in i.add_patterns})
        replaces = [i.replace_pattern for i in issues if i.replace_pattern]
        if not adds and not replaces:
            return None
        from advisor_core.config.recompute import DEFAULT_SELECT

        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            new = _replace(value, dict(replaces))
            new += [a for a in adds if a not in new]
        elif isinstance(value, dict):
            new = _replace(value, dict(replaces))
            template = next((v for k, v in value.items() if "feed_forward" in k), next(iter(value.values()), True))
            for a in adds:
                new.setdefault(a, template)
        elif value is True:
            new = [dict(replaces).get(v, v) for v in DEFAULT_SELECT] + adds
        elif isinstance(value, list):  # per-stage counts of the default patterns → dict form keeps the counts
            new = {p: value for p in [dict(replaces).get(v, v) for v in DEFAULT_SELECT] + adds}
        else:
            return None
        if new == value:
            return None
        return ctx.config_patch(
            "make select_recompute effective: " + ", ".join([f"add {a!r}" for a in adds] + [f"{o!r} → {n!r}" for o, n in replaces]),
            [("recompute.select_recompute", new)],
            safety=Safety.UNSAFE,
            description="recomputes the ops that block the configured ones: less activation memory, more forward time",
        )


def _replace(value: Any, replaces: dict[str, str]) -> Any:
    """``select_recompute`` with cell patterns swapped for primitive patterns, form kept."""
    if isinstance(value, list):
        return [replaces.get(v, v) if isinstance(v, str) else v for v in value]
    if isinstance(value, dict):
        return {replaces.get(k, k): v for k, v in value.items()}
    return value


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

