"""``strategy/ckpt_strategy.json``: the JSON form of MindSpore's strategy checkpoint (spec §6.3).

``parallel_strategy_item`` holds every sharded op's ``in_strategy`` per stage (key
``<Prim>_<first parameter>`` for ops that take a weight, the op's full name otherwise);
``parallel_layout_item`` holds each weight's device matrix, tensor map and full shape.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from advisor_core.simulate.nodes import FRONT
from advisor_core.simulate.stage import StageGraph
from advisor_core.simulate.workload import Workload

__all__ = ["write_strategy_file"]


def write_strategy_file(path: Path, w: Workload, stages: list[StageGraph]) -> None:
    items: dict[str, dict] = {}
    layouts: dict[str, dict] = {}
    for g in stages:
        for n in g.nodes:
            if not (n.ir & FRONT) or not n.strategy or n.phase not in ("fwd", "head"):
                continue
            param = next((a.param for a in n.args if a.param), None)
            if param is None:
                loads = [g.by_key[a.ref] for a in n.args if a.ref and a.ref in g.by_key and g.by_key[a.ref].prim == "Load"]
                param = next((a.param for ld in loads for a in ld.args if a.param), None)
            key = f"{n.prim}_{param}" if param else n.full_name
            items[key] = {"stage": g.stage, "parallel_strategy": [list(t) for t in ast.literal_eval(n.strategy)]}
        for name, t in g.params:
            split = w.mp if (".w" in name and "norm" not in name) or name == "lm_head.weight" else 1
            full = list(t.shape)
            tensor_map = [-1] * len(full)
            if split > 1 and full:
                row = name.endswith(("wo.weight", "w2.weight"))
                axis = len(full) - 1 if row else 0
                full[axis] *= split
                tensor_map[axis] = 0
            layouts[name] = {"dev_matrix": [w.dp, w.mp], "tensor_map": tensor_map, "tensor_shape": full, "field": 0,
                             "opt_weight_shard_step": 0, "opt_weight_shard_size": w.dp if w.parallel_optimizer else 0}
    doc = {"current_stage": 0, "parallel_strategy_item": dict(sorted(items.items())), "parallel_out_strategy_item": {},
           "parallel_layout_item": dict(sorted(layouts.items())), "parallel_layout_value_item": {}}
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
