"""Do the inputs of one analysis belong together? The config against the profile and the IR.

A config from another run, combined silently, makes every number computed from both wrong
— and a patch computed for the run's layout (split points for 2 pipeline stages) would be
written into a config for 1. So before any rule runs, the config is held against what the
profile and the IR say about the same facts:

* the parallel layout: ``data_parallel``/``model_parallel``/``pipeline_stage`` against the
  profile's (``profiler_metadata.json``; only the sizes both sides state are compared);
* the device count: ``dp × mp × pp`` against the profile's world size and its rank ids;
* the model width: ``hidden_size`` against the IR's norm weights (1-D parameters named
  ``…norm…``: never sliced by model parallel) or, without IR, the output width of the
  profile's ``RmsNorm``/``LayerNorm`` kernels.

Every disagreement is one :class:`Mismatch` naming both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_NORM_TYPES = ("RmsNorm", "LayerNorm", "LayerNormV3", "AddRmsNorm")


@dataclass(frozen=True)
class Mismatch:
    what: str
    config_side: str
    run_side: str

    def message(self, config_path: str) -> str:
        return (f"{self.what} disagrees: the config {config_path} says {self.config_side}, but {self.run_side}; "
                "it is not combined with this run (no patch is computed from it)")


def check_inputs(run: Any, ir: Any, cfg: Any) -> list[Mismatch]:
    """Every disagreement between the training config ``cfg`` and the run (profile ``run``, IR dumps ``ir``)."""
    if cfg is None:
        return []
    out: list[Mismatch] = []
    out += _layout(run, cfg)
    out += _width(run, ir, cfg)
    return out


def _layout(run: Any, cfg: Any) -> list[Mismatch]:
    if run is None:
        return []
    layout = next((r.parallel for r in run if r.parallel is not None), None)
    out = []
    if layout is not None:
        pairs = [("data_parallel", "parallel_config.data_parallel", cfg.data_parallel, layout.data_parallel, "dp"),
                 ("model_parallel", "parallel_config.model_parallel", cfg.model_parallel, layout.tensor_parallel, "tp"),
                 ("pipeline_stage", "parallel_config.pipeline_stage", cfg.pipeline_stages, layout.pipeline_stages, "pp")]
        told = [(name, c, r, short) for name, key, c, r, short in pairs if r is not None and cfg.located(key).present]
        if any(c != r for _, c, r, _ in told):
            out.append(Mismatch("the parallel layout",
                                " × ".join(f"{name} {c}" for name, c, _, _ in told),
                                f"the profile was taken with {' × '.join(f'{short} {r}' for _, _, r, short in told)} "
                                f"({layout.source})"))
        if layout.world_size and cfg.device_count and layout.world_size != cfg.device_count:
            out.append(Mismatch("the device count", f"{cfg.device_count} devices (dp × mp × pp)",
                                f"the profile's world size is {layout.world_size} ({layout.source})"))
    ranks = [r.rank_id for r in run]
    if ranks and cfg.device_count and max(ranks) >= cfg.device_count and not any("device count" in m.what for m in out):
        out.append(Mismatch("the device count", f"{cfg.device_count} devices (dp × mp × pp)",
                            f"the profile has rank {max(ranks)}"))
    return out


def _width(run: Any, ir: Any, cfg: Any) -> list[Mismatch]:
    hidden = cfg.hidden_size
    if not hidden:
        return []
    seen, where = _ir_norm_widths(ir)
    if not seen and run is not None:
        seen, where = _kernel_norm_widths(run)
    if not seen:
        return []
    world = max(cfg.device_count or 1, 1)
    # a norm weight is replicated; an optimizer-sharded one is a whole fraction of the width
    if any(s == hidden or (hidden % s == 0 and hidden // s <= world) for s in seen):
        return []
    return [Mismatch("the model width", f"hidden_size {hidden}",
                     f"{where} {'is' if len(seen) == 1 else 'are'} {', '.join(str(s) for s in sorted(seen))} wide")]


def _ir_norm_widths(ir: Any) -> tuple[set[int], str]:
    if ir is None:
        return set(), ""
    for rd in sorted(ir.ranks.values(), key=lambda r: (r.rank is None, r.rank or 0)):
        for getter in (rd.final_frontend, rd.parallel_graph):
            f = getter()
            if f is None:
                continue
            parsed = rd.parse(f)
            if parsed is None:
                continue
            widths = set()
            for p in getattr(parsed, "params", None) or []:
                shape = getattr(p.type, "shape", None) if p.type is not None else None
                if "norm" in (p.name or "").lower() and shape is not None and len(shape) == 1 and shape[0] > 0:
                    widths.add(int(shape[0]))
            if widths:
                return widths, f"the norm weights in {f.path.name}"
    return set(), ""


def _kernel_norm_widths(run: Any) -> tuple[set[int], str]:
    for rank in run:
        view = rank.op_view()
        if view is None or view.ops.empty:
            continue
        norms = view.ops[view.ops["type"].isin(_NORM_TYPES)]
        widths = {int(s[0][-1]) for s in norms["out_shapes"] if s and s[0] and s[0][-1] > 0}
        if widths:
            return widths, f"the {'/'.join(sorted(set(norms['type'])))} kernels of rank {rank.rank_id}"
    return set(), ""
