"""``profiler_info*.json`` and ``profiler_metadata.json``: versions, settings, parallel layout, env.

Key sets differ by producer (``ascend-profile-formats.md`` §4.14–4.15):

* MindSpore ≥ 2.5 ``profiler_info_{rank}.json``: ``profiler_parameters``,
  ``ms_profiler_info``, ``cann_profiler_info``, ``analysis_cost_time``,
  ``ms_version``, ``cann_version``, ``jit_level``.
* MindSpore ≤ 2.3: ``context_mode``, ``rank_id``, ``ms_version``,
  ``parallel_mode``, ``stage_num``, ``rank_size`` …
* torch_npu: ``config.{common_config,experimental_config}``, ``torch_npu_version``,
  ``cann_version``, ``rank_id``.

``profiler_metadata.json`` carries ``ENV_VARIABLES``, ``parallel_group_info`` and,
when the framework added it, ``distributed_args`` (the only place parallel
sizes are written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.model.identity import CommGroup, ParallelLayout, ProfilerSettings
from advisor_core.textio import read_json


def read_profiler_info(path: Path, sink: DiagnosticSink) -> dict[str, Any] | None:
    data = read_json(path, sink, what="profiler info")
    if data is None:
        return None
    if not isinstance(data, dict):
        sink.error("bad-structure", "profiler info is not a JSON object", path)
        return None
    return data


def read_profiler_metadata(path: Path, sink: DiagnosticSink) -> dict[str, Any] | None:
    data = read_json(path, sink, what="profiler metadata")
    if data is None:
        return None
    if not isinstance(data, dict):
        sink.error("bad-structure", "profiler metadata is not a JSON object", path)
        return None
    return data


def _as_int(value: Any) -> int | None:
    try:
        if value is None or isinstance(value, bool):
            return None
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, int):
        return bool(value)
    return None


def framework_of(info: dict[str, Any] | None, layout: str) -> tuple[str | None, str | None, str | None]:
    """(framework, framework version, CANN version) from a profiler_info dict."""
    if layout == "ascend_pt":
        fw = "torch_npu"
    elif layout in ("ascend_ms", "legacy"):
        fw = "MindSpore"
    else:
        fw = None
    if not info:
        return fw, None, None
    if "torch_npu_version" in info:
        fw = "torch_npu"
        version = info.get("torch_npu_version")
    else:
        version = info.get("ms_version")
        if version is not None:
            fw = "MindSpore"
    cann = info.get("cann_version")
    return fw, (str(version) if version else None), (str(cann) if cann else None)


def rank_id_of(info: dict[str, Any] | None) -> int | None:
    if not info:
        return None
    for key in ("rank_id", "rankId"):
        rid = _as_int(info.get(key))
        if rid is not None and rid >= 0:
            return rid
    return None


def device_id_of(info: dict[str, Any] | None) -> int | None:
    """``device_id`` of a profiler_info file: top level (≤ 2.4) or under ``ms_profiler_info`` (≥ 2.5)."""
    if not info:
        return None
    for holder in (info, info.get("ms_profiler_info")):
        if isinstance(holder, dict):
            for key in ("device_id", "deviceId"):
                dev = _as_int(holder.get(key))
                if dev is not None and dev >= 0:
                    return dev
    return None


def profiler_settings(info: dict[str, Any] | None) -> ProfilerSettings | None:
    """Collection settings from either producer's key layout."""
    if not info:
        return None
    params = info.get("profiler_parameters")
    if isinstance(params, dict):
        acts = params.get("activities") or []
        return ProfilerSettings(
            profiler_level=_str(params.get("profiler_level")),
            activities=[str(a) for a in (acts if isinstance(acts, list) else [acts])],
            aic_metrics=_str(params.get("aic_metrics") or params.get("aicore_metrics")),
            profile_memory=_as_bool(params.get("profile_memory")),
            data_process=_as_bool(params.get("data_process")),
            with_stack=_as_bool(params.get("with_stack")),
            jit_level=_str(info.get("jit_level")),
            raw=params,
        )
    config = info.get("config")
    if isinstance(config, dict):
        common = config.get("common_config") or {}
        exp = config.get("experimental_config") or {}
        acts = common.get("activities") or []
        return ProfilerSettings(
            profiler_level=_str(exp.get("_profiler_level")),
            activities=[str(a) for a in (acts if isinstance(acts, list) else [acts])],
            aic_metrics=_str(exp.get("_aic_metrics")),
            profile_memory=_as_bool(common.get("profile_memory")),
            with_stack=_as_bool(common.get("with_stack")),
            raw=config,
        )
    if "context_mode" in info:
        return ProfilerSettings(jit_level=_str(info.get("jit_level")), raw={})
    return None


def _str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def parallel_layout(
    metadata: dict[str, Any] | None, info: dict[str, Any] | None
) -> ParallelLayout | None:
    """Parallel layout from the best evidence available (checklist order)."""
    groups: list[CommGroup] = []
    if metadata:
        pgi = metadata.get("parallel_group_info")
        if isinstance(pgi, dict):
            for name, g in sorted(pgi.items()):
                if not isinstance(g, dict):
                    continue
                ranks = g.get("global_ranks") or []
                groups.append(
                    CommGroup(
                        name=str(name),
                        group_name=_str(g.get("group_name")),
                        group_rank=_as_int(g.get("group_rank")),
                        global_ranks=[r for r in (_as_int(x) for x in ranks) if r is not None],
                    )
                )
        args = metadata.get("distributed_args")
        if isinstance(args, dict):
            return ParallelLayout(
                source="profiler_metadata.json distributed_args",
                parallel_mode=_str(args.get("parallel_mode")),
                world_size=_as_int(args.get("world_size")),
                data_parallel=_as_int(args.get("data_parallel_size")),
                tensor_parallel=_as_int(args.get("tensor_model_parallel_size")),
                pipeline_stages=_as_int(args.get("pipeline_model_parallel_size")),
                expert_parallel=_as_int(args.get("expert_model_parallel_size")),
                context_parallel=_as_int(args.get("context_parallel_size")),
                sequence_parallel=_as_bool(args.get("sequence_parallel")),
                groups=groups,
            )
        if groups:
            world = next((len(g.global_ranks) for g in groups if g.name == "default_group"), None)
            return ParallelLayout(
                source="profiler_metadata.json parallel_group_info", world_size=world, groups=groups
            )
    if info and ("parallel_mode" in info or "stage_num" in info or "rank_size" in info):
        return ParallelLayout(
            source="profiler_info parallel_mode",
            parallel_mode=_str(info.get("parallel_mode")),
            pipeline_stages=_as_int(info.get("stage_num") or info.get("pipeline_stage_num")),
            world_size=_as_int(info.get("rank_size")),
        )
    return None


def env_variables(metadata: dict[str, Any] | None) -> dict[str, str]:
    if not metadata:
        return {}
    env = metadata.get("ENV_VARIABLES")
    if not isinstance(env, dict):
        return {}
    return {str(k): "" if v is None else str(v) for k, v in sorted(env.items())}
