"""A rank's parallel groups, as ``profiler_metadata.json``'s ``parallel_group_info`` names them: one reading for
the core's cluster view and the rules."""

from __future__ import annotations

from advisor_core.loaders.metadata import parallel_layout


def _layout(group_info: dict) -> object:
    return parallel_layout({"parallel_group_info": group_info}, None)


def test_each_kind_of_group_by_the_names_the_frameworks_use() -> None:
    layout = _layout({
        "default_group": {"group_name": "default_group", "global_ranks": [0, 1, 2, 3, 4, 5, 6, 7]},
        "hccl_world_group-dp": {"group_name": "data", "group_rank": 1, "global_ranks": [5, 1]},
        "tp-0": {"group_name": "model_parallel", "global_ranks": ["1", "0"]},
        "pp": {"group_name": "Pipeline", "global_ranks": [1, 3, 5, 7]},
    })
    assert layout.world_size == 8
    assert (layout.group("dp"), layout.group("tp"), layout.group("pp")) == ([1, 5], [0, 1], [1, 3, 5, 7])


def test_no_group_of_a_kind_the_profile_does_not_name() -> None:
    layout = _layout({"dp": {"group_name": "dp", "global_ranks": []},  # named, but no ranks: says nothing
                      "ep": {"group_name": "expert_parallel", "global_ranks": [0, 1]}})
    assert (layout.group("dp"), layout.group("tp"), layout.group("pp")) == (None, None, None)


def test_the_cluster_view_and_the_rules_read_the_same_group() -> None:
    from types import SimpleNamespace

    from advisor_core.analyses.cluster import _dp_group_of
    from advisor_rules._common.cluster import parallel_group

    rank = SimpleNamespace(parallel=_layout({"g": {"group_name": "data_parallel", "global_ranks": [3, 1]}}))
    assert _dp_group_of(rank) == "1,3"
    assert parallel_group(rank, "dp") == [1, 3]
    bare = SimpleNamespace(parallel=None)
    assert _dp_group_of(bare) is None and parallel_group(bare, "dp") is None
