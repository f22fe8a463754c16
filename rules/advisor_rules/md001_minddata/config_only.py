"""The config alone (``advisor lint``): a CPU-heavy map with too few workers for the estimated device step."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable

from advisor_core.engine import Evidence, Finding, RuleContext, Safety, Severity
from advisor_rules._common import ASSUMED_CUBE_TFLOPS
from advisor_rules.md001_minddata.cores import SERVER_NPUS

if TYPE_CHECKING:  # pragma: no cover
    from advisor_rules.md001_minddata.rule import MinddataBottleneck

# Config alone: assumed CPU cost of one sample per transform on one host core (µs; ImageNet-size JPEGs).
# JPEG decode dominates (libjpeg-turbo ≈ 1.5–2.5 ms for a ~110 kB image); the rest are per-pixel passes.
TRANSFORM_US = {
    "RandomCropDecodeResize": 2200.0, "Decode": 1800.0, "DecodeVideo": 5000.0, "RandomResizedCrop": 400.0,
    "Resize": 350.0, "Normalize": 400.0, "NormalizePad": 420.0, "Rescale": 200.0, "ToTensor": 300.0, "HWC2CHW": 150.0,
    "CenterCrop": 50.0, "RandomCrop": 60.0, "RandomHorizontalFlip": 40.0, "RandomVerticalFlip": 40.0,
    "RandomColorAdjust": 900.0, "AutoAugment": 1500.0, "RandAugment": 1500.0, "TypeCast": 5.0,
}
UNKNOWN_US = 200.0
PY_US = 500.0
_MS_DEFAULT_WORKERS = 8  # mindspore.dataset.config default num_parallel_workers
_ASSUMED_HOST_CORES = 192  # Atlas 800T A2 host: 4 × 48-core Kunpeng 920


def config_only(rule: MinddataBottleneck, ctx: RuleContext) -> Iterable[Finding]:
    """A map of CPU-heavy transforms with too few workers for the device's step (estimated, no profile)."""
    cfg = ctx.config
    if cfg is None:
        ctx.skip("no profile and no training config")
        return
    transforms = transform_names(cfg.get("dataset.transforms"))
    if not transforms:
        ctx.skip("no profile, and train_dataset has no map transforms (a text pipeline's TypeCast is cheap)")
        return
    per_sample = sum(TRANSFORM_US.get(t, PY_US if is_python(t) else UNKNOWN_US) for t in transforms)
    if per_sample < rule.options.heavy_sample_us:
        ctx.skip(f"no profile; the map's transforms ({', '.join(transforms)}) cost about {per_sample:.0f} µs per sample: light")
        return
    explicit = cfg.num_parallel_workers
    workers = explicit or _MS_DEFAULT_WORKERS
    batch = cfg.int_of("dataset.batch_size") or cfg.micro_batch_size
    cpu_batch = batch * per_sample  # µs of one core per batch
    device_us = device_step_estimate(cfg)
    bound = rule.options.cores_per_device or int((dict(ctx.settings.get("host") or {})).get("cpu_cores_per_device") or 0)
    bound_src = "configured" if bound else f"assumed: {_ASSUMED_HOST_CORES} host cores / {SERVER_NPUS} NPUs"
    bound = bound or _ASSUMED_HOST_CORES // SERVER_NPUS
    head = 1.0 - rule.options.headroom_pct / 100.0
    target = math.ceil(cpu_batch / (device_us * head)) if device_us else _MS_DEFAULT_WORKERS
    target = min(target, bound)
    if target <= workers:
        ctx.skip(f"no profile; {workers} worker(s) give the map about {cpu_batch / workers / 1000:.1f} ms per batch"
                 + (f", under the estimated {device_us / 1000:.1f} ms device step" if device_us else ""))
        return
    now, after = cpu_batch / workers, cpu_batch / target
    saving = max(0.0, max(device_us, now) - max(device_us, after)) if device_us else None
    starved = device_us is not None and now > device_us
    what = ", ".join(transforms)
    msg = [
        f"train_dataset's map runs {what}: about {per_sample / 1000:.2f} ms of one CPU core per sample "
        f"(assumed typical costs for ImageNet-size images), {cpu_batch / 1000:.1f} ms per batch of {batch}.",
        f"With {workers} worker(s)" + ("" if explicit else " (num_parallel_workers not set: MindSpore's default)")
        + f" a batch takes about {now / 1000:.1f} ms"
        + (f", while the device step is estimated at {device_us / 1000:.1f} ms from the model's FLOPs at "
           f"{ASSUMED_CUBE_TFLOPS:.0f} TFLOPS" if device_us else "") + ".",
    ]
    if starved:
        msg.append(f"The device would wait about {(now - device_us) / 1000:.1f} ms per step for data.")
    if any(is_python(t) for t in transforms) and cfg.get("dataset.python_multiprocessing") is not True:
        msg.append("Python transforms run under the GIL in threads: set python_multiprocessing: True for them to scale.")
    msg.append(f"{target} workers (bound: {bound} cores per device, {bound_src}) would feed a batch in about "
               f"{after / 1000:.1f} ms with {rule.options.headroom_pct:.0f}% headroom. Profile a few steps to confirm "
               "(data_process=True): the costs here are estimates.")
    patch = ctx.config_patch(
        f"set train_dataset.num_parallel_workers to {target}",
        [("dataset.num_parallel_workers", target)],
        safety=Safety.SAFE,
        description=f"enough map workers for the estimated device step; bounded by {bound} CPU cores per device",
    )
    loc = ctx.config_location("dataset.num_parallel_workers", note="the map ops' workers")
    yield Finding(
        code=rule.code,
        rule=rule.name,
        title=f"num_parallel_workers {workers} for a CPU-heavy map ({what}): the data pipeline will likely starve the device",
        message=" ".join(msg),
        severity=Severity.MEDIUM if starved else Severity.LOW,
        saving_us=saving,
        confidence=0.4,
        evidence=[
            Evidence(name="map_cpu_per_sample", value=round(per_sample, 1), unit="µs", source="assumed per-transform costs"),
            Evidence(name="workers", value=workers),
            Evidence(name="batch_size", value=batch),
        ]
        + ([Evidence(name="device_step_estimate", value=round(device_us, 1), unit="µs", source="config FLOPs")] if device_us else []),
        locations=[loc] if loc else [],
        patches=[patch] if patch else [],
        tags=list(rule.tags),
    )


def transform_names(value: Any) -> list[str]:
    """``[type: Decode, {type: Resize, size: 224}, "Normalize"]`` → ``["Decode", "Resize", "Normalize"]``."""
    if not isinstance(value, (list, tuple)):
        return []
    out = []
    for t in value:
        name = t.get("type") if isinstance(t, dict) else t
        if name:
            out.append(str(name).rsplit(".", 1)[-1])
    return out


def is_python(name: str) -> bool:
    """A Python transform (``PyFunc``, a lambda …): held by the GIL in thread workers."""
    return name.startswith(("Py", "py_")) or "Python" in name or "Lambda" in name


def device_step_estimate(cfg: Any) -> float | None:
    """Device µs per step from the model's FLOPs: 6 × weights × tokens (+ attention), per device, at an assumed rate.

    Per layer 4h² (attention projections, kv heads counted) + 3·h·ffn (gated MLP) weights, plus
    the vocab head; split over model parallel × pipeline stages; tokens = batch × seq. ``None``
    when the config lacks the dims (a non-transformer model).
    """
    h, layers, seq = cfg.hidden_size, cfg.num_layers, cfg.seq_length
    if not h or not layers or not seq:
        return None
    f, _ = cfg.ffn_hidden_size()
    hd = cfg.head_dim or h // max(cfg.num_heads or 1, 1)
    kv = (cfg.num_kv_heads or cfg.num_heads or 1) * hd
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * (f or 4 * h)
    weights = (layers * per_layer + (cfg.vocab_size or 0) * h) / max(cfg.model_parallel * cfg.pipeline_stages, 1)
    tokens = (cfg.int_of("dataset.batch_size") or cfg.micro_batch_size) * seq
    attn = 12.0 * layers * tokens * seq * h / max(cfg.model_parallel * cfg.pipeline_stages, 1)
    return (6.0 * weights * tokens + attn) / (ASSUMED_CUBE_TFLOPS * 1e6)
