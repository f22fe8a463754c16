"""What the training config asks the devices to do: model dimensions, parallel layout, data pipeline.

:func:`workload_from_config` reads a :class:`~advisor_core.config.training.TrainingConfig`,
checks that MindFormers/MindSpore would accept it (raising :class:`SimulationInputError`
with the key and the reason, e.g. ``parallel_config.model_parallel: 3 does not divide
num_heads 32``) and returns a frozen :class:`Workload`. Nothing here knows about time.

Rank layout (MindSpore/Megatron order, tensor parallel innermost)::

    rank = stage · (dp · mp) + dp_index · mp + mp_index
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor_core.config.training import TrainingConfig, as_int
from advisor_core.simulate.errors import SimulationInputError

__all__ = ["Workload", "DatasetSpec", "workload_from_config", "DTYPE_BYTES", "ir_dtype", "cann_dtype"]

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int32": 4, "int64": 8, "bool": 1, "uint8": 1}
_IR_DTYPE = {"float16": "Float16", "bfloat16": "BFloat16", "float32": "Float32", "int32": "Int32", "int64": "Int64",
             "bool": "Bool", "uint8": "UInt8"}
_CANN_DTYPE = {"float16": "DT_FLOAT16", "bfloat16": "DT_BF16", "float32": "FLOAT", "int32": "INT32", "int64": "INT64",
               "bool": "BOOL", "uint8": "UINT8"}
_ALIASES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "half": "float16", "float": "float32"}


def norm_dtype(value: Any, key: str, default: str) -> str:
    if value is None:
        return default
    d = str(value).strip().lower()
    d = _ALIASES.get(d, d)
    if d not in ("float16", "bfloat16", "float32"):
        raise SimulationInputError(f"{key}: {value!r} is not a dtype the simulator knows (float16, bfloat16, float32)")
    return d


def ir_dtype(d: str) -> str:
    """MindSpore IR dtype name (``Float16``)."""
    return _IR_DTYPE[d]


def cann_dtype(d: str) -> str:
    """CANN op_summary dtype name (``DT_FLOAT16``)."""
    return _CANN_DTYPE[d]


@dataclass(frozen=True)
class DatasetSpec:
    """The MindData pipeline the config describes (``train_dataset``)."""

    loader: str  # MindDataset, ImageFolderDataset …
    num_parallel_workers: int
    workers_pointer: str
    prefetch_size: int
    python_multiprocessing: bool
    batch_size: int  # samples per device step
    transforms: tuple[tuple[str, bool], ...]  # (op type, is Python op)
    sample_bytes: int  # bytes of one sample as read from disk
    epochs: int


@dataclass(frozen=True)
class Workload:
    """Per-job dimensions (global, before slicing) and the parallel layout."""

    hidden: int
    ffn: int
    vocab: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    seq: int
    micro_batch_size: int
    compute_dtype: str
    param_dtype: str
    rotary_fp32: bool
    use_flash_attention: bool
    fine_grain_interleave: bool
    dp: int
    mp: int
    pp: int
    micro_batches: int  # per step (micro_batch_num with pp > 1, gradient_accumulation_steps otherwise)
    stage_layers: tuple[tuple[int, ...], ...]
    parallel_optimizer: bool
    fusion_config: tuple[int, ...] | None
    parallel_mode: str
    vocab_emb_dp: bool
    dataset: DatasetSpec
    extra: dict[str, Any] = field(default_factory=dict)

    # -- derived ---------------------------------------------------------------------------
    @property
    def q(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def world(self) -> int:
        return self.dp * self.mp * self.pp

    def rank_of(self, stage: int, dp_index: int, mp_index: int) -> int:
        return stage * self.dp * self.mp + dp_index * self.mp + mp_index

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(stage, dp index, mp index) of a rank."""
        per_stage = self.dp * self.mp
        stage, rest = divmod(rank, per_stage)
        dpi, mpi = divmod(rest, self.mp)
        return stage, dpi, mpi

    def stage_ranks(self, stage: int) -> list[int]:
        base = stage * self.dp * self.mp
        return list(range(base, base + self.dp * self.mp))

    def mp_group(self, rank: int) -> list[int]:
        s, d, _ = self.coords(rank)
        return [self.rank_of(s, d, m) for m in range(self.mp)]

    def dp_group(self, rank: int) -> list[int]:
        s, _, m = self.coords(rank)
        return [self.rank_of(s, d, m) for d in range(self.dp)]

    def pp_group(self, rank: int) -> list[int]:
        _, d, m = self.coords(rank)
        return [self.rank_of(s, d, m) for s in range(self.pp)]


def _pos_int(cfg: TrainingConfig, key: str, label: str, default: int | None = None) -> int:
    loc = cfg.located(key)
    if not loc.present:
        if default is not None:
            return default
        raise SimulationInputError(f"{label}: missing (the simulator needs it to size the model)")
    v = as_int(loc.value)
    if v is None or v <= 0:
        raise SimulationInputError(f"{label}: {loc.value!r} is not a positive integer")
    return v


def _label(cfg: TrainingConfig, key: str) -> str:
    """Dotted spelling of where ``key`` lives (or would be added)."""
    return cfg.pointer(key).lstrip("/").replace("/", ".")


def _dataset(cfg: TrainingConfig, samples_per_step: int, seq: int) -> DatasetSpec:
    data = cfg.data
    td = data.get("train_dataset") if hasattr(data, "get") else None
    td = td if isinstance(td, dict) else {}
    loader = "MindDataset"
    dl = td.get("data_loader")
    if isinstance(dl, dict) and dl.get("type"):
        loader = str(dl.get("type"))
    workers_loc = cfg.located("dataset.num_parallel_workers")
    if workers_loc.present:
        w = as_int(workers_loc.value)
        if w is None or w <= 0:
            raise SimulationInputError(f"train_dataset.num_parallel_workers: {workers_loc.value!r} is not a positive integer")
    else:
        w = 8  # MindSpore's default num_parallel_workers
    prefetch = cfg.located("dataset.prefetch_size")
    p = 16
    if prefetch.present:
        p = as_int(prefetch.value) or 0
        if p <= 0:
            raise SimulationInputError(f"train_dataset.prefetch_size: {prefetch.value!r} is not a positive integer")
    pym = bool(cfg.get("dataset.python_multiprocessing") or False)
    transforms: list[tuple[str, bool]] = []
    raw = td.get("transforms")
    if isinstance(raw, list):
        for i, t in enumerate(raw):
            if isinstance(t, dict) and t.get("type"):
                name = str(t["type"])
                transforms.append((name, bool(t.get("python", False)) or name.startswith("Py")))
            elif isinstance(t, str):
                transforms.append((t, t.startswith("Py")))
            else:
                raise SimulationInputError(f"train_dataset.transforms.{i}: expected a mapping with a 'type' key")
    is_image = bool(transforms) and any(t[0] in _IMAGE_OPS for t in transforms)
    sample_bytes = 110_000 if is_image else seq * 4  # a JPEG vs int32 token ids
    epochs = as_int(cfg.get("runner.epochs")) or 1
    return DatasetSpec(loader, w, "/train_dataset/num_parallel_workers", p, pym, samples_per_step, tuple(transforms),
                       sample_bytes, epochs)


_IMAGE_OPS = {"Decode", "RandomCropDecodeResize", "Resize", "CenterCrop", "RandomResizedCrop"}


def workload_from_config(cfg: TrainingConfig) -> Workload:
    """Check the config and derive the :class:`Workload` (see module docstring)."""
    h = _pos_int(cfg, "model.hidden_size", "model.model_config.hidden_size")
    layers = _pos_int(cfg, "model.num_layers", "model.model_config.num_layers")
    heads = _pos_int(cfg, "model.num_heads", "model.model_config.num_heads")
    seq = _pos_int(cfg, "model.seq_length", "model.model_config.seq_length")
    vocab = _pos_int(cfg, "model.vocab_size", "model.model_config.vocab_size")
    kv_heads = _pos_int(cfg, "model.num_kv_heads", "model.model_config.n_kv_heads", default=heads)
    head_loc = cfg.located("model.head_dim")
    if head_loc.present:
        head_dim = _pos_int(cfg, "model.head_dim", "model.model_config.head_dim")
    else:
        if h % heads:
            raise SimulationInputError(
                f"model.model_config.num_heads: {heads} does not divide hidden_size {h} (set head_dim explicitly or change num_heads)"
            )
        head_dim = h // heads
    if heads % kv_heads:
        raise SimulationInputError(f"model.model_config.n_kv_heads: {kv_heads} does not divide num_heads {heads}")
    ffn, _how = cfg.ffn_hidden_size()
    if not ffn or ffn <= 0:
        raise SimulationInputError("model.model_config.intermediate_size: cannot be derived (set intermediate_size or multiple_of)")

    dp = _pos_int(cfg, "parallel_config.data_parallel", "parallel_config.data_parallel", default=1)
    mp = _pos_int(cfg, "parallel_config.model_parallel", "parallel_config.model_parallel", default=1)
    pp = _pos_int(cfg, "parallel_config.pipeline_stage", "parallel_config.pipeline_stage", default=1)
    if heads % mp:
        raise SimulationInputError(f"parallel_config.model_parallel: {mp} does not divide num_heads {heads}")
    if kv_heads % mp:
        raise SimulationInputError(f"parallel_config.model_parallel: {mp} does not divide n_kv_heads {kv_heads}")
    if ffn % mp:
        raise SimulationInputError(f"parallel_config.model_parallel: {mp} does not divide the FFN size {ffn}")
    if vocab % mp:
        raise SimulationInputError(
            f"model.model_config.vocab_size: {vocab} is not divisible by parallel_config.model_parallel {mp} "
            "(the lm_head is split over model_parallel)"
        )
    if pp > layers:
        raise SimulationInputError(f"parallel_config.pipeline_stage: {pp} stages for only {layers} layers")
    if pp > 1:
        m = _pos_int(cfg, "parallel_config.micro_batch_num", "parallel_config.micro_batch_num", default=1)
        if m < pp:
            raise SimulationInputError(
                f"parallel_config.micro_batch_num: {m} is smaller than pipeline_stage {pp} (MindFormers requires micro_batch_num >= pipeline_stage)"
            )
    else:
        m = _pos_int(cfg, "runner.gradient_accumulation_steps", "runner_config.gradient_accumulation_steps", default=1)
    b = cfg.micro_batch_size
    if b <= 0:
        raise SimulationInputError(f"runner_config.batch_size: {b!r} is not a positive integer")

    compute = norm_dtype(cfg.get("model.compute_dtype"), "model.model_config.compute_dtype", "float16")
    param = norm_dtype(cfg.get("model.param_init_type"), "model.model_config.param_init_type", "float16")
    rotary = norm_dtype(cfg.get("model.rotary_dtype"), "model.model_config.rotary_dtype", compute)
    rotary_fp32 = rotary == "float32" and compute in ("float16", "bfloat16")

    counts = cfg.layers_per_stage() or [layers]
    if any(c <= 0 for c in counts):
        raise SimulationInputError(f"model.model_config.offset: leaves a pipeline stage without layers ({counts})")
    stages: list[tuple[int, ...]] = []
    start = 0
    for c in counts:
        stages.append(tuple(range(start, start + c)))
        start += c

    fusion = cfg.located("parallel.all_reduce_fusion_config")
    fusion_cfg: tuple[int, ...] | None = None
    if fusion.present and fusion.value not in (None, [], False):
        vals = fusion.value if isinstance(fusion.value, list) else None
        ints = [as_int(v) for v in vals] if vals is not None else [None]
        if any(v is None or v <= 0 for v in ints) or ints != sorted(set(ints)):  # type: ignore[type-var]
            raise SimulationInputError(
                f"parallel.all_reduce_fusion_config: {fusion.value!r} must be a strictly increasing list of positive parameter indices"
            )
        fusion_cfg = tuple(int(v) for v in ints)  # type: ignore[arg-type]
    mode = cfg.get("parallel.parallel_mode")
    mode_name = {0: "data_parallel", 1: "semi_auto_parallel", 2: "auto_parallel", 3: "hybrid_parallel"}.get(
        as_int(mode) if as_int(mode) is not None else -1, str(mode) if mode is not None else "semi_auto_parallel"
    )
    # MindFormers' fine-grained multi-copy: inputs stay 2-D, the Linear reshapes disappear.
    fine_grain = (as_int(_model_cfg(cfg).get("fine_grain_interleave")) or 1) > 1
    samples = b * m
    ds = _dataset(cfg, samples, seq)
    return Workload(
        hidden=h, ffn=ffn, vocab=vocab, layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, seq=seq,
        micro_batch_size=b, compute_dtype=compute, param_dtype=param, rotary_fp32=rotary_fp32,
        use_flash_attention=cfg.get("model.use_flash_attention", True) is not False,
        fine_grain_interleave=fine_grain, dp=dp, mp=mp, pp=pp, micro_batches=m, stage_layers=tuple(stages),
        parallel_optimizer=bool(cfg.get("parallel.enable_parallel_optimizer") or False), fusion_config=fusion_cfg,
        parallel_mode=mode_name, vocab_emb_dp=cfg.get("parallel_config.vocab_emb_dp", True) is not False, dataset=ds,
    )


def _model_cfg(cfg: TrainingConfig) -> dict:
    m = cfg.at("/model/model_config", {})
    return m if isinstance(m, dict) else {}
