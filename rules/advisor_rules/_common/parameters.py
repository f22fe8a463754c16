"""Trainable parameters of a rank, in first-use order: from an IR file or from a Llama config."""

from __future__ import annotations

from typing import Any

from advisor_core.config.parameter_names import NOT_WEIGHT_PREFIXES


def is_model_weight(name: str) -> bool:
    """A trainable model parameter name (not an optimizer state, counter or loss-scale value)."""
    return "." in name and not name.startswith(NOT_WEIGHT_PREFIXES)


# Parameters that are state, not weights: BatchNorm's running statistics (no gradient).
_NOT_TRAINED = (".moving_mean", ".moving_variance")


def trainable_parameters(params: list[tuple[str, tuple[int, ...], str | None]]) -> list[tuple[str, tuple[int, ...], str | None]]:
    """The parameters that get a gradient, in the order given (an IR lists them as the model defines them).

    A training graph holds the optimizer's state for each trainable parameter under the parameter's
    name with a prefix (``moments.``, ``adam_m.``, ``accum.``, ``stat.``…): whatever the optimizer, a
    parameter with such a twin is trained, and the twins are not parameters of the model. Without
    any twin (a graph without optimizer), the names decide (:func:`is_model_weight`, BatchNorm's
    running statistics left out).
    """
    names = {n for n, _, _ in params}
    by_head: dict[str, list[str]] = {}
    for n in names:
        by_head.setdefault(n.partition(".")[0], []).append(n)
    # an optimizer state prefix: every name under it is another parameter's name behind it
    prefixes = [h for h, ns in by_head.items() if all(n.partition(".")[2] in names for n in ns)]
    trained = {n.partition(".")[2] for h in prefixes for n in by_head[h]}
    states = {n for h in prefixes for n in by_head[h]}
    if trained:
        return [p for p in params if p[0] in trained and p[0] not in states]
    return [p for p in params if is_model_weight(p[0]) and not p[0].endswith(_NOT_TRAINED)]


def ir_parameters(ir: Any) -> list[tuple[str, tuple[int, ...], str | None]]:
    """``(name, per-rank shape, dtype)`` of every parameter with a default value in an IR file."""
    out = []
    for p in getattr(ir, "params", None) or []:
        if not (getattr(p, "is_weight", False) or getattr(p, "has_default", False)):
            continue
        shape = getattr(p.type, "shape", None) if p.type is not None else None
        if shape is None or any(d is None or d < 0 for d in shape):
            continue
        out.append((p.name or "", tuple(int(d) for d in shape), getattr(p.type, "dtype", None)))
    return out


def llama_parameters(cfg: Any, stage: int | None = None) -> list[tuple[str, tuple[int, ...], str | None]]:
    """Per-rank ``(name, shape, dtype)`` of a MindFormers Llama model from its config, in first-use order.

    Column-parallel weights (wq/wk/wv/w1/w3, lm_head) are split on their output dim,
    row-parallel ones (wo/w2) on their input dim, by ``model_parallel``; with pipeline
    parallel, ``stage`` selects that stage's layers (embedding on the first, final norm and
    head on the last). Used when no IR dump lists the parameters.
    """
    h, layers = cfg.hidden_size, cfg.num_layers
    if not h or not layers:
        return []
    mp, pp = max(cfg.model_parallel, 1), max(cfg.pipeline_stages, 1)
    f, _ = cfg.ffn_hidden_size()
    f = f or 0
    hd = cfg.head_dim or (h // (cfg.num_heads or 1))
    q = (cfg.num_heads or 1) * hd
    kv = (cfg.num_kv_heads or cfg.num_heads or 1) * hd
    v = cfg.vocab_size or 0
    dt = {"float32": "Float32", "bfloat16": "BFloat16"}.get(str(cfg.get("model.param_init_type") or "float16").lower(), "Float16")
    counts = cfg.layers_per_stage() if pp > 1 else [layers]
    s = 0 if stage is None else stage
    first = sum(counts[:s]) if stage is not None else 0
    mine = counts[s] if stage is not None and s < len(counts) else layers
    out: list[tuple[str, tuple[int, ...], str | None]] = []
    if stage is None or s == 0:
        out.append(("model.tok_embeddings.embedding_weight", (v, h), dt))
    for i in range(first, first + mine):
        p = f"model.layers.{i}."
        out += [(p + "attention_norm.weight", (h,), "Float32"), (p + "attention.wq.weight", (q // mp, h), dt),
                (p + "attention.wk.weight", (kv // mp, h), dt), (p + "attention.wv.weight", (kv // mp, h), dt),
                (p + "attention.wo.weight", (h, q // mp), dt), (p + "ffn_norm.weight", (h,), "Float32"),
                (p + "feed_forward.w1.weight", (f // mp, h), dt), (p + "feed_forward.w3.weight", (f // mp, h), dt),
                (p + "feed_forward.w2.weight", (h, f // mp), dt)]
    if stage is None or s == pp - 1:
        out += [("model.norm_out.weight", (h,), "Float32"), ("lm_head.weight", (v // mp, h), dt)]
    return out
