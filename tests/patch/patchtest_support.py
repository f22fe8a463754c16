"""Shared pieces of the patch tests: fixture paths, patch builders, the golden-file cases."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from advisor_core.config.document import ConfigDocument
from advisor_core.diagnostics import DiagnosticSink
from advisor_core.engine.findings import Patch, PatchOp, Safety

TESTS = Path(__file__).resolve().parents[1]
CONFIGS = TESTS / "data" / "configs"
GOLDEN = TESTS / "data" / "patch_golden"


@lru_cache(maxsize=None)
def load(name: str, folder: str = str(CONFIGS)) -> ConfigDocument:
    """A fixture config (cached: documents are never modified by the code under test)."""
    sink = DiagnosticSink()
    doc = ConfigDocument.load(Path(folder) / name, sink)
    assert doc is not None, [d.render() for d in sink]
    return doc


def patch(title: str, *ops: tuple[Any, ...], safety: Safety = Safety.UNSAFE) -> Patch:
    """``patch("t", ("test", "/a", 1), ("replace", "/a", 2), ("remove", "/b"))``."""
    return Patch(
        title=title,
        safety=safety,
        ops=[PatchOp(op=o[0], path=o[1], value=o[2] if len(o) > 2 else None) for o in ops],
    )


REGEXES = [
    "feed_forward\\.mul",
    "feed_forward\\.w1\\.activation\\.silu",
    "feed_forward\\.w1\\.reshape",
    "feed_forward\\.w2\\.reshape",
]


@dataclass(frozen=True)
class GoldenCase:
    """One golden-file test: patches applied to ``config`` must give ``golden/<name>.yaml`` exactly."""

    name: str
    config: str
    patches: tuple[Patch, ...]
    notes: tuple[str, ...] = ()  # substrings that must appear in the result's notes
    insert_after: dict[str, str] = field(default_factory=dict)


GOLDEN_CASES = [
    GoldenCase(
        "llama2_7b_num_parallel_workers",
        "pretrain_llama2_7b.yaml",
        (patch("More dataset workers", ("test", "/train_dataset/num_parallel_workers", 8),
               ("replace", "/train_dataset/num_parallel_workers", 16)),),
        notes=("&train_dataset", "/train_dataset_task/dataset_config/num_parallel_workers"),
    ),
    GoldenCase(
        "llama2_7b_select_recompute_list",
        "pretrain_llama2_7b.yaml",
        (patch("Select recompute of the FFN", ("test", "/recompute_config/select_recompute", False),
               ("replace", "/recompute_config/select_recompute", REGEXES)),),
    ),
    GoldenCase(
        "llama2_7b_vocab_size",
        "pretrain_llama2_7b.yaml",
        (patch("Pad the vocabulary", ("test", "/model/model_config/vocab_size", 32000),
               ("replace", "/model/model_config/vocab_size", 32768)),),
    ),
    GoldenCase(
        "llama2_7b_floats",
        "pretrain_llama2_7b.yaml",
        (patch("Learning rate", ("test", "/optimizer/learning_rate", 5e-5), ("replace", "/optimizer/learning_rate", 1e-4),
               ("replace", "/lr_schedule/warmup_ratio", 0.05), ("replace", "/model/model_config/rms_norm_eps", 1e-6)),),
    ),
    GoldenCase(
        "llama2_7b_all_reduce_fusion_config",
        "pretrain_llama2_7b.yaml",
        (patch("Fuse gradient all-reduce", ("add", "/parallel/all_reduce_fusion_config", [85, 160])),),
    ),
    GoldenCase(
        "qwen3_data_parallel",
        "pretrain_qwen3_32b_4k.yaml",
        (patch("More data parallelism", ("test", "/parallel_config/data_parallel", 1),
               ("replace", "/parallel_config/data_parallel", 2)),),
        notes=("&dp", "/parallel/dataset_strategy/0/0", "/parallel/dataset_strategy/4/0"),
    ),
    GoldenCase(
        "qwen3_dataset_strategy_multiline_flow",
        "pretrain_qwen3_32b_4k.yaml",
        (patch("Shard labels", ("test", "/parallel/dataset_strategy/1/1", 1), ("replace", "/parallel/dataset_strategy/1/1", 2)),),
    ),
    GoldenCase(
        "qwen2_5_select_recompute_new_key",
        "finetune_qwen2_5_7b_8k.yaml",
        (patch("Recompute w3 reshape", ("test", "/recompute_config/select_recompute/feed_forward\\.w2\\.reshape", [14, 14]),
               ("add", "/recompute_config/select_recompute/feed_forward\\.w3\\.reshape", [14, 14])),),
    ),
    GoldenCase(
        "qwen2_5_bool_case_and_last_line",
        "finetune_qwen2_5_7b_8k.yaml",
        (patch("Fuse QKV", ("test", "/model/model_config/qkv_concat", False), ("replace", "/model/model_config/qkv_concat", True)),
         patch("AICC url", ("replace", "/remote_save_url", "obs://bucket/run"))),
    ),
    GoldenCase(
        "glm4_remove_full_batch",
        "finetune_glm4_9b.yaml",
        (patch("Drop full_batch", ("test", "/parallel/full_batch", True), ("remove", "/parallel/full_batch")),),
    ),
    GoldenCase(
        "glm4_recompute_element",
        "finetune_glm4_9b.yaml",
        (patch("Recompute stage 1", ("test", "/recompute_config/recompute/1", 3), ("replace", "/recompute_config/recompute/1", 4)),),
    ),
    GoldenCase(
        "glm4_add_before_section_comments",
        "finetune_glm4_9b.yaml",
        (patch("Communication recompute", ("add", "/recompute_config/select_comm_recompute", [6, 3, 2, 3])),
         patch("Ascend precision", ("add", "/context/ascend_config", {"precision_mode": "must_keep_origin_dtype"})),
         patch("Trainer task", ("add", "/trainer/task", "text_generation"))),
    ),
    GoldenCase(
        "glm4_remove_next_to_comment_blocks",
        "finetune_glm4_9b.yaml",
        (patch("a", ("remove", "/trainer/model_name")),
         patch("b", ("remove", "/runner_config")),
         patch("c", ("remove", "/context/memory_optimize_level")),
         patch("d", ("remove", "/recompute_config/recompute_slice_activation"))),
    ),
    GoldenCase(
        "glm4_replace_keeps_eol_comments",
        "finetune_glm4_9b.yaml",
        (patch("a", ("replace", "/parallel/full_batch", False), ("replace", "/parallel/gradients_mean", True)),
         patch("b", ("replace", "/context/mode", 1), ("replace", "/context/max_device_memory", "60GB")),
         patch("c", ("replace", "/model/model_config/use_flash_attention", False)),
         patch("d", ("replace", "/output_dir", "./out"), ("replace", "/lr_schedule/total_steps", 1000))),
    ),
    GoldenCase(
        "glm4_insert_after_sibling",
        "finetune_glm4_9b.yaml",
        (patch("Parallel optimizer threshold", ("add", "/parallel/parallel_optimizer_config", {"parallel_optimizer_threshold": 64})),),
        insert_after={"/parallel/parallel_optimizer_config": "enable_parallel_optimizer"},
    ),
    GoldenCase(
        "telechat_flow_spacing",
        "finetune_telechat_115b.yaml",
        (patch("Comm recompute", ("test", "/recompute_config/select_comm_recompute/3", 11),
               ("replace", "/recompute_config/select_comm_recompute/3", 12)),
         patch("JIT", ("replace", "/context/jit_config/jit_level", "O2"))),
    ),
]
