"""Training-config values: ruamel → plain Python, and the model family the rules model."""

from __future__ import annotations

from typing import Any


def plain(value: Any) -> Any:
    """ruamel scalars/containers → plain Python."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


LLAMA_TYPES = ("LlamaConfig", "LlamaForCausalLM")


def is_llama(cfg: Any) -> bool:
    """MindFormers' legacy Llama family (Llama 2/3, Qwen 2.5 in its Llama form), whose layer we model."""
    return any(str(cfg.get(k, "")) in LLAMA_TYPES for k in ("model.type", "model.arch"))
