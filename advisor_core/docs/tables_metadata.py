"""The "Rank metadata" section of ``docs/tables.md``: identity, profiler settings, parallel layout, environment."""

from __future__ import annotations

from advisor_core.docs.fields import model_fields_table
from advisor_core.docs.markdown import rst_to_md
from advisor_core.docs.tables_specs import artifact_lines


def rank_metadata_lines() -> list[str]:
    """The records on each ``Rank`` (not tables), each field with the key it is read from."""
    from advisor_core.model.identity import CommGroup, ParallelLayout, ProfilerSettings, RankIdentity

    return [
        "## Rank metadata",
        "",
        "Not tables: small records on each `Rank`, from `profiler_info*.json`, `profiler_metadata.json`",
        "and the directory name. Key sets differ by producer; the first source present wins.",
        "",
        "Read from:",
        "",
        *artifact_lines(("profiler_info", "profiler_metadata")),
        "",
        "### `rank.identity` — `RankIdentity`",
        "",
        rst_to_md(RankIdentity.__doc__),
        "",
        *model_fields_table(RankIdentity, with_source={
            "rank_id": "first of: the `profiler_info_{rank}.json` file name; `rank_id` / `rankId` of `profiler_info.json`; "
                       "the `_{id}` of legacy file names; `Device_id` of the kernel table; the `NPU <id>` trace "
                       "process label; the directory name; else the next free id (`assumed`)",
            "rank_source": "which of those gave `rank_id`",
            "device_id": "`device_id` of profiler_info (top level, or under `ms_profiler_info` from MindSpore 2.5); missing when absent",
            "host": "directory name `{host}_{pid}_{timestamp}_ascend_*`",
            "pid": "directory name",
            "collected_at": "directory name",
            "framework": "`torch_npu_version` → torch_npu; `ms_version` → MindSpore; else from the layout",
            "framework_version": "`torch_npu_version` / `ms_version`",
            "cann_version": "`cann_version`",
            "profile_dir": "the rank directory",
            "layout": "directory layout",
        }),
        "",
        "### `rank.settings` — `ProfilerSettings`",
        "",
        rst_to_md(ProfilerSettings.__doc__),
        "",
        *model_fields_table(ProfilerSettings, with_source={
            "profiler_level": "MindSpore `profiler_parameters.profiler_level`; torch_npu `config.experimental_config._profiler_level`",
            "activities": "`profiler_parameters.activities`; `config.common_config.activities`",
            "aic_metrics": "`profiler_parameters.aic_metrics` (or `aicore_metrics`); `experimental_config._aic_metrics`",
            "profile_memory": "`profiler_parameters.profile_memory`; `common_config.profile_memory`",
            "data_process": "`profiler_parameters.data_process`",
            "with_stack": "`profiler_parameters.with_stack`; `common_config.with_stack`",
            "jit_level": "`jit_level` (top level)",
            "raw": "`profiler_parameters` / `config` as written",
        }),
        "",
        "### `rank.parallel` — `ParallelLayout`",
        "",
        rst_to_md(ParallelLayout.__doc__),
        "",
        *model_fields_table(ParallelLayout, with_source={
            "source": "which evidence was used",
            "parallel_mode": "`distributed_args.parallel_mode`; `profiler_info` `parallel_mode`",
            "world_size": "`distributed_args.world_size`; size of `default_group`; `rank_size`",
            "data_parallel": "`distributed_args.data_parallel_size`",
            "tensor_parallel": "`distributed_args.tensor_model_parallel_size`",
            "pipeline_stages": "`distributed_args.pipeline_model_parallel_size`; `stage_num` / `pipeline_stage_num`",
            "expert_parallel": "`distributed_args.expert_model_parallel_size`",
            "context_parallel": "`distributed_args.context_parallel_size`",
            "sequence_parallel": "`distributed_args.sequence_parallel`",
            "groups": "`parallel_group_info` (one `CommGroup` per entry)",
        }),
        "",
        "`CommGroup` (one per `parallel_group_info` entry):",
        "",
        *model_fields_table(CommGroup, with_source={
            "name": "entry key",
            "group_name": "`group_name`",
            "group_rank": "`group_rank`",
            "global_ranks": "`global_ranks`",
        }),
        "",
        "### `rank.env`",
        "",
        "`profiler_metadata.json` `ENV_VARIABLES`, as a sorted `dict[str, str]` (`null` → `\"\"`).",
        "",
    ]
