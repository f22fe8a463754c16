"""Memory the fix adds: padded weights with their optimizer states (and accumulation buffers), per stage."""

from __future__ import annotations

import math

from advisor_core.engine import RuleContext
from advisor_rules._common import DTYPE_BYTES, ir_parameters, is_model_weight, llama_parameters
from advisor_rules.al001_alignment.saving import Stage


def memory_delta(ctx: RuleContext, stages: list[Stage], value_map: dict[int, tuple[str, int]], key: str) -> float | None:
    """Bytes of parameters, optimizer state and gradient buffers the padding of ``key`` adds on the largest stage."""
    cfg = ctx.config
    vm = {v: nv for v, (x, nv) in value_map.items() if x == key}
    if not vm:
        return None
    by_rank = {rd.rank: rd for rd in ctx.ir_ranks()}
    pp = cfg.pipeline_stages if cfg is not None else 1
    stage_ids: list[tuple[int | None, int | None]] = [(s.stage, s.rank.rank_id) for s in stages]
    if not stage_ids:
        stage_ids = [(s, None) for s in range(pp)] if pp > 1 else [(None, None)]
    dp = cfg.data_parallel if cfg is not None else 1
    shard = dp if cfg is not None and cfg.get("parallel.enable_parallel_optimizer") is True else 1
    accumulate = cfg is not None and ((cfg.pipeline_stages > 1 and cfg.micro_batch_num > 1)
                                      or (cfg.pipeline_stages <= 1 and cfg.gradient_accumulation_steps > 1))
    best = None
    for stage, rid in stage_ids:
        ir = None
        if rid is not None and rid in by_rank:
            ir = ctx.ir_graph("frontend", by_rank[rid]) or ctx.ir_graph("parallel", by_rank[rid])
        elif rid is None and stage is None:
            ir = ctx.ir_graph("frontend") or ctx.ir_graph("parallel")
        params = ir_parameters(ir) if ir is not None else []
        if not params and cfg is not None:
            params = llama_parameters(cfg, stage if pp > 1 else None)
        if not params:
            continue
        states: dict[str, int] = {}  # weight name → bytes of its optimizer states per element
        for name, _shape, dtype in params:
            if not is_model_weight(name) and name.startswith(("adam_m.", "adam_v.", "moment1.", "moment2.")):
                base = name.split(".", 1)[1]
                states[base] = states.get(base, 0) + DTYPE_BYTES.get(dtype or "", 4)
        total = 0.0
        for name, shape, dtype in params:
            if not is_model_weight(name):
                continue
            factor = math.prod(vm[d] / d if d in vm else 1.0 for d in shape)
            if factor == 1.0:
                continue
            wb = DTYPE_BYTES.get(dtype or "", 2)
            per = (wb + states.get(name, 8)) / shard + (wb if accumulate else 0)
            total += math.prod(shape) * (factor - 1.0) * per
        best = total if best is None or abs(total) > abs(best) else best
    return best
