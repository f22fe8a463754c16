"""Training-config values: ruamel → plain Python, and the model family the rules model."""

from __future__ import annotations

from typing import Any

from advisor_core.config.plain import json_plain

plain = json_plain  # ruamel scalars/containers → plain Python (one implementation, in advisor_core)


LLAMA_TYPES = ("LlamaConfig", "LlamaForCausalLM")


def is_llama(cfg: Any) -> bool:
    """MindFormers' legacy Llama family (Llama 2/3, Qwen 2.5 in its Llama form), whose layer we model."""
    return any(str(cfg.get(k, "")) in LLAMA_TYPES for k in ("model.type", "model.arch"))
