"""The scenario registry: named, reproducible runs built on a real MindFormers config.

Every scenario starts from ``configs/pretrain_llama2_7b.yaml`` (MindFormers' own Llama2-7B
pretraining config, comments kept) and changes only what its problem needs, through the same
dotted ``key=value`` edits ``--set`` uses; faults (:mod:`.faults`) cover what no config key
controls. ``advisor simulate --list`` prints :data:`SCENARIOS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from advisor_core.simulate.configio import load_config_text, set_dotted
from advisor_core.simulate.errors import SimulationInputError
from advisor_core.simulate.faults import (
    CastRoundTrip,
    DataWarmup,
    DegradedLink,
    ExpensiveMapOp,
    NDFormatOp,
    ParamTransData,
    SlowDataRank,
    SlowHostToDevice,
    SlowKernelRank,
    StrategyMismatch,
)

__all__ = ["Scenario", "SCENARIOS", "get_scenario", "base_config", "scenario_inputs"]

BASE_CONFIG = "pretrain_llama2_7b.yaml"


def base_config() -> CommentedMap:
    text = resources.files("advisor_core.simulate").joinpath("configs", BASE_CONFIG).read_text(encoding="utf-8")
    return load_config_text(text, BASE_CONFIG)


def _flow(values: list[Any]) -> CommentedSeq:
    seq = CommentedSeq(values)
    seq.fa.set_flow_style()
    return seq


@dataclass(frozen=True)
class Scenario:
    """A named run: config edits (applied in order), faults, default size."""

    name: str
    description: str
    edits: tuple[tuple[str, Any], ...] = ()
    faults: tuple[Any, ...] = ()
    layers: int = 4
    steps: int = 3
    fusion_split: bool = True  # set all_reduce_fusion_config from the model's parameter list
    profiler_steps: bool = True  # ProfilerStep events and kernel Step ID; off: as MindSpore writes (neither)

    def config(self, layers: int | None = None) -> CommentedMap:
        doc = base_config()
        for key, value in self.edits:
            set_dotted(doc, key, _flow(list(value)) if isinstance(value, list) else value)
        set_dotted(doc, "model.model_config.num_layers", self.layers if layers is None else layers)
        if self.fusion_split:
            _set_fusion(doc)
        return doc


def _set_fusion(doc: CommentedMap) -> None:
    """Split points for equal-sized gradient buckets of this very config (a clean, tuned job sets them)."""
    from advisor_core.simulate.buildctx import BuildCtx
    from advisor_core.simulate.engine import _groups, prepare
    from advisor_core.simulate.groundtruth import fusion_split_points
    from advisor_core.simulate.stage import build_stage

    prep = prepare(doc)
    if prep.w.dp <= 1:
        return
    g = build_stage(BuildCtx(prep.w, prep.hw, 0, _groups(prep.w, prep.hw, 0)), prep.structure, prep.plan, [])
    points = fusion_split_points(g.params)
    if points:
        set_dotted(doc, "parallel.all_reduce_fusion_config", _flow(points))


_CLEAN = (
    ("parallel_config.data_parallel", 2),
    ("parallel_config.model_parallel", 2),
    ("runner_config.gradient_accumulation_steps", 4),
    ("train_dataset.num_parallel_workers", 8),
)
_CLUSTER = _CLEAN + (("parallel_config.data_parallel", 4),)
_SEED_RECOMPUTE = ["feed_forward\\.mul", "feed_forward\\.w1\\.activation"]
_UNALIGNED = (
    ("model.model_config.hidden_size", 4100),
    ("model.model_config.head_dim", 128),
    ("model.model_config.intermediate_size", 11000),
    ("model.model_config.vocab_size", 32001),
)

# The ResNet-like single-device image job of seed 001 case 1, its pipeline feeding the device fast enough
_IMAGE_JOB = (
    ("model.model_config.hidden_size", 1024), ("model.model_config.intermediate_size", 2816),
    ("model.model_config.num_heads", 16), ("model.model_config.seq_length", 256), ("model.model_config.vocab_size", 25600),
    ("runner_config.batch_size", 32), ("runner_config.gradient_accumulation_steps", 1),
    ("parallel_config.data_parallel", 1), ("train_dataset.batch_size", 32),
    ("train_dataset.data_loader.type", "ImageFolderDataset"), ("train_dataset.num_parallel_workers", 8),
    ("train_dataset.prefetch_size", 16),
    ("train_dataset.transforms", [{"type": "RandomCropDecodeResize"}, {"type": "RandomHorizontalFlip"},
                                  {"type": "Normalize"}, {"type": "HWC2CHW"}]),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("clean", "Llama2-7B dp2 x mp2: aligned dims, enough data workers, split gradient AllReduce, no recompute",
                 _CLEAN),
        Scenario(
            "minddata-bottleneck",
            "ResNet-like single-device job whose image map op runs with num_parallel_workers=1 (seed 001 case 1)",
            (("model.model_config.hidden_size", 1024), ("model.model_config.intermediate_size", 2816),
             ("model.model_config.num_heads", 16), ("model.model_config.seq_length", 256),
             ("model.model_config.vocab_size", 25600),
             ("runner_config.batch_size", 32), ("runner_config.gradient_accumulation_steps", 1),
             ("parallel_config.data_parallel", 1), ("train_dataset.batch_size", 32),
             ("train_dataset.data_loader.type", "ImageFolderDataset"), ("train_dataset.num_parallel_workers", 1),
             ("train_dataset.prefetch_size", 16),
             ("train_dataset.transforms", [{"type": "RandomCropDecodeResize"}, {"type": "RandomHorizontalFlip"},
                                           {"type": "Normalize"}, {"type": "HWC2CHW"}])),
            layers=2, steps=5),
        Scenario("minddata-warmup",
                 "The image job with enough workers whose first 3 batches come from a cold shard cache: only the first "
                 "steps wait for data", _IMAGE_JOB, (DataWarmup(batches=3, extra_us=250000.0),), layers=2, steps=8),
        Scenario("minddata-transfer",
                 "The image job with enough workers and a host->device link at 0.5 GB/s: the host queue stays full, "
                 "the device queue runs empty", _IMAGE_JOB, (SlowHostToDevice(gbps=0.5),), layers=2, steps=5),
        Scenario("cast-excess", "rotary_dtype float32 with float16 compute, plus a lossy fp32->fp16->fp32 Cast round trip in model code",
                 _CLEAN + (("model.model_config.rotary_dtype", "float32"),), (CastRoundTrip(),)),
        Scenario("transdata-excess", "An ND-only op inside an FRACTAL_NZ chain and weights converted by TransData every step",
                 _CLEAN, (NDFormatOp(core="AI_CPU"), ParamTransData())),  # the op falls back to AI_CPU: another stream
        Scenario("unaligned", "hidden 4100, intermediate 11000, vocab 32001: MatMuls off the 16 alignment (dp2, no model parallel)",
                 (("parallel_config.data_parallel", 2), ("runner_config.gradient_accumulation_steps", 4)) + _UNALIGNED),
        Scenario("allreduce-rearrangement",
                 "A shard-strategy override on feed_forward.mul forcing redistribution, and one unsplit gradient AllReduce",
                 _CLEAN, (StrategyMismatch(),), fusion_split=False),
        Scenario("allreduce-ms-steps",
                 "allreduce-rearrangement profiled the way MindSpore writes it: no ProfilerStep events, no kernel Step ID, "
                 "one whole-run step_trace_time.csv row",
                 _CLEAN, (StrategyMismatch(),), layers=2, fusion_split=False, profiler_steps=False),
        Scenario("recompute-ineffective",
                 "select_recompute ['feed_forward\\.mul', 'feed_forward\\.w1\\.activation']: blocked by the Reshape and a one-op cell",
                 _CLEAN + (("recompute_config.select_recompute", _SEED_RECOMPUTE),)),
        Scenario("straggler-data", "8 ranks (dp4 x mp2), clean config; rank 5's host feeds its device 20 ms late every step",
                 _CLUSTER, (SlowDataRank(rank=5, extra_wait_us=20000.0),)),
        Scenario("straggler-kernel", "8 ranks (dp4 x mp2), clean config; rank 3's MatMul kernels run 1.4x slower (a throttled AI core)",
                 _CLUSTER, (SlowKernelRank(rank=3, op_type="MatMul", factor=1.4),)),
        Scenario("slow-link", "8 ranks (dp4 x mp2), clean config; rank 6's HCCS link moves data at a quarter of its bandwidth",
                 _CLUSTER, (DegradedLink(rank=6, link="HCCS", factor=4.0),)),
        Scenario(
            "kitchen-sink", "Every problem at once on 8 ranks (dp2 x mp2 x pp2)",
            (("parallel_config.data_parallel", 2), ("parallel_config.model_parallel", 2),
             ("parallel_config.pipeline_stage", 2), ("parallel_config.micro_batch_num", 4),
             ("train_dataset.num_parallel_workers", 1), ("model.model_config.rotary_dtype", "float32"),
             ("model.model_config.hidden_size", 4100), ("model.model_config.head_dim", 128),
             ("model.model_config.intermediate_size", 11000), ("model.model_config.vocab_size", 32002),
             ("recompute_config.select_recompute", _SEED_RECOMPUTE)),
            (CastRoundTrip(), NDFormatOp(), ParamTransData(), StrategyMismatch(),
             ExpensiveMapOp(per_sample_us=60000.0)),
            fusion_split=False),
    )
}


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise SimulationInputError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None


def scenario_inputs(name: str, config: Any = None, layers: int | None = None) -> tuple[Any, list[Any], int]:
    """(config, faults, default steps) for a scenario; with ``config`` only its faults are applied."""
    sc = get_scenario(name)
    if config is not None:
        return config, list(sc.faults), sc.steps
    return sc.config(layers), list(sc.faults), sc.steps
