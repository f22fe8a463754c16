"""A typed view of a MindFormers-style training YAML: the keys rules and the simulator read.

MindFormers configs spell the same thing several ways across model families
(``num_layers``/``num_hidden_layers``, ``num_heads``/``num_attention_heads``,
``param_init_type``/``params_dtype`` …). :data:`KEYS` maps each logical key to the
JSON pointers it may live at, in preference order; :class:`TrainingConfig`
resolves them once and remembers *where* each value was found, so a rule can
both read a value and point at (or patch) the exact line that set it.

Nothing here edits the file: patches are built as RFC 6902 operations and
applied by :mod:`advisor_core.patch`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

# logical key → candidate JSON pointers (first existing wins; the first is the
# canonical place to *add* the key when it is absent).
KEYS: dict[str, tuple[str, ...]] = {
    # model dimensions
    "model.vocab_size": ("/model/model_config/vocab_size", "/model/model_config/padded_vocab_size"),
    "model.hidden_size": ("/model/model_config/hidden_size",),
    "model.intermediate_size": (
        "/model/model_config/intermediate_size",
        "/model/model_config/ffn_hidden_size",
    ),
    "model.multiple_of": ("/model/model_config/multiple_of",),
    "model.ffn_dim_multiplier": ("/model/model_config/ffn_dim_multiplier",),
    "model.num_layers": ("/model/model_config/num_layers", "/model/model_config/num_hidden_layers"),
    "model.num_heads": ("/model/model_config/num_heads", "/model/model_config/num_attention_heads"),
    # GLM2/3 call the KV-head count multi_query_group_num
    "model.num_kv_heads": ("/model/model_config/n_kv_heads", "/model/model_config/num_key_value_heads",
                           "/model/model_config/multi_query_group_num"),
    "model.head_dim": ("/model/model_config/head_dim",),
    "model.seq_length": ("/model/model_config/seq_length",),
    "model.batch_size": ("/model/model_config/batch_size",),
    "model.compute_dtype": ("/model/model_config/compute_dtype",),
    "model.param_init_type": ("/model/model_config/param_init_type", "/model/model_config/params_dtype"),
    "model.layernorm_compute_type": (
        "/model/model_config/layernorm_compute_type",
        "/model/model_config/layernorm_compute_dtype",
    ),
    "model.softmax_compute_type": (
        "/model/model_config/softmax_compute_type",
        "/model/model_config/softmax_compute_dtype",
    ),
    "model.rotary_dtype": ("/model/model_config/rotary_dtype",),
    "model.use_flash_attention": ("/model/model_config/use_flash_attention",),
    "model.type": ("/model/model_config/type", "/model/model_config/model_type"),
    "model.arch": ("/model/arch/type",),
    "model.offset": ("/model/model_config/offset",),
    # parallel layout
    "parallel_config.data_parallel": ("/parallel_config/data_parallel",),
    "parallel_config.model_parallel": ("/parallel_config/model_parallel",),
    "parallel_config.pipeline_stage": ("/parallel_config/pipeline_stage",),
    "parallel_config.micro_batch_num": ("/parallel_config/micro_batch_num",),
    "parallel_config.expert_parallel": ("/parallel_config/expert_parallel",),
    "parallel_config.context_parallel": ("/parallel_config/context_parallel",),
    "parallel_config.use_seq_parallel": ("/parallel_config/use_seq_parallel",),
    "parallel_config.vocab_emb_dp": ("/parallel_config/vocab_emb_dp",),
    "parallel_config.gradient_aggregation_group": ("/parallel_config/gradient_aggregation_group",),
    "micro_batch_interleave_num": ("/micro_batch_interleave_num",),
    "parallel.parallel_mode": ("/parallel/parallel_mode",),
    "parallel.full_batch": ("/parallel/full_batch",),
    "parallel.enable_parallel_optimizer": ("/parallel/enable_parallel_optimizer",),
    "parallel.all_reduce_fusion_config": ("/parallel/all_reduce_fusion_config",),
    "parallel.strategy_ckpt_save_file": (
        "/parallel/strategy_ckpt_save_file",
        "/parallel/strategy_ckpt_config/save_file",
    ),
    "parallel.strategy_ckpt_load_file": (
        "/parallel/strategy_ckpt_load_file",
        "/parallel/strategy_ckpt_config/load_file",
    ),
    "parallel.search_mode": ("/parallel/search_mode",),
    "parallel.device_num": ("/parallel/device_num",),
    "pipeline_interleave": ("/model/model_config/pipeline_interleave", "/parallel/pipeline_config/pipeline_interleave", "/pipeline_interleave"),
    "pp_interleave_num": ("/model/model_config/pp_interleave_num", "/parallel/pipeline_config/pp_interleave_num", "/pp_interleave_num"),
    # recompute
    "recompute.recompute": ("/recompute_config/recompute",),
    "recompute.select_recompute": ("/recompute_config/select_recompute",),
    "recompute.select_comm_recompute": ("/recompute_config/select_comm_recompute",),
    "recompute.select_recompute_exclude": ("/recompute_config/select_recompute_exclude",),
    "recompute.select_comm_recompute_exclude": ("/recompute_config/select_comm_recompute_exclude",),
    "recompute.parallel_optimizer_comm_recompute": ("/recompute_config/parallel_optimizer_comm_recompute",),
    "recompute.mp_comm_recompute": ("/recompute_config/mp_comm_recompute",),
    "recompute.recompute_slice_activation": ("/recompute_config/recompute_slice_activation",),
    # data pipeline
    "dataset.num_parallel_workers": ("/train_dataset/num_parallel_workers",),
    "dataset.prefetch_size": ("/train_dataset/prefetch_size",),
    "dataset.python_multiprocessing": ("/train_dataset/python_multiprocessing",),
    "dataset.batch_size": ("/train_dataset/batch_size",),
    "dataset.numa_enable": ("/train_dataset/numa_enable",),
    "dataset.data_loader_type": ("/train_dataset/data_loader/type",),
    "dataset.transforms": ("/train_dataset/transforms",),
    # runner / context
    "runner.batch_size": ("/runner_config/batch_size",),
    "runner.epochs": ("/runner_config/epochs",),
    "runner.sink_mode": ("/runner_config/sink_mode",),
    "runner.gradient_accumulation_steps": ("/runner_config/gradient_accumulation_steps",),
    "context.mode": ("/context/mode",),
    "context.device_target": ("/context/device_target",),
    "context.max_device_memory": ("/context/max_device_memory",),
    "context.save_graphs": ("/context/save_graphs",),
    "context.jit_level": ("/context/jit_config/jit_level", "/context/jit_level"),
    "context.precision_mode": ("/context/ascend_config/precision_mode",),
    "runner_wrapper.scale_sense": ("/runner_wrapper/scale_sense",),
}


def split_pointer(pointer: str) -> list[str]:
    """RFC 6901: ``/a~1b/c`` → ``["a/b", "c"]``."""
    if pointer == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]


def join_pointer(*parts: str | int) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


_MISSING = object()


def resolve(data: Any, pointer: str) -> Any:
    """Value at ``pointer`` or the sentinel :data:`_MISSING` (merge keys are visible)."""
    node = data
    for part in split_pointer(pointer):
        if isinstance(node, Mapping):
            if part not in node:
                return _MISSING
            node = node[part]
        elif isinstance(node, (list, tuple)):
            if not part.isdigit() or int(part) >= len(node):
                return _MISSING
            node = node[int(part)]
        else:
            return _MISSING
    return node


@dataclass(frozen=True)
class Located:
    """A config value together with the JSON pointer it was read from (``None`` when absent)."""

    key: str
    value: Any
    pointer: str | None

    @property
    def present(self) -> bool:
        return self.pointer is not None


_DTYPE_BYTES = {
    "float16": 2,
    "fp16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float32": 4,
    "fp32": 4,
    "float64": 8,
    "int8": 1,
}


def dtype_bytes(name: Any, default: int = 2) -> int:
    """Bytes per element of a MindFormers dtype string (``"float16"``, ``"bfloat16"``…)."""
    if not isinstance(name, str):
        return default
    return _DTYPE_BYTES.get(name.strip().lower(), default)


def as_int(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v.strip()):
        return int(v)
    return None


class TrainingConfig:
    """Typed, located access to a training config mapping (plain or ruamel round-trip data)."""

    def __init__(self, data: Mapping[str, Any], path: str | None = None) -> None:
        self.data = data
        self.path = path
        self._cache: dict[str, Located] = {}

    # -- generic access ------------------------------------------------------
    def located(self, key: str) -> Located:
        """The value of logical ``key`` and the pointer it came from."""
        if key in self._cache:
            return self._cache[key]
        candidates = KEYS.get(key)
        if candidates is None:
            raise KeyError(f"unknown config key {key!r}")
        found = Located(key, None, None)
        for ptr in candidates:
            v = resolve(self.data, ptr)
            if v is not _MISSING:
                found = Located(key, v, ptr)
                break
        self._cache[key] = found
        return found

    def get(self, key: str, default: Any = None) -> Any:
        loc = self.located(key)
        return loc.value if loc.present else default

    def pointer(self, key: str) -> str:
        """Where ``key`` is (or, when absent, where it should be added)."""
        loc = self.located(key)
        return loc.pointer if loc.pointer is not None else KEYS[key][0]

    def at(self, pointer: str, default: Any = None) -> Any:
        v = resolve(self.data, pointer)
        return default if v is _MISSING else v

    def has(self, pointer: str) -> bool:
        return resolve(self.data, pointer) is not _MISSING

    def present_keys(self) -> Iterator[Located]:
        for key in KEYS:
            loc = self.located(key)
            if loc.present:
                yield loc

    # -- model -----------------------------------------------------------------
    def int_of(self, key: str) -> int | None:
        return as_int(self.get(key))

    @property
    def hidden_size(self) -> int | None:
        return self.int_of("model.hidden_size")

    @property
    def vocab_size(self) -> int | None:
        return self.int_of("model.vocab_size")

    @property
    def num_layers(self) -> int | None:
        return self.int_of("model.num_layers")

    @property
    def num_heads(self) -> int | None:
        return self.int_of("model.num_heads")

    @property
    def num_kv_heads(self) -> int | None:
        return self.int_of("model.num_kv_heads") or self.num_heads

    @property
    def head_dim(self) -> int | None:
        hd = self.int_of("model.head_dim")
        if hd:
            return hd
        if self.hidden_size and self.num_heads:
            return self.hidden_size // self.num_heads
        return None

    @property
    def seq_length(self) -> int | None:
        return self.int_of("model.seq_length")

    def ffn_hidden_size(self) -> tuple[int | None, str]:
        """FFN inner size and how it was obtained.

        Explicit ``intermediate_size``/``ffn_hidden_size`` wins; otherwise the
        MindFormers Llama rule: ``h' = int(2·4h/3)``, times ``ffn_dim_multiplier``
        if set, rounded up to ``multiple_of`` (Llama2-7B: 4096 → 11008).
        """
        explicit = self.int_of("model.intermediate_size")
        if explicit:
            return explicit, self.pointer("model.intermediate_size")
        h = self.hidden_size
        if not h:
            return None, "unknown"
        multiple_of = self.int_of("model.multiple_of") or 256
        inner = int(2 * (4 * h) / 3)
        mult = self.get("model.ffn_dim_multiplier")
        if isinstance(mult, (int, float)) and not isinstance(mult, bool) and mult:
            inner = int(mult * inner)
        inner = multiple_of * ((inner + multiple_of - 1) // multiple_of)
        return inner, "derived from hidden_size and multiple_of"

    @property
    def compute_dtype(self) -> str:
        v = self.get("model.compute_dtype")
        return str(v).lower() if v else "float16"

    # -- parallel -------------------------------------------------------------
    @property
    def data_parallel(self) -> int:
        return self.int_of("parallel_config.data_parallel") or 1

    @property
    def model_parallel(self) -> int:
        return self.int_of("parallel_config.model_parallel") or 1

    @property
    def pipeline_stages(self) -> int:
        return self.int_of("parallel_config.pipeline_stage") or 1

    @property
    def micro_batch_num(self) -> int:
        return self.int_of("parallel_config.micro_batch_num") or 1

    @property
    def device_count(self) -> int:
        """``data_parallel × model_parallel × pipeline_stage`` (× context/expert where they multiply)."""
        cp = self.int_of("parallel_config.context_parallel") or 1
        return self.data_parallel * self.model_parallel * self.pipeline_stages * cp

    @property
    def micro_batch_size(self) -> int:
        return self.int_of("runner.batch_size") or self.int_of("dataset.batch_size") or self.int_of("model.batch_size") or 1

    @property
    def gradient_accumulation_steps(self) -> int:
        return self.int_of("runner.gradient_accumulation_steps") or 1

    def layers_per_stage(self) -> list[int]:
        """Layer count of each pipeline stage (MindFormers ``offset`` honoured when a list)."""
        n, pp = self.num_layers or 0, self.pipeline_stages
        base = [n // pp + (1 if i < n % pp else 0) for i in range(pp)] if pp else []
        offset = self.get("model.offset")
        if isinstance(offset, list) and len(offset) == pp and all(as_int(o) is not None for o in offset):
            even = [n // pp] * pp
            adjusted = [e + int(o) for e, o in zip(even, offset)]
            if sum(adjusted) == n and all(a >= 0 for a in adjusted):
                return adjusted
        return base

    # -- data pipeline ----------------------------------------------------------
    @property
    def num_parallel_workers(self) -> int | None:
        return self.int_of("dataset.num_parallel_workers")

    @property
    def prefetch_size(self) -> int | None:
        return self.int_of("dataset.prefetch_size")
