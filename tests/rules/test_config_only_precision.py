"""Config-only precision settings are informational: no ranked saving from the 13 real MindFormers configs."""

from __future__ import annotations

import pytest

from advisor_core.api import open_session


def _configs(real_data):
    return sorted((real_data / "mindformers-configs").glob("*.yaml"))


def test_thirteen_real_configs(real_data):
    assert len(_configs(real_data)) == 13


def test_every_real_config_ranks_no_config_only_precision_saving(real_data):
    ranked = []
    for path in _configs(real_data):
        result = open_session(config=path, plugins=False).analyze()
        ranked += [(path.name, f.title, f.saving_us) for f in result.findings
                   if f.code == "CT001" and f.saving_us is not None]
    assert ranked == []


def test_telechat_rotary_is_reported_with_its_rough_cost(real_data):
    path = real_data / "mindformers-configs" / "finetune_telechat_115b.yaml"
    (f,) = [f for f in open_session(config=path, plugins=False).analyze().findings if f.code == "CT001"]
    assert f.title == "rotary_dtype: float32 in a bfloat16 model forces Cast pairs around the rotary embedding in every layer"
    assert f.saving_us is None and f.severity.value == "low"
    assert {e.name: e.value for e in f.evidence}["cost_if_memory_bound"] == pytest.approx(22650, rel=0.01)
    assert "nothing is ranked from the config alone" in f.message


def test_glm_multi_query_group_num_is_the_kv_head_count(real_data):
    from ruamel.yaml import YAML

    from advisor_core.config.training import TrainingConfig

    data = YAML(typ="safe").load((real_data / "mindformers-configs" / "finetune_glm4_9b.yaml").read_text(encoding="utf-8"))
    assert TrainingConfig(data).num_kv_heads == 2
