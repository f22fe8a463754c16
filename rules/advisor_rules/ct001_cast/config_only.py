"""The config alone (``advisor lint``): mixed-precision keys that make every layer cast up and back down."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from advisor_core.engine import Evidence, Finding, RuleContext, Safety, Severity
from advisor_rules.ct001_cast.chains import COMPUTE_16BIT

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.ct001_cast.rule import CastExcess


def config_only(rule: CastExcess, ctx: RuleContext) -> Iterable[Finding]:
    """Mixed-precision keys that make every layer cast up and back down: informational (no ranked saving).

    ``rotary_dtype: float32`` or ``softmax_compute_type: float32`` in a 16-bit model are deliberate
    precision settings in many MindFormers configs; priced from bytes alone they would top the report,
    so the rough cost is in the message and the evidence, and the profile or IR checks rank the real one.
    """
    cfg = ctx.config
    assert cfg is not None
    compute = cfg.compute_dtype
    if compute not in COMPUTE_16BIT:
        return
    h, s, b, mp = cfg.hidden_size or 0, cfg.seq_length or 0, cfg.micro_batch_size, cfg.model_parallel
    q = (cfg.num_heads or 1) * (cfg.head_dim or 1)
    kv = (cfg.num_kv_heads or cfg.num_heads or 1) * (cfg.head_dim or 1)
    layers = -(-(cfg.num_layers or 0) // max(cfg.pipeline_stages, 1))
    micro = cfg.micro_batch_num if cfg.pipeline_stages > 1 else cfg.gradient_accumulation_steps
    checks = []
    if str(cfg.get("model.rotary_dtype", "")).lower() in ("float32", "fp32"):
        # q and k up (2→4 bytes) and back down (4→2), forward and backward.
        elements = b * s * (q + kv) / mp
        checks.append(("model.rotary_dtype", "rotary embedding", 4, elements))
    fa = cfg.get("model.use_flash_attention")
    if str(cfg.get("model.softmax_compute_type", "")).lower() in ("float32", "fp32") and fa is False:
        heads = (cfg.num_heads or 1) / mp
        checks.append(("model.softmax_compute_type", "softmax", 2, b * heads * s * s))
    for key, what, casts, elements in checks:
        nbytes = elements * 6 * casts * layers * max(micro, 1)
        cost = nbytes / (rule.options.hbm_gbps * 1e3)
        loc = ctx.config_location(key)
        patch = ctx.config_patch(
            f"set {key.split('.', 1)[1]} to {compute}",
            [(key, compute)],
            safety=Safety.UNSAFE,
            description=f"run the {what} in {compute} like the rest of the model (precision change)",
        )
        yield Finding(
            code=rule.code,
            rule=rule.name,
            title=f"{key.split('.', 1)[1]}: float32 in a {compute} model forces Cast pairs around the {what} in every layer",
            message=(
                f"With compute_dtype {compute}, {key.split('.', 1)[1]}: float32 makes MindFormers cast the {what}'s inputs "
                f"to float32 and back in every layer, forward and backward: about {casts} Cast kernels per layer and "
                f"{nbytes / 1e9:.1f} GB of memory traffic per step on each rank ({layers} layers × {max(micro, 1)} micro "
                f"batch(es)), roughly {cost / 1000:.2f} ms at {rule.options.hbm_gbps:.0f} GB/s if the Casts ran at memory "
                "speed. It is a deliberate precision setting in many MindFormers configs: nothing is ranked from the "
                "config alone — a profile or an IR dump measures what it really costs. Keep it if the loss curve needs it."
            ),
            severity=Severity.LOW,
            saving_us=None,  # informational: a precision choice priced from bytes is not a measured saving
            confidence=0.5,
            evidence=[
                Evidence(name="compute_dtype", value=compute),
                Evidence(name="casts_per_layer", value=casts),
                Evidence(name="bytes_per_step", value=round(nbytes), unit="bytes", source="config dims"),
                Evidence(name="cost_if_memory_bound", value=round(cost, 3), unit="µs", source="bytes / hbm_gbps"),
            ],
            locations=[loc] if loc else [],
            patches=[patch] if patch else [],
            tags=list(rule.tags),
        )
