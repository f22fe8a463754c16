"""Helpers shared by the built-in rules (not a rule; rules never import each other)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from advisor_core.engine.findings import Location, Severity

if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.ir.model import IRNode

# msprof-analyze's priority model: share of the step time.
HIGH_SHARE_PCT = 5.0
MEDIUM_SHARE_PCT = 3.0

# Assumed when a rule must estimate a time without a profile (documented in each rule's help).
ASSUMED_HBM_GBPS = 1600.0 * 0.6  # 910B-class HBM at a realistic 60 % efficiency
ASSUMED_CUBE_TFLOPS = 313.0 * 0.5  # fp16/bf16 cube at 50 % efficiency

DTYPE_BYTES = {
    "Float64": 8, "Float32": 4, "Float16": 2, "BFloat16": 2, "Int64": 8, "Int32": 4, "Int16": 2, "Int8": 1,
    "UInt8": 1, "Bool": 1, "DT_FLOAT": 4, "DT_FLOAT16": 2, "DT_BF16": 2, "DT_DOUBLE": 8, "DT_INT64": 8, "DT_INT32": 4,
    "DT_INT8": 1, "DT_BOOL": 1, "FLOAT": 4, "FLOAT16": 2, "BF16": 2,
}
# Higher = more precise. Used to tell lossy from lossless cast round trips.
PRECISION = {"Float64": 5, "Float32": 4, "BFloat16": 2, "Float16": 2, "Int64": 3, "Int32": 3, "Int16": 1, "Int8": 0, "UInt8": 0, "Bool": 0}

_LAYER_SEG = re.compile(r"^(\d+)-\w+$")
_CELL_SEG = re.compile(r"^(?P<attr>[A-Za-z_]\w*)-(?P<cls>\w+)$")
_OP_SEG = re.compile(r"^(?P<op>\w+)-op\d+$")


def severity_for_share(pct: float | None, *, floor: Severity = Severity.LOW) -> Severity:
    """msprof-analyze's model: ≥ 5 % of the step is high, ≥ 3 % medium."""
    if pct is None:
        return floor
    if pct >= HIGH_SHARE_PCT:
        return Severity.HIGH
    if pct >= MEDIUM_SHARE_PCT:
        return Severity.MEDIUM
    return floor


def share_pct(part_us: float | None, whole_us: float | None) -> float | None:
    if part_us is None or not whole_us:
        return None
    return 100.0 * part_us / whole_us


def layer_of_scope(scope: str | None) -> int | None:
    """``…/layers-CellList/3-LLamaDecodeLayer/…`` → 3 (``None`` outside a layer list)."""
    if not scope:
        return None
    for seg in scope.split("/"):
        m = _LAYER_SEG.match(seg)
        if m:
            return int(m.group(1))
    return None


def cell_path_in_layer(scope: str | None) -> tuple[str, ...]:
    """Attribute names of the cells between the decoder layer and the op.

    ``…/0-LLamaDecodeLayer/feed_forward-LlamaFeedForward/w1-Linear/Reshape-op3`` →
    ``("feed_forward", "w1")`` (what ``select_recompute`` patterns match).
    """
    if not scope:
        return ()
    segs = scope.split("/")
    start = None
    for i, seg in enumerate(segs):
        if _LAYER_SEG.match(seg):
            start = i + 1
    if start is None:
        # No decoder layer (a small net): the cells below the training wrappers.
        start = 0
        for i, seg in enumerate(segs):
            if seg in ("Default", "recompute_Default", "Gradients") or seg.startswith(("network-", "_backbone-", "_VirtualDatasetCell")):
                start = i + 1
    out = []
    for seg in segs[start:]:
        m = _CELL_SEG.match(seg)
        if m and not _OP_SEG.match(seg):
            out.append(m.group("attr"))
    return tuple(out)


def layer_prefix(scope: str | None) -> str | None:
    """The scope up to and including the decoder layer segment."""
    if not scope:
        return None
    segs = scope.split("/")
    for i, seg in enumerate(segs):
        if _LAYER_SEG.match(seg):
            return "/".join(segs[: i + 1])
    return None


def pattern_for(cell_path: Iterable[str], attr: str) -> str:
    """A ``select_recompute`` pattern: attribute names joined by the literal ``\\.``."""
    return "\\.".join([*cell_path, attr])


def user_source(node: "IRNode") -> tuple[str, int, str] | None:
    """The model-code line that created ``node``: the innermost ``# In file`` frame outside MindSpore itself."""
    best = None
    for src in node.sources or []:
        f = src.file or ""
        if "/site-packages/mindspore/" in f or "/mindspore/ops/" in f or "/mindspore/nn/" in f:
            continue
        if src.line is None:
            continue
        if src.line_end is not None and src.line_end != src.line and best is not None:
            continue  # a function-definition span; the statement inside is more precise
        best = (f, int(src.line), (src.code or "").strip())
    return best


def source_location(node: "IRNode", note: str | None = None) -> Location | None:
    src = user_source(node)
    if src is None:
        return None
    return Location(kind="source", path=src[0], line=src[1], note=note or src[2] or None)


def ir_location(path: str, node: "IRNode", note: str | None = None) -> Location:
    idx = "return" if node.index is None else node.index
    return Location(kind="ir", path=path, line=node.line, node=f"@{node.graph}:%{idx}", op=node.scope, note=note)


def tensor_bytes(shape: Iterable[int] | None, dtype: str | None) -> float | None:
    if shape is None:
        return None
    n = 1
    for d in shape:
        if d is None or d < 0:
            return None
        n *= d
    return float(n * DTYPE_BYTES.get(dtype or "", 2))


def plain(value: Any) -> Any:
    """ruamel scalars/containers → plain Python."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


_KERNEL_SCOPE = re.compile(r"^(?P<scope>.*?/[A-Za-z]\w*-op\d+)(?:/.*)?$")


def kernel_scope(name: str) -> str | None:
    """The IR full name a kernel was launched for.

    MindSpore writes ``<launch op full name>/<device kernel name>``
    (``Default/…/MatMul-op3/aclnnMatmul_MatMulV3Common_MatMulV3``); a bare full name
    (CPU profiler, data dump) is its own scope; GE names (``trans_TransData_13``) have none.
    """
    m = _KERNEL_SCOPE.match(name)
    return m.group("scope") if m else None


def kernel_time_by_scope(rank: Any) -> tuple[dict[str, float], int]:
    """Total kernel µs per IR full name over the profile, and the number of steps it covers."""
    if not rank.has_table("kernels"):
        return {}, 1
    cols = rank.columns("kernels") or []
    want = [c for c in ("name", "duration_us", "step_id") if c in cols]
    k = rank.table("kernels", want)
    if k is None or k.empty:
        return {}, 1
    steps = int(k["step_id"].dropna().nunique()) if "step_id" in k else 0
    if not steps:
        from advisor_core.analyses.step_time import step_windows

        w = step_windows(rank)
        steps = len(w) if w is not None else 1
    scopes = k["name"].astype(str).map(kernel_scope)
    sums = k.assign(scope=scopes).dropna(subset=["scope"]).groupby("scope")["duration_us"].sum()
    return {str(s): float(v) for s, v in sums.items()}, max(steps, 1)


# -- pipeline stages and parameters (AL001, CM001) ----------------------------------------------


def pipeline_stage_of(rank: Any, pipeline_stages: int = 1, world_size: int | None = None) -> int:
    """Pipeline stage of a profiled rank.

    The ``pp`` group of ``profiler_metadata.json`` ``parallel_group_info`` gives it as the
    rank's index in its pipeline group; without it MindSpore's layout is assumed: stage
    ``s`` holds the contiguous rank block ``[s·w/pp, (s+1)·w/pp)``.
    """
    layout = getattr(rank, "parallel", None)
    for g in getattr(layout, "groups", None) or []:
        if (g.group_name or "").lower() in ("pp", "pipeline") and g.group_rank is not None:
            return int(g.group_rank)
    pp = (getattr(layout, "pipeline_stages", None) or pipeline_stages or 1) if layout is not None else (pipeline_stages or 1)
    world = (getattr(layout, "world_size", None) if layout is not None else None) or world_size
    rid = getattr(rank, "rank_id", None)
    if pp <= 1 or not world or rid is None:
        return 0
    return min(int(rid) // max(world // pp, 1), pp - 1)


def stage_representatives(run: Any, pipeline_stages: int = 1, world_size: int | None = None) -> list[tuple[int, Any]]:
    """One profiled rank per pipeline stage (the lowest rank id), in stage order.

    Ranks of one stage run the same program (data/tensor-parallel peers), so one of them
    stands for the stage; reading one rank per stage keeps large clusters cheap.
    """
    reps: dict[int, Any] = {}
    for r in run or []:
        s = pipeline_stage_of(r, pipeline_stages, world_size)
        if s not in reps or (r.rank_id is not None and (reps[s].rank_id is None or r.rank_id < reps[s].rank_id)):
            reps[s] = r
    return sorted(reps.items(), key=lambda kv: kv[0])


_OPTIMIZER_PREFIXES = ("adam_m.", "adam_v.", "moment1.", "moment2.", "accu_grads.", "global_step", "learning_rate",
                       "scale_sense", "beta1_power", "beta2_power", "current_iterator_step", "last_overflow_iterator_step",
                       "epoch_num", "step_num", "loss_scale")


def is_model_weight(name: str) -> bool:
    """A trainable model parameter name (not an optimizer state, counter or loss-scale value)."""
    return "." in name and not name.startswith(_OPTIMIZER_PREFIXES)


def ir_parameters(ir: Any) -> list[tuple[str, tuple[int, ...], str | None]]:
    """``(name, per-rank shape, dtype)`` of every parameter with a default value in an IR file."""
    out = []
    for p in getattr(ir, "params", None) or []:
        if not (getattr(p, "is_weight", False) or getattr(p, "has_default", False)):
            continue
        shape = getattr(p.type, "shape", None) if p.type is not None else None
        if shape is None or any(d is None or d < 0 for d in shape):
            continue
        out.append((p.name or "", tuple(int(d) for d in shape), getattr(p.type, "dtype", None)))
    return out


def llama_parameters(cfg: Any, stage: int | None = None) -> list[tuple[str, tuple[int, ...], str | None]]:
    """Per-rank ``(name, shape, dtype)`` of a MindFormers Llama model from its config, in first-use order.

    Column-parallel weights (wq/wk/wv/w1/w3, lm_head) are split on their output dim,
    row-parallel ones (wo/w2) on their input dim, by ``model_parallel``; with pipeline
    parallel, ``stage`` selects that stage's layers (embedding on the first, final norm and
    head on the last). Used when no IR dump lists the parameters.
    """
    h, layers = cfg.hidden_size, cfg.num_layers
    if not h or not layers:
        return []
    mp, pp = max(cfg.model_parallel, 1), max(cfg.pipeline_stages, 1)
    f, _ = cfg.ffn_hidden_size()
    f = f or 0
    hd = cfg.head_dim or (h // (cfg.num_heads or 1))
    q = (cfg.num_heads or 1) * hd
    kv = (cfg.num_kv_heads or cfg.num_heads or 1) * hd
    v = cfg.vocab_size or 0
    dt = {"float32": "Float32", "bfloat16": "BFloat16"}.get(str(cfg.get("model.param_init_type") or "float16").lower(), "Float16")
    counts = cfg.layers_per_stage() if pp > 1 else [layers]
    s = 0 if stage is None else stage
    first = sum(counts[:s]) if stage is not None else 0
    mine = counts[s] if stage is not None and s < len(counts) else layers
    out: list[tuple[str, tuple[int, ...], str | None]] = []
    if stage is None or s == 0:
        out.append(("model.tok_embeddings.embedding_weight", (v, h), dt))
    for i in range(first, first + mine):
        p = f"model.layers.{i}."
        out += [(p + "attention_norm.weight", (h,), "Float32"), (p + "attention.wq.weight", (q // mp, h), dt),
                (p + "attention.wk.weight", (kv // mp, h), dt), (p + "attention.wv.weight", (kv // mp, h), dt),
                (p + "attention.wo.weight", (h, q // mp), dt), (p + "ffn_norm.weight", (h,), "Float32"),
                (p + "feed_forward.w1.weight", (f // mp, h), dt), (p + "feed_forward.w3.weight", (f // mp, h), dt),
                (p + "feed_forward.w2.weight", (h, f // mp), dt)]
    if stage is None or s == pp - 1:
        out += [("model.norm_out.weight", (h,), "Float32"), ("lm_head.weight", (v // mp, h), dt)]
    return out


# -- per-stage kernel savings → step time (CT001, CT002) -------------------------------------------

_COMM_CORE_NAMES = {"HCCL", "COMMUNICATION"}
_LAYER_IN_NAME = re.compile(r"/\d+-\w+/")


def stage_busy_and_micro(rank: Any) -> tuple[float | None, int | None]:
    """Compute-stream kernel time per step (µs) and micro batches per step of one profiled rank.

    Busy time leaves out communication kernels (their time is waiting as much as working;
    pipeline Receives are the bubble). Micro batches: every micro batch launches each
    decoder-layer kernel once (cell reuse), so the most frequent per-step launch count of
    a layer kernel name is the micro-batch count (recomputed copies have their own scope).
    """
    if not rank.has_table("kernels"):
        return None, None
    cols = rank.columns("kernels") or []
    want = [c for c in ("name", "duration_us", "step_id", "accelerator_core") if c in cols]
    k = rank.table("kernels", want)
    if k is None or k.empty:
        return None, None
    steps = int(k["step_id"].dropna().nunique()) if "step_id" in k else 0
    steps = max(steps, 1)
    comp = ~k["accelerator_core"].astype(str).isin(_COMM_CORE_NAMES) if "accelerator_core" in k else None
    busy = float(k.loc[comp, "duration_us"].sum() if comp is not None else k["duration_us"].sum()) / steps
    names = k["name"].astype(str)
    layered = names[names.str.contains(_LAYER_IN_NAME)]
    micro = None
    if not layered.empty:
        counts = layered.value_counts() / steps
        micro = max(int(round(float(counts.mode().iloc[0]))), 1)
    return busy, micro


def one_f_one_b_step_saving(saving_per_step: dict[int, float], busy_per_step: dict[int, float], micro: int) -> float:
    """Step time saved when every pipeline stage ``s`` saves ``saving_per_step[s]`` µs of kernels per step.

    1F1B with ``m`` micro batches and per-micro-batch stage times ``tₛ``: the critical path
    runs every micro batch through the slowest stage and one micro batch through each other
    stage, so the step is ≈ Σtₛ + (m − 1)·max tₛ and the saving is
    Σδₛ + (m − 1)·(max tₛ − max(tₛ − δₛ)) (δ, t per micro batch). With equal stages this is
    the per-rank saving × (m + pp − 1)/m; without pipeline parallel it is the saving itself.
    """
    stages = sorted(saving_per_step)
    if len(stages) <= 1:
        return float(sum(saving_per_step.values()))
    m = max(int(micro), 1)
    d = [saving_per_step[s] / m for s in stages]
    t = [busy_per_step.get(s, 0.0) / m for s in stages]
    if not any(t):
        t = [1.0] * len(stages)  # unknown busy times: treat the stages as equal
    return float(sum(d) + (m - 1) * (max(t) - max(ti - di for ti, di in zip(t, d))))


def ir_dumps_for(ctx: Any, rank_id: int | None, stage: int, pipeline_stages: int, world_size: int | None) -> Any:
    """The IR dumps of ``rank_id``, else of another rank of the same pipeline stage, else ``None``.

    Without pipeline parallel any rank's dumps do (every rank runs the same graph); IR
    directories without a rank id count as rank 0's.
    """
    dumps = ctx.ir_ranks()
    if not dumps:
        return None
    for rd in dumps:
        if rd.rank == rank_id or (rd.rank is None and len(dumps) == 1 and (pipeline_stages <= 1 or stage == 0)):
            return rd
    if pipeline_stages <= 1:
        return dumps[0]
    per = max((world_size or 0) // pipeline_stages, 1) if world_size else None
    for rd in dumps:
        if rd.rank is not None and per is not None and min(rd.rank // per, pipeline_stages - 1) == stage:
            return rd
    return None


def kernel_launches_by_scope(rank: Any) -> dict[str, int]:
    """Number of kernel launches per IR full name over the profile (pairs with :func:`kernel_time_by_scope`)."""
    if not rank.has_table("kernels"):
        return {}
    k = rank.table("kernels", ["name"])
    if k is None or k.empty:
        return {}
    counts = k["name"].astype(str).map(kernel_scope).dropna().value_counts()
    return {str(s): int(v) for s, v in counts.items()}


def kernel_fixed_cost_us(rank: Any) -> float:
    """Per-launch fixed cost of a device kernel (µs), measured as the shortest compute kernel of the profile.

    A memory-bound kernel lasts fixed cost + bytes / bandwidth; the shortest kernel of a
    training step (a cast or update of a tiny tensor) moves next to nothing, so its
    duration is the fixed part (launch, scheduling, tail). 0 without kernels.
    """
    if not rank.has_table("kernels"):
        return 0.0
    cols = rank.columns("kernels") or []
    k = rank.table("kernels", [c for c in ("duration_us", "accelerator_core") if c in cols])
    if k is None or k.empty:
        return 0.0
    if "accelerator_core" in k:
        k = k[~k["accelerator_core"].astype(str).isin(_COMM_CORE_NAMES)]
    d = k["duration_us"].dropna()
    d = d[d > 0]
    return float(d.min()) if not d.empty else 0.0


@dataclass
class StageEvidence:
    """One pipeline stage's evidence: its first profiled rank, the IR dumps of that rank (or stage), kernel sums."""

    stage: int
    rank: Any | None
    dumps: Any | None
    times: dict[str, float] = field(default_factory=dict)  # kernel µs per IR full name over the profile
    launches: dict[str, int] = field(default_factory=dict)
    steps: int = 1
    busy_us: float | None = None  # compute kernel µs per step
    micro: int | None = None  # micro batches per step, from kernel launch counts
    fixed_us: float = 0.0  # per-launch fixed kernel cost


def stage_evidence(ctx: Any, *, launches: bool = False) -> list[StageEvidence]:
    """One :class:`StageEvidence` per pipeline stage (a single one without pipeline parallel or profile)."""
    cfg = ctx.config
    pp = cfg.pipeline_stages if cfg is not None else 1
    world = cfg.device_count if cfg is not None else None
    if ctx.run is None or not list(ctx.run):
        dumps = ctx.ir_ranks()
        return [StageEvidence(0, None, dumps[0] if dumps else None)]
    reps = stage_representatives(ctx.run, pp, world)
    pp = max(pp, len(reps))
    out = []
    for stage, rank in reps:
        u = StageEvidence(stage, rank, ir_dumps_for(ctx, rank.rank_id, stage, pp, world))
        u.times, u.steps = kernel_time_by_scope(rank)
        if u.times:
            u.busy_us, u.micro = stage_busy_and_micro(rank)
            if launches:
                u.launches = kernel_launches_by_scope(rank)
                u.fixed_us = kernel_fixed_cost_us(rank)
        out.append(u)
    return out


def pipeline_micro_batches(ctx: Any, units: list[StageEvidence]) -> int:
    """Micro batches per step: ``micro_batch_num`` under pipeline parallel, else the kernels' launch counts."""
    cfg = ctx.config
    if cfg is not None and cfg.pipeline_stages > 1:
        return max(cfg.micro_batch_num, 1)
    return max([u.micro for u in units if u.micro] or [1])


def fill_stages_without_ir(ctx: Any, cost: dict[int, float], units: list[StageEvidence]) -> None:
    """A profiled stage without IR dumps is taken to save what the measured stages save per layer × its layers."""
    missing = [u for u in units if u.dumps is None and u.rank is not None and u.stage not in cost]
    if not missing or not cost:
        return
    cfg = ctx.config
    counts = cfg.layers_per_stage() if cfg is not None and cfg.pipeline_stages > 1 else []
    known = dict(cost)
    for u in missing:
        if counts and u.stage < len(counts) and all(s < len(counts) and counts[s] for s in known):
            cost[u.stage] = sum(c / counts[s] for s, c in known.items()) / len(known) * counts[u.stage]
        else:
            cost[u.stage] = sum(known.values()) / len(known)



def kernel_cell(name: str) -> tuple[str, bool, str]:
    """(cell scope, is-backward, gradient segment) of a kernel name (AL001, CM001).

    Forward and backward kernels of one cell share the cell scope:
    ``Gradients/Default/…/wq-Linear/Grad_MatMul/TransData-op1/trans_TransData_7`` →
    (``Default/…/wq-Linear``, True, ``Grad_MatMul``); a recomputed copy's
    ``recompute_`` prefix is dropped.
    """
    scope = kernel_scope(name) or name
    segs = [s.removeprefix("recompute_") for s in scope.split("/") if s != "Gradients"]
    grads = [s for s in segs[:-1] if s.lower().startswith("grad")]
    keep = [s for s in segs[:-1] if not s.lower().startswith("grad")]
    return "/".join(keep), scope.startswith("Gradients/") or bool(grads), (grads[-1] if grads else "")


LLAMA_TYPES = ("LlamaConfig", "LlamaForCausalLM")


def is_llama(cfg: Any) -> bool:
    """MindFormers' legacy Llama family (Llama 2/3, Qwen 2.5 in its Llama form), whose layer we model."""
    return any(str(cfg.get(k, "")) in LLAMA_TYPES for k in ("model.type", "model.arch"))
