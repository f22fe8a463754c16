"""Pipeline stages: a rank's stage, one rank per stage, per-stage evidence, and 1F1B step-time savings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from advisor_rules._common.kernels import (
    kernel_fixed_cost_us,
    kernel_launches_by_scope,
    kernel_time_by_scope,
)

# A kernel launched inside a decoder layer (``…/3-LLamaDecodeLayer/…``).
_LAYER_IN_NAME = re.compile(r"/\d+-\w+/")


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


def stage_busy_and_micro(rank: Any) -> tuple[float | None, int | None]:
    """Compute-stream kernel time per step (µs) and micro batches per step of one profiled rank.

    Busy time leaves out communication kernels (their time is waiting as much as working;
    pipeline Receives are the bubble). Micro batches: every micro batch launches each
    decoder-layer kernel once (cell reuse), so the most frequent per-step launch count of
    a layer kernel name is the micro-batch count (recomputed copies have their own scope).
    Computed once per rank (several rules ask for it).
    """
    return rank.cached("stage_busy_and_micro", lambda: _stage_busy_and_micro(rank))


def _stage_busy_and_micro(rank: Any) -> tuple[float | None, int | None]:
    import pandas as pd

    view = rank.op_view()
    if view is None or view.ops.empty:
        return None, None
    busy = view.busy_us_per_step()
    per_name = view.launches_per_step_by_name()
    # Python's re on the names (as the per-name search did), not the string dtype's own engine
    names = pd.Series(per_name.index, dtype=object).astype(str)
    layered = per_name[names.str.contains(_LAYER_IN_NAME.pattern, regex=True).to_numpy(bool)]
    micro = None
    if not layered.empty:
        micro = max(int(round(float(layered.mode().iloc[0]))), 1)
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
    return micro_batches_per_step(ctx.config, [u.micro for u in units])


def micro_batches_per_step(cfg: Any, counted: Iterable[int | None]) -> int:
    """``micro_batch_num`` under pipeline parallel, else the most of the stages' counted micro batches
    (:func:`stage_busy_and_micro`; 1 when none was counted)."""
    if cfg is not None and cfg.pipeline_stages > 1:
        return max(cfg.micro_batch_num, 1)
    return max([m for m in counted if m] or [1])


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
