"""``simulate()``: config + hardware + faults → timings, memory and (optionally) the files on disk.

Order of work:

1. read the config (round trip), apply ``--layers``/``--ranks``/``--set``, check it
   (:func:`prepare`);
2. build one graph per pipeline stage and its kernel program;
3. replay one step without data waits to learn how long the device is busy per step, model
   the MindData pipeline against that, and derive the per-step data gap;
4. replay ``steps`` steps with the gap and seeded jitter;
5. summarise per rank (step time, exposed tail, peak memory) into :class:`SimulationResult`;
6. with ``out``: write the profile, IR dumps, config copy, strategy file and the ground truth
   (each problem's cost measured by simulating again without it, see :mod:`.groundtruth`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
from ruamel.yaml.comments import CommentedMap

from advisor_core.config.model_structure import LayerStructure, llama_layer
from advisor_core.config.recompute import RecomputePlan, resolve_recompute
from advisor_core.config.training import TrainingConfig
from advisor_core.simulate.buildctx import BuildCtx, GroupInfo
from advisor_core.simulate.configio import load_config_file, load_config_text, parse_set, set_dotted
from advisor_core.simulate.costs import link_of
from advisor_core.simulate.errors import SimulationInputError
from advisor_core.simulate.faults import parse_faults
from advisor_core.simulate.hardware import HardwareProfile, apply_hardware_overrides, load_hardware
from advisor_core.simulate.minddata import DEQUEUE_LATENCY_US, PipelineModel, model_pipeline
from advisor_core.simulate.schedule import T0_NS, RunSchedule, StageProgram, build_program, run_schedule
from advisor_core.simulate.stage import StageGraph, build_stage
from advisor_core.simulate.workload import Workload, workload_from_config

__all__ = ["simulate", "SimulationResult", "Prepared", "prepare", "run_model", "Model"]


@dataclass
class Prepared:
    """A checked configuration, ready to simulate."""

    doc: CommentedMap
    cfg: TrainingConfig
    w: Workload
    hw: HardwareProfile
    faults: list[Any]
    structure: LayerStructure
    plan: RecomputePlan


@dataclass
class Model:
    """Everything one replay produced."""

    prep: Prepared
    stages: list[StageGraph]
    programs: list[StageProgram]
    pipeline: PipelineModel
    schedule: RunSchedule
    steps: int
    seed: int

    def step_time_us(self) -> dict[int, float]:
        """Mean step time per rank (µs)."""
        out = {}
        for p in self.programs:
            d = (self.schedule.step_end[p.stage] - self.schedule.step_start[p.stage]).mean(axis=1) / 1000.0
            for i, r in enumerate(p.ranks.tolist()):
                out[r] = float(d[i])
        return dict(sorted(out.items()))

    def tail_us(self) -> dict[int, float]:
        """Mean exposed gradient communication before the optimizer, per rank (µs)."""
        out = {}
        for p in self.programs:
            d = self.schedule.tail_wait[p.stage].mean(axis=1) / 1000.0
            for i, r in enumerate(p.ranks.tolist()):
                out[r] = float(d[i])
        return dict(sorted(out.items()))

    def peak_memory_bytes(self) -> dict[int, int]:
        """Peak device memory per rank: static + runtime reserve + the live activations over the run."""
        from advisor_core.simulate.rankdata import RUNTIME_RESERVED_BYTES

        out = {}
        for p in self.programs:
            ends, deltas = [], []
            for blk in self.schedule.blocks[p.stage]:
                d = p.mem_delta[blk.idx]
                nz = np.flatnonzero(d)
                if len(nz):
                    ends.append((blk.start[0] + blk.dur[0])[nz])
                    deltas.append(d[nz])
            live = 0
            if ends:
                e = np.concatenate(ends)
                dd = np.concatenate(deltas)[np.argsort(e, kind="stable")]
                live = int(max(0, np.cumsum(dd).max()))
            peak = p.graph.static_bytes + RUNTIME_RESERVED_BYTES + live
            for r in p.ranks.tolist():
                out[r] = int(peak)
        return dict(sorted(out.items()))

    def mean_step_time_us(self) -> float:
        v = list(self.step_time_us().values())
        return float(sum(v) / len(v))


@dataclass
class SimulationResult:
    """What :func:`simulate` returns; ``expected`` is the ground-truth document when written."""

    model: Model
    out: Path | None = None
    expected: dict[str, Any] | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def workload(self) -> Workload:
        return self.model.prep.w

    @property
    def step_time_us(self) -> dict[int, float]:
        return self.model.step_time_us()

    @property
    def mean_step_time_us(self) -> float:
        return self.model.mean_step_time_us()

    @property
    def peak_memory_bytes(self) -> dict[int, int]:
        return self.model.peak_memory_bytes()

    @property
    def tail_us(self) -> dict[int, float]:
        return self.model.tail_us()

    @property
    def gap_us(self) -> float:
        return self.model.schedule.gap_ns / 1000.0

    @property
    def problems(self) -> list[dict[str, Any]]:
        return list((self.expected or {}).get("problems", []))


def _load_doc(config: Any) -> CommentedMap:
    if isinstance(config, CommentedMap):
        from copy import deepcopy

        return deepcopy(config)
    if isinstance(config, Mapping):
        import io

        from advisor_core.simulate.configio import new_yaml

        buf = io.StringIO()
        new_yaml().dump(_plain_mapping(config), buf)
        return load_config_text(buf.getvalue(), "config")
    if isinstance(config, Path) or (isinstance(config, str) and "\n" not in config and config.endswith((".yaml", ".yml"))):
        return load_config_file(config)
    if isinstance(config, str):
        return load_config_text(config, "config")
    raise SimulationInputError(f"config: expected a path, YAML text or mapping, got {type(config).__name__}")


def _plain_mapping(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain_mapping(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_mapping(v) for v in value]
    return value


def prepare(config: Any, hardware: HardwareProfile | str | Path | None = None, faults: Iterable[Any] = (),
            ranks: int | None = None, layers: int | None = None, sets: Iterable[str] = ()) -> Prepared:
    """Load and check the inputs (raises :class:`SimulationInputError` with the key and the reason)."""
    doc = _load_doc(config)
    hw = hardware if isinstance(hardware, HardwareProfile) else load_hardware(hardware)
    hw_over: dict[str, Any] = {}
    for item in sets:
        key, value = parse_set(item) if isinstance(item, str) else item
        if key.startswith("hardware."):
            hw_over[key[len("hardware."):]] = value
        else:
            set_dotted(doc, key, value)
    hw = apply_hardware_overrides(hw, hw_over)
    cfg = TrainingConfig(doc)
    if layers is not None:
        if layers <= 0:
            raise SimulationInputError(f"--layers: {layers} is not a positive integer")
        set_dotted(doc, cfg.pointer("model.num_layers").lstrip("/").replace("/", "."), layers)
        cfg = TrainingConfig(doc)
    if ranks is not None:
        mp, pp = cfg.model_parallel, cfg.pipeline_stages
        if ranks <= 0 or ranks % (mp * pp):
            raise SimulationInputError(
                f"--ranks: {ranks} is not a multiple of parallel_config.model_parallel × pipeline_stage = {mp} × {pp}"
            )
        set_dotted(doc, "parallel_config.data_parallel", ranks // (mp * pp))
        cfg = TrainingConfig(doc)
    w = workload_from_config(cfg)
    if w.world > 4096:
        raise SimulationInputError(f"parallel_config: {w.world} ranks is more than the simulator supports (4096)")
    fl = parse_faults([f.model_dump() if hasattr(f, "model_dump") else f for f in faults])
    structure = llama_layer(fine_grain_interleave=w.fine_grain_interleave, rotary_fp32=w.rotary_fp32)
    plan = resolve_recompute(cfg, structure)
    return Prepared(doc, cfg, w, hw, fl, structure, plan)


def _groups(w: Workload, hw: HardwareProfile, stage: int) -> dict[str, GroupInfo]:
    r0 = w.rank_of(stage, 0, 0)
    g = {"mp": GroupInfo("mp", w.mp, link_of(w.mp_group(r0), hw)), "dp": GroupInfo("dp", w.dp, link_of(w.dp_group(r0), hw))}
    nxt = w.rank_of(min(stage + 1, w.pp - 1), 0, 0)
    prv = w.rank_of(max(stage - 1, 0), 0, 0)
    g["pp_next"] = GroupInfo("pp", 2, link_of([r0, nxt], hw))
    g["pp_prev"] = GroupInfo("pp", 2, link_of([prv, r0], hw))
    return g


def run_model(prep: Prepared, steps: int, seed: int) -> Model:
    """Build and replay (see module docstring, steps 2–4)."""
    if steps <= 0:
        raise SimulationInputError(f"--steps: {steps} is not a positive integer")
    w, hw = prep.w, prep.hw
    stages = []
    for s in range(w.pp):
        ctx = BuildCtx(w, hw, s, _groups(w, hw, s))
        stages.append(build_stage(ctx, prep.structure, prep.plan, prep.faults))
    programs = [build_program(w, g) for g in stages]
    launch = int(hw.collective_launch_us * 1000)
    # the device's own busy time: a rank whose host feeds it late is not a busier device
    from advisor_core.simulate.faults import SlowDataRank

    probe = run_schedule(w, programs, 1, 0, seed, launch, tuple(f for f in prep.faults if not isinstance(f, SlowDataRank)))
    busy = max(int((probe.step_end[s] - probe.step_start[s]).max()) for s in range(w.pp))
    pipe = model_pipeline(w.dataset, hw, prep.faults, busy)
    sched = run_schedule(w, programs, steps, pipe.gap_ns, seed, launch, tuple(prep.faults),
                         pipe.ready_ns(T0_NS, steps), int(DEQUEUE_LATENCY_US * 1000))
    return Model(prep, stages, programs, pipe, sched, steps, seed)


EXPORTS = ("text", "db", "both")


def simulate(config: Any, hardware: HardwareProfile | str | Path | None = None, faults: Iterable[Any] = (),
             out: str | Path | None = None, ranks: int | None = None, steps: int = 4, layers: int | None = None,
             seed: int = 0, *, sets: Iterable[str] = (), force: bool = False, name: str = "config",
             scenario: str = "custom", ground_truth: bool = True, export: str = "text",
             profiler_steps: bool = True) -> SimulationResult:
    """Simulate a MindFormers training config on the simulated Ascend backend.

    ``config``: a YAML path, YAML text, or mapping. ``hardware``: a :class:`HardwareProfile`, a
    YAML/JSON file of overrides, or ``None`` for the defaults. ``faults``: fault objects or dicts
    (:mod:`.faults`). ``out``: directory to write (must be empty unless ``force``); ``None``
    simulates without writing. ``ranks`` sets ``data_parallel`` to ``ranks / (mp · pp)``;
    ``layers`` sets the layer count; ``sets`` are ``key=value`` overrides (``hardware.*`` keys
    go to the hardware profile). ``export``: ``text`` (CSV/JSON, the default), ``db`` (the SQLite
    export only, as MindSpore's ``export_type=[db]``) or ``both``. ``profiler_steps``: write
    ``ProfilerStep#<n>`` trace events and the kernels' ``Step ID`` (torch_npu-style step marks); off,
    the profile has neither, as MindSpore writes it at jit level O2 or without a schedule. The same
    inputs always give the same result and bytes.
    """
    if export not in EXPORTS:
        raise SimulationInputError(f"--export: {export!r} is not one of {', '.join(EXPORTS)}")
    prep = prepare(config, hardware, faults, ranks, layers, sets)
    model = run_model(prep, steps, seed)
    result = SimulationResult(model)
    if out is not None:
        from advisor_core.simulate.groundtruth import ground_truth as compute_gt
        from advisor_core.simulate.output import check_out_dir, write_outputs

        out_path = Path(out)
        check_out_dir(out_path, force)
        expected = compute_gt(model, scenario=scenario, name=name) if ground_truth else None
        result.files = write_outputs(out_path, model, name=name, expected=expected, export=export,
                                     profiler_steps=profiler_steps)
        result.out = out_path
        result.expected = expected
    return result
