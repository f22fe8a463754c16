"""Ground truth: the problems a simulated run really has, and what each really costs.

:func:`find_problems` lists every problem the config or an injected fault causes, with where it
shows (ranks, config key, op, IR scope, layers, source line), a plain-words fix and — when a
config change fixes it — the RFC 6902 patch (``test`` then ``replace``/``add``). The cost is
never estimated: the run is simulated again with that one problem fixed (same hardware, steps
and seed; jitter is keyed per kernel so unaffected kernels jitter identically), and

* ``cost_us_per_step`` = mean step time with the problem − mean step time without it;
* ``memory_bytes`` = peak memory with − without (``null`` when unchanged).

A recompute problem usually has a *negative* time cost (recomputing is slower) and a positive
memory cost: the memory that the configured recompute should have saved but did not.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from advisor_core.config.model_structure import LayerStructure
from advisor_core.config.recompute import effective_recompute, match_pattern, ops_of_match
from advisor_core.config.training import split_pointer
from advisor_core.simulate.faults import (
    CastRoundTrip,
    DegradedLink,
    ExpensiveMapOp,
    NDFormatOp,
    ParamTransData,
    SlowDataRank,
    SlowHostToDevice,
    SlowKernelRank,
    StrategyMismatch,
)
from advisor_core.simulate.minddata import model_pipeline

__all__ = ["ground_truth", "find_problems", "Problem", "apply_patch", "fix_select_recompute", "fusion_split_points"]


@dataclass
class Problem:
    id: str
    code: str
    title: str
    fix: str
    where: dict[str, Any]
    config_fix: list[dict[str, Any]] | None = None
    drop_faults: list[Any] = field(default_factory=list)

    def doc(self, cost: float, memory: int | None, isolated: float) -> dict[str, Any]:
        return {"id": self.id, "code": self.code, "title": self.title, "where": self.where,
                "cost_us_per_step": round(cost, 3), "memory_bytes": memory,
                "cost_us_per_step_isolated": round(isolated, 3), "fix": self.fix, "config_fix": self.config_fix}


def _where(ranks: list[int], pointer: str | None = None, op: str | None = None, scope: str | None = None,
           layers: list[int] | None = None, source: str | None = None) -> dict[str, Any]:
    return {"ranks": ranks, "config_pointer": pointer, "op": op, "ir_scope": scope, "layers": layers, "source": source}


def _replace(pointer: str, old: Any, new: Any) -> list[dict[str, Any]]:
    if old is None:
        return [{"op": "add", "path": pointer, "value": new}]
    return [{"op": "test", "path": pointer, "value": old}, {"op": "replace", "path": pointer, "value": new}]


# --------------------------------------------------------------------------------------- JSON patch
def apply_patch(doc: CommentedMap, ops: list[dict[str, Any]]) -> CommentedMap:
    """Apply RFC 6902 ``test``/``replace``/``add``/``remove`` to a copy of ``doc``."""
    out = copy.deepcopy(doc)
    for op in ops:
        parts = split_pointer(op["path"])
        parent: Any = out
        for p in parts[:-1]:
            if isinstance(parent, list):
                parent = parent[int(p)]
            else:
                if p not in parent and op["op"] == "add":
                    parent[p] = CommentedMap()
                parent = parent[p]
        last = parts[-1]
        kind = op["op"]
        value = op.get("value")
        if isinstance(value, list):
            value = CommentedSeq(value)
            value.fa.set_flow_style()
        if kind == "test":
            cur = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if _plain(cur) != _plain(op["value"]):
                raise ValueError(f"patch test failed at {op['path']}: {cur!r} != {op['value']!r}")
        elif kind in ("replace", "add"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(value)
                elif kind == "add":
                    parent.insert(int(last), value)
                else:
                    parent[int(last)] = value
            else:
                parent[last] = value
        elif kind == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, str):
        return str(v)
    return v


# --------------------------------------------------------------------------------------- helpers
def fix_select_recompute(patterns: list[str], st: LayerStructure) -> list[str]:
    """Patterns that make the intended ops really recomputed.

    A pattern naming a cell whose only op is the cell output (recomputes nothing) is replaced by
    one naming its primitive(s); for every intended op still not duplicated, the Reshapes its
    output passes through on the way to the backward (free to recompute) are added.
    """
    pats: list[str] = []
    for p in patterns:
        m = match_pattern(p, st.tree)
        if m.cells and not ops_of_match(m, st):
            for c in m.cells:
                for op in st.ops:
                    if op.path[: len(c)] == c and len(op.path) == len(c) + 1:
                        q = p + "\\." + op.path[-1]
                        if q not in pats:
                            pats.append(q)
        elif p not in pats:
            pats.append(p)
    by_id = {o.id: o for o in st.ops}
    intended: set[str] = set()
    for p in pats:
        intended |= ops_of_match(match_pattern(p, st.tree), st)
    for _ in range(8):
        configured: set[str] = set()
        for p in pats:
            configured |= ops_of_match(match_pattern(p, st.tree), st)
        eff = effective_recompute(st, configured)
        added = False
        for oid in sorted(intended - eff.duplicated):
            for u in st.consumers(by_id[oid].out):
                if u.prim == "Reshape" and u.id not in configured:
                    q = "\\.".join(u.path)
                    if q not in pats:
                        pats.append(q)
                        added = True
        if not added:
            break
    return pats


def fusion_split_points(params: list[tuple[str, Any]], buckets: int = 4) -> list[int]:
    """Parameter indices splitting the gradient bytes into ``buckets`` roughly equal fused AllReduces."""
    sizes = []
    for _, t in params:
        n = 1
        for d in t.shape:
            n *= d
        sizes.append(n)
    total = sum(sizes)
    points, acc, k = [], 0, 1
    for i, s in enumerate(sizes):
        acc += s
        while k < buckets and acc >= total * k / buckets and i + 1 < len(sizes):
            if not points or points[-1] != i + 1:
                points.append(i + 1)
            k += 1
    return points


def _scope_of(model, pred: Callable[[Any], bool]) -> str | None:  # type: ignore[no-untyped-def]
    for g in model.stages:
        for n in g.nodes:
            if pred(n):
                return n.full_name
    return None


def _ranks_with_layers(model, layers: set[int]) -> list[int]:  # type: ignore[no-untyped-def]
    out: list[int] = []
    for p in model.programs:
        if layers & set(p.graph.layers):
            out += p.ranks.tolist()
    return sorted(out)


# --------------------------------------------------------------------------------------- detection
def find_problems(model) -> list[Problem]:  # type: ignore[no-untyped-def]
    prep = model.prep
    w, cfg, doc = prep.w, prep.cfg, prep.doc
    all_ranks = list(range(w.world))
    all_layers = list(range(w.layers))
    out: list[Problem] = []

    # MD001: the data pipeline cannot keep up with the device
    pipe = model.pipeline
    if not pipe.device_bound:
        mop = pipe.op(pipe.map_op_id)
        expensive = [f for f in prep.faults if isinstance(f, ExpensiveMapOp)]
        slow_link = [f for f in prep.faults if isinstance(f, SlowHostToDevice)]
        if pipe.transfer_bound:
            root = pipe.ops[0]
            out.append(Problem(
                "MD001-host-to-device", "MD001",
                f"The host->device transfer is the bottleneck: {root.op_type}(id={root.op_id}) pushes a batch in "
                f"{pipe.push_us / 1000:.1f} ms while the pipeline produces one every "
                f"{max(o.period_us for o in pipe.ops[1:]) / 1000:.1f} ms",
                "Send fewer bytes per batch or restore the host->device link's bandwidth; more pipeline workers do not help.",
                _where(all_ranks, None, f"{root.op_type}(id={root.op_id})"), None, drop_faults=slow_link))
        elif expensive and pipe.bottleneck == pipe.map_op_id:
            f = expensive[0]
            out.append(Problem(
                "MD001-expensive-map-op", "MD001",
                f"Data pipeline is the bottleneck: {f.transform} costs {f.per_sample_us:.0f} us per sample in MapOp(id={mop.op_id})",
                f"Make the transform {f.transform} cheaper (move it offline into the dataset, or run it in C++ "
                "transforms with python_multiprocessing) so the map op keeps up with the device.",
                _where(all_ranks, None, f"MapOp(id={mop.op_id})"), None, drop_faults=[f]))
        else:
            need = _workers_needed(model)
            pointer = cfg.pointer("dataset.num_parallel_workers")
            old = cfg.get("dataset.num_parallel_workers")
            op_name = f"{pipe.op(pipe.bottleneck).name}Op(id={pipe.bottleneck})"
            out.append(Problem(
                "MD001-num-parallel-workers", "MD001",
                f"Data pipeline is the bottleneck: {op_name} runs with num_parallel_workers={w.dataset.num_parallel_workers}",
                f"Raise train_dataset.num_parallel_workers to {need} so the dataset map keeps up with the device "
                f"(the host gives each device {pipe.cores_per_device} cores).",
                _where(all_ranks, pointer, op_name), _replace(pointer, old, need)))

    # CT001: fp32 rotary embedding with a 16-bit compute dtype
    if w.rotary_fp32:
        pointer = cfg.pointer("model.rotary_dtype")
        out.append(Problem(
            "CT001-rotary-fp32", "CT001",
            f"rotary_dtype float32 with compute_dtype {w.compute_dtype} adds Cast pairs around the rotary embedding in every layer",
            f"Set model.model_config.rotary_dtype to {w.compute_dtype} (the rotary embedding then runs in the compute dtype "
            "without Casts).",
            _where(all_ranks, pointer, "attention.apply_rotary_emb", _scope_of(model, lambda n: n.op_id == "attention.apply_rotary_emb.cast_q"),
                   all_layers), _replace(pointer, cfg.get("model.rotary_dtype"), w.compute_dtype)))
    for f in prep.faults:
        if isinstance(f, CastRoundTrip):
            out.append(Problem(
                "CT001-cast-roundtrip", "CT001",
                f"Lossy fp32->fp16->fp32 Cast round trip after {f.after} in every layer",
                f"Remove the round trip at {f.source} ({f.code}); it costs two Casts per layer and loses precision.",
                _where(all_ranks, None, f.after, _scope_of(model, lambda n: (n.op_id or "").startswith("roundtrip") and n.phase == "fwd"),
                       all_layers, f.source), None, drop_faults=[f]))
        elif isinstance(f, NDFormatOp):
            out.append(Problem(
                "CT002-nd-format-op", "CT002",
                f"{f.op} only accepts ND inside a FRACTAL_NZ chain: TransData NZ->ND->NZ around it in every layer",
                f"Use a version of {f.op} that supports FRACTAL_NZ (or keep the chain in ND) so the backend inserts no TransData.",
                _where(all_ranks, None, f.op, _scope_of(model, lambda n: n.prim == "TransData" and f.op in n.key), all_layers),
                None, drop_faults=[f]))
        elif isinstance(f, ParamTransData):
            out.append(Problem(
                "CT002-param-transdata", "CT002",
                "Weights are converted ND->FRACTAL_NZ by TransData on every step instead of once",
                "Store the weights in FRACTAL_NZ (convert once at load time) so no TransData runs on parameters per step.",
                _where(all_ranks, None, "parameters", _scope_of(model, lambda n: n.prim == "TransData" and ".ptd." in n.key),
                       all_layers), None, drop_faults=[f]))
        elif isinstance(f, SlowKernelRank) and f.rank < w.world:
            out.append(Problem(
                f"CL001-slow-kernel-rank{f.rank}", "CL001",
                f"Rank {f.rank}'s {f.op_type or 'all'} kernels run {f.factor:g}x slower than on its peers",
                f"Check or replace rank {f.rank}'s device (AI core frequency, temperature); its peers wait for it.",
                {**_where([f.rank], None, f"rank {f.rank}"), "cause": "compute", "op_type": f.op_type}, None,
                drop_faults=[f]))
        elif isinstance(f, SlowDataRank) and f.rank < w.world:
            out.append(Problem(
                f"CL001-slow-data-rank{f.rank}", "CL001",
                f"Rank {f.rank}'s host delivers its batch {f.extra_wait_us / 1000:g} ms late every step",
                f"Fix rank {f.rank}'s host or data (disk, dataset shard, host CPU); its peers wait for it.",
                {**_where([f.rank], None, f"rank {f.rank}"), "cause": "data wait"}, None, drop_faults=[f]))
        elif isinstance(f, DegradedLink) and f.rank < w.world:
            out.append(Problem(
                f"CL002-degraded-link-rank{f.rank}", "CL002",
                f"Rank {f.rank}'s {f.link or 'every'} link moves data {f.factor:g}x slower than its peers'",
                f"Check or replace rank {f.rank}'s {f.link or ''} link; the collectives of its groups wait for it.",
                {**_where([f.rank], None, f"rank {f.rank}"), "link": f.link}, None, drop_faults=[f]))
        elif isinstance(f, StrategyMismatch) and w.mp > 1:
            out.append(Problem(
                "CM001-redistribution", "CM001",
                f"Shard strategy of {f.op} disagrees with its neighbours: redistribution AllGather/Split/Concat/StridedSlice in every layer",
                f"Give {f.op} the strategy its neighbours use (split the model-parallel axis: ((dp, 1, mp), (dp, 1, mp))) so no tensor "
                "redistribution is inserted.",
                _where(all_ranks, None, f.op, _scope_of(model, lambda n: (n.instance or "").startswith("redistribution_op_")), all_layers),
                None, drop_faults=[f]))

    # AL001: dimensions (per device, after model-parallel slicing) not multiples of 16
    explicit_head = cfg.located("model.head_dim").present
    last_stage = model.programs[-1].ranks.tolist()
    for key, label, dim, split, extra, node_id, ranks, layers in (
            ("model.hidden_size", "hidden_size", w.hidden, 1, 1 if explicit_head else w.heads, "attention.wq.matmul",
             all_ranks, all_layers),
            ("model.intermediate_size", "intermediate_size", w.ffn, w.mp, 1, "feed_forward.w2.matmul", all_ranks, all_layers),
            ("model.vocab_size", "vocab_size", w.vocab, w.mp, 1, "head.lm.matmul", last_stage, None)):
        if (dim // split) % 16 == 0:
            continue
        step = 16 * split
        step = step * extra // _gcd(step, extra)
        new = -(-dim // step) * step
        pointer = cfg.pointer(key)
        old = cfg.get(key)
        per = f" ({dim // split} per device with model_parallel {split})" if split > 1 else ""
        out.append(Problem(
            f"AL001-{label.replace('_', '-')}", "AL001",
            f"{label} {dim}{per} is not a multiple of 16: MatMuls on it pay the unaligned penalty and TransData padding",
            f"Set model.model_config.{label} to {new} (a multiple of {step}, so every device's slice is a multiple of 16).",
            _where(sorted(ranks), pointer, "lm_head.matmul" if node_id == "head.lm.matmul" else node_id, _scope_of(model, lambda n, i=node_id: (n.op_id == i or n.key == i)
                                                              and n.phase in ("fwd", "head")), layers),
            _replace(pointer, old, new)))

    # CM001: one fused gradient AllReduce after the whole backward
    if w.dp > 1 and w.fusion_config is None:
        params = model.stages[0].params
        points = fusion_split_points(params)
        if points:
            pointer = cfg.pointer("parallel.all_reduce_fusion_config")
            out.append(Problem(
                "CM001-allreduce-fusion", "CM001",
                "All gradients are reduced by one fused AllReduce after the last gradient: the whole transfer is exposed in the step tail",
                f"Set parallel.all_reduce_fusion_config to {points} so gradient buckets start during the backward pass.",
                _where(all_ranks, pointer, "AllReduce", _scope_of(model, lambda n: n.key.startswith("bucket"))),
                _replace(pointer, None, points)))

    # RC001: configured recompute that MindSpore does not perform
    # Only ops that would keep memory matter: a configured Reshape that is not duplicated costs nothing
    # (the seed's own fix configures both Reshapes of w2, and the output one is never recomputed).
    st = prep.structure
    by_id = {o.id: o for o in st.ops}
    bad_layers = []
    one_op_cells = [u for u in prep.plan.patterns if u.kind == "select" and u.match.cells and not ops_of_match(u.match, st)]
    for layer in range(w.layers):
        conf = prep.plan.configured_ops(layer, st)
        dup = effective_recompute(st, conf).duplicated
        missed = {o for o in conf - dup if by_id[o].prim != "Reshape"}
        for u in one_op_cells:
            if layer in u.layers:
                cell_ops = {o.id for c in u.match.cells for o in st.ops if o.path[: len(c)] == c}
                missed |= {o for o in cell_ops if o not in dup and by_id[o].prim != "Reshape"}
        if missed:
            bad_layers.append(layer)
    if bad_layers:
        loc = cfg.located("recompute.select_recompute")
        value = loc.value
        fix_ops = None
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            fixed = fix_select_recompute([str(v) for v in value], prep.structure)
            if fixed != [str(v) for v in value]:
                fix_ops = _replace(loc.pointer or "/recompute_config/select_recompute", [str(v) for v in value], fixed)
        conf0 = prep.plan.configured_ops(bad_layers[0], prep.structure)
        eff = effective_recompute(prep.structure, conf0)
        why = "; ".join(f"{k}: {v}" for k, v in sorted(eff.not_recomputed.items()))
        cells = ", ".join(u.pattern for u in one_op_cells)
        title = "select_recompute ops are configured but not recomputed"
        fix = "Name the primitives and the Reshapes between them"
        if fix_ops:
            fix += f": select_recompute: {fix_ops[-1]['value']}"
        details = []
        if why:
            details.append(why)
        if cells:
            details.append(f"pattern(s) {cells} name a one-op cell, which recomputes nothing")
        out.append(Problem(
            "RC001-select-recompute", "RC001", title + (" (" + "; ".join(details) + ")" if details else ""), fix + ".",
            _where(_ranks_with_layers(model, set(bad_layers)), loc.pointer, sorted(conf0)[0] if conf0 else None,
                   _scope_of(model, lambda n: n.layer == bad_layers[0] and n.op_id in conf0 and n.phase == "fwd"), bad_layers),
            fix_ops))
    return out


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _workers_needed(model) -> int:  # type: ignore[no-untyped-def]
    """Smallest num_parallel_workers that makes the device (not the data) the bottleneck with 20 % headroom
    (so fixing other problems, which shortens the device step, does not make the data the bottleneck again),
    capped by the host's cores per device."""
    from dataclasses import replace

    prep = model.prep
    busy = max(int((model.schedule.step_end[s] - model.schedule.step_start[s]).mean() - model.schedule.gap_ns)
               for s in range(prep.w.pp))
    cap = prep.hw.host_cores_per_device
    for n in range(1, cap + 1):
        pm = model_pipeline(replace(prep.w.dataset, num_parallel_workers=n), prep.hw, prep.faults, busy)
        if pm.period_us <= 0.8 * busy / 1000.0:
            return n
    return cap


def ground_truth(model, *, scenario: str, name: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The ``expected.json`` document (schema: ``expected.schema.json``)."""
    from advisor_core.simulate.engine import prepare, run_model

    prep = model.prep
    step = model.step_time_us()
    peak = model.peak_memory_bytes()
    base_mean = model.mean_step_time_us()
    problems = []
    found = find_problems(model)

    def variant(fixed: list[Problem]):  # type: ignore[no-untyped-def]
        doc = prep.doc
        for pr in fixed:
            if pr.config_fix:
                doc = apply_patch(doc, pr.config_fix)
        drop = [d for pr in fixed for d in pr.drop_faults]
        faults = [f for f in prep.faults if not any(f is d for d in drop)]
        return run_model(prepare(doc, prep.hw, faults), model.steps, model.seed)

    clean = variant(found) if len(found) > 1 else None
    for pr in found:
        fixed = variant([pr])
        cost = base_mean - fixed.mean_step_time_us()
        fpeak = fixed.peak_memory_bytes()
        mem = max(peak[r] - fpeak.get(r, peak[r]) for r in peak)
        # the same problem alone on an otherwise fixed run (no other problem masking or amplifying it)
        isolated = cost if clean is None else variant([q for q in found if q is not pr]).mean_step_time_us() - clean.mean_step_time_us()
        problems.append(pr.doc(cost, int(mem) if mem else None, isolated))
    pipe = model.pipeline
    return {
        "schema_version": 1,
        "scenario": scenario,
        "seed": model.seed,
        "ranks": prep.w.world,
        "steps": model.steps,
        "config": f"config/{name}.yaml",
        "step_time_us": {"mean": round(base_mean, 3), "per_rank": {str(r): round(v, 3) for r, v in step.items()}},
        "peak_memory_bytes": {"max": max(peak.values()), "per_rank": {str(r): v for r, v in peak.items()}},
        "problems": problems,
        "metrics": {
            "data_gap_us": round(model.schedule.gap_ns / 1000.0, 3),
            "data_pipeline_period_us": round(pipe.period_us, 3),
            "data_bottleneck": f"{pipe.op(pipe.bottleneck).name}(id={pipe.bottleneck})",
            "exposed_tail_us": {str(r): round(v, 3) for r, v in model.tail_us().items()},
            "layout": {"data_parallel": prep.w.dp, "model_parallel": prep.w.mp, "pipeline_stage": prep.w.pp,
                       "micro_batches": prep.w.micro_batches, "layers": prep.w.layers},
        },
    }
