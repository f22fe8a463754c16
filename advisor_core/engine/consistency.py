"""Do the inputs of one analysis belong together? The config against the profile and the IR.

A config from another run, combined silently, makes every number computed from both wrong
— and a patch computed for the run's layout (split points for 2 pipeline stages) would be
written into a config for 1. So before any rule runs, the config is held against what the
profile and the IR say about the same facts (:mod:`advisor_core.engine.run_dims` reads the
run's side):

* the parallel layout: ``data_parallel``/``model_parallel``/``pipeline_stage`` against the
  profile's (``profiler_metadata.json``; only the sizes both sides state are compared), and
  against the IR: the pipeline stages its ranks' graphs hold (disjoint decoder layers, a
  graph without the embedding or the output head, ``Send``/``Receive``) and the
  model-parallel slicing of the weights that are split by exactly ``model_parallel``;
* the device count: ``dp × mp × pp`` against the profile's world size and rank ids, and the
  IR's ``rank_<id>`` folders;
* the model dims: ``hidden_size`` against the norm weights (never sliced), ``num_layers``
  against the decoder layers the graphs or kernel scopes hold, ``intermediate_size``,
  ``vocab_size``, ``num_heads`` and ``num_heads × head_dim`` against the weights, kernels and
  ``head_num`` that show them. A rank holds a slice: a size agrees when the config's is a whole multiple of it, at
  most the device count.

Every disagreement is one :class:`Mismatch` naming both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor_core.engine.run_dims import RankShape, RunShape, Seen, run_shape


@dataclass(frozen=True)
class Mismatch:
    what: str
    config_side: str
    run_side: str

    def message(self, config_path: str) -> str:
        return (f"{self.what} disagrees: the config {config_path} says {self.config_side}, but {self.run_side}; "
                "it is not combined with this run (no patch is computed from it)")


def reads_kernels(run: Any, ir: Any) -> bool:
    """Does :func:`check_inputs` read the kernels (the op views of the first and the last rank)? When there are
    profiled ranks and no IR dumps to read the model's shape from (IR dumps that show none of it are known only
    once read: then it may read the kernels too, though this says no)."""
    return ir is None and run is not None and bool(run.ranks)


def check_inputs(run: Any, ir: Any, cfg: Any) -> list[Mismatch]:
    """Every disagreement between the training config ``cfg`` and the run (profile ``run``, IR dumps ``ir``)."""
    if cfg is None:
        return []
    shape = run_shape(run, ir)
    out: list[Mismatch] = []
    out += _layout(run, cfg)
    if not any(m.what == "the parallel layout" for m in out):
        out += _ir_layout(shape, cfg)
    if not any(m.what == "the device count" for m in out):
        out += _ir_ranks(shape, cfg)
    out += _layers(shape, cfg)
    out += _dims(shape, cfg, _world(run, shape, cfg), _run_model_parallel(run, shape, cfg))
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


def _ir_ranks(shape: RunShape, cfg: Any) -> list[Mismatch]:
    ids = shape.ir_rank_ids
    if ids and cfg.device_count and max(ids) >= cfg.device_count:
        return [Mismatch("the device count", f"{cfg.device_count} devices (dp × mp × pp)",
                         f"the IR dumps have a rank_{max(ids)} folder")]
    return []


def _span(layers: set[int]) -> str:
    lo, hi = min(layers), max(layers)
    return f"layer {lo}" if lo == hi else f"layers {lo}–{hi}"


def _ir_layout(shape: RunShape, cfg: Any) -> list[Mismatch]:
    """The pipeline stages and the model-parallel slicing the IR (or kernels) show, against the config's."""
    config_side, run_side = [], []
    stages = _stages_seen(shape)
    pp = cfg.pipeline_stages
    if stages is not None:
        low, why = stages
        if low > pp:
            config_side.append(f"pipeline_stage {pp}")
            run_side.append(f"the {shape.layers_from} hold at least {low} pipeline stages ({why or _stage_list(shape)})")
    single = next((r for r in shape.ranks if 0 in r.layers and r.has_head and not r.pipelined), None)
    if single is not None and pp > 1 and not config_side:
        config_side.append(f"pipeline_stage {pp}")
        run_side.append(f"{single.where} holds every decoder layer ({_span(single.layers)}) and the output head in "
                        "one graph, with no Send/Receive (one pipeline stage)")
    mp = _model_parallel_seen(shape, cfg)
    if mp is not None and mp[0] != cfg.model_parallel:
        config_side.append(f"model_parallel {cfg.model_parallel}")
        run_side.append(mp[1])
    if not config_side:
        return []
    return [Mismatch("the parallel layout", " × ".join(config_side), "; ".join(run_side))]


def _stage_list(shape: RunShape) -> str:
    seen: dict[frozenset[int], RankShape] = {}
    for r in shape.ranks:
        seen.setdefault(frozenset(r.layers), r)
    return ", ".join(f"rank {r.rank}: {_span(r.layers)}" if r.rank is not None else f"{r.where}: {_span(r.layers)}"
                     for r in sorted(seen.values(), key=lambda r: min(r.layers)))


def _stages_seen(shape: RunShape) -> tuple[int, str] | None:
    """A lower bound of the pipeline stages the run shows, with the evidence when it is not the layer lists."""
    if not shape.ranks:
        return None
    sets = {frozenset(r.layers) for r in shape.ranks}
    disjoint = all(a.isdisjoint(b) for a in sets for b in sets if a is not b)
    count = len(sets) if disjoint else 1
    if count > 1:
        return count, ""
    heads_known = any(r.has_head for r in shape.ranks)
    for r in shape.ranks:
        if r.pipelined:
            return 2, f"{r.where} sends to or receives from another stage"
        if heads_known and not r.has_head:
            return 2, f"{r.where} holds {_span(r.layers)} without the output head"
        if 0 not in r.layers:
            return 2, f"{r.where} starts at layer {min(r.layers)}"
    return 1, ""


def _model_parallel_seen(shape: RunShape, cfg: Any) -> tuple[int, str] | None:
    """The model parallel shown by the weights split by exactly ``model_parallel`` (FFN ``w2``, ``head_num``).

    Each gives a factor where the config's dim is a whole multiple of it; one that equals the
    config's ``model_parallel`` wins (that dim agrees, so another that does not is the dim
    that is wrong), else the first.
    """
    factors = []
    for role, value in (("ffn", cfg.ffn_hidden_size()[0]), ("heads", cfg.num_heads), ("qwidth", _qwidth(cfg))):
        if not value:
            continue
        for s in shape.dims.get(role, []):
            if s.exact and value % s.size == 0:
                k = value // s.size
                factors.append((k, f"{s.where} {s.shows.format(s.size)}, 1/{k} of {_KEY[role]} {value} "
                                   f"(model parallel {k})"))
    return next((f for f in factors if f[0] == cfg.model_parallel), factors[0] if factors else None)


def _run_model_parallel(run: Any, shape: RunShape, cfg: Any) -> int | None:
    """The run's model parallel: the profile's, else what the exactly-split weights show."""
    layout = next((r.parallel for r in run if r.parallel is not None), None) if run is not None else None
    if layout is not None and layout.tensor_parallel:
        return int(layout.tensor_parallel)
    seen = _model_parallel_seen(shape, cfg)
    return seen[0] if seen else None


_KEY = {"ffn": "intermediate_size", "vocab": "vocab_size", "heads": "num_heads", "hidden": "hidden_size",
        "qwidth": "num_heads × head_dim"}
_WHAT = {"hidden": "the model width", "ffn": "the FFN width", "vocab": "the vocabulary size",
         "heads": "the attention head count", "qwidth": "the attention width"}


def _qwidth(cfg: Any) -> int | None:
    return cfg.num_heads * cfg.head_dim if cfg.num_heads and cfg.head_dim else None


def _layers(shape: RunShape, cfg: Any) -> list[Mismatch]:
    n = cfg.num_layers
    if not n or not shape.ranks:
        return []
    every = set().union(*(r.layers for r in shape.ranks))
    src = shape.layers_from
    if max(every) >= n:
        return [Mismatch("the layer count", f"num_layers {n}",
                         f"the {src} hold decoder layer {max(every)} ({_stage_list(shape)})")]
    last = next((r for r in shape.ranks if r.has_head), None)
    if last is not None and max(last.layers) + 1 != n:
        count = max(last.layers) + 1
        return [Mismatch("the layer count", f"num_layers {n}",
                         f"the {src} hold {count} decoder layer{'s' if count > 1 else ''} ({_stage_list(shape)}; the output head "
                         f"follows layer {count - 1} in {last.where})")]
    return []


def _world(run: Any, shape: RunShape, cfg: Any) -> int:
    seen = [cfg.device_count or 1]
    if shape.ir_rank_ids:
        seen.append(max(shape.ir_rank_ids) + 1)
    if run is not None:
        seen += [r.rank_id + 1 for r in run] + [r.parallel.world_size or 1 for r in run if r.parallel is not None]
    return max(seen)


def _dims(shape: RunShape, cfg: Any, world: int, run_mp: int | None) -> list[Mismatch]:
    ffn, how = cfg.ffn_hidden_size()
    values = {"hidden": (cfg.hidden_size, ""),
              "ffn": (ffn, "" if how.startswith("/") else f" ({how})"),
              "vocab": (cfg.vocab_size, ""),
              "heads": (cfg.num_heads, ""),
              "qwidth": (_qwidth(cfg), "" if cfg.int_of("model.head_dim") else " (head_dim = hidden_size // num_heads)")}
    out = []
    for role, (value, note) in values.items():
        seen = shape.dims.get(role, [])
        if not value or not seen:
            continue
        exact = [s for s in seen if s.exact]
        if exact and run_mp:  # split by exactly the run's model parallel
            if any(s.size * run_mp == value for s in exact):
                continue
            run_side = f"{_describe(exact)} per rank, with model parallel {run_mp}"
        elif any(_slice_of(value, s, world) for s in seen):
            continue
        else:
            run_side = _describe(seen)
        said = (f"num_heads {cfg.num_heads} × head_dim {cfg.head_dim} = {value}" if role == "qwidth"
                else f"{_KEY[role]} {value}")
        out.append(Mismatch(_WHAT[role], f"{said}{note}", run_side))
    return out


def _slice_of(value: int, seen: Seen, world: int) -> bool:
    """Is ``seen`` the whole ``value`` or a slice of it a rank can hold (a whole fraction, at most ``world`` ways)?"""
    return seen.size == value or (value % seen.size == 0 and value // seen.size <= world)


def _describe(seen: list[Seen]) -> str:
    """Each size the run shows, with the first place that shows it."""
    first: dict[int, Seen] = {}
    for s in seen:
        first.setdefault(s.size, s)
    parts = [f"{s.where} {s.shows.format(size)}" for size, s in sorted(first.items())]
    return "; ".join(parts[:3]) + (f"; … ({len(parts) - 3} more)" if len(parts) > 3 else "")
