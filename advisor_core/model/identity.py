"""Per-rank metadata records: who the rank is, how the job was parallelised.

These are small pydantic models; large tables live in DataFrames (see
:mod:`advisor_core.model.run`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RankIdentity(BaseModel):
    """Identity of one profiled rank and where that identity came from.

    ``rank_source`` says which evidence gave the rank id, e.g.
    ``"profiler_info_3.json"``, ``"profiler_info.json rank_id"``,
    ``"kernel_details.csv Device_id"``, ``"trace_view.json process label NPU 3"``,
    ``"directory name"`` or ``"assumed"``; anything but the first is reported
    as a warning by discovery.
    """

    model_config = ConfigDict(frozen=True)

    rank_id: int | None
    rank_source: str
    device_id: int | None = None
    host: str | None = None
    pid: int | None = None
    collected_at: str | None = Field(None, description="timestamp field of the directory name, YYYYmmddHHMMSSmmm")
    framework: str | None = Field(None, description='"MindSpore", "torch_npu" or "CANN"')
    framework_version: str | None = None
    cann_version: str | None = None
    profile_dir: str
    layout: str = Field(description='"ascend_ms", "ascend_pt", "legacy", "bare" or "file"')


class CommGroup(BaseModel):
    """One communication group this rank belongs to (``parallel_group_info``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    group_name: str | None = None
    group_rank: int | None = None
    global_ranks: list[int] = Field(default_factory=list)


# The group names parallel_group_info uses for each kind of parallelism (MindSpore, MindFormers, torch_npu).
GROUP_NAMES = {"dp": ("dp", "data_parallel", "data"), "tp": ("tp", "mp", "model_parallel", "tensor_parallel"),
               "pp": ("pp", "pipeline")}


class ParallelLayout(BaseModel):
    """How the job was split across devices, as far as the profile tells.

    ``source`` names the evidence: ``profiler_metadata.json distributed_args``,
    ``profiler_metadata.json parallel_group_info``, ``profiler_info parallel_mode``,
    or ``cluster_step_trace_time.csv stage rows``. Sizes the evidence does not
    give are ``None``; ``tensor_parallel`` is MindFormers' ``model_parallel``.
    """

    model_config = ConfigDict(frozen=True)

    source: str
    parallel_mode: str | None = None
    world_size: int | None = None
    data_parallel: int | None = None
    tensor_parallel: int | None = None
    pipeline_stages: int | None = None
    expert_parallel: int | None = None
    context_parallel: int | None = None
    sequence_parallel: bool | None = None
    groups: list[CommGroup] = Field(default_factory=list)

    def group(self, kind: str) -> list[int] | None:
        """Global ranks of this rank's ``kind`` group (``"dp"``, ``"tp"`` or ``"pp"``), sorted, as
        ``parallel_group_info`` names it (:data:`GROUP_NAMES`); ``None`` when it does not say."""
        for g in self.groups:
            if (g.group_name or "").lower() in GROUP_NAMES[kind] and g.global_ranks:
                return sorted(int(r) for r in g.global_ranks)
        return None


class ProfilerSettings(BaseModel):
    """What the profiler was asked to collect, when ``profiler_info`` says."""

    model_config = ConfigDict(frozen=True)

    profiler_level: str | None = None
    activities: list[str] = Field(default_factory=list)
    aic_metrics: str | None = None
    profile_memory: bool | None = None
    data_process: bool | None = None
    with_stack: bool | None = None
    jit_level: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict)
