"""advisor_core.testing: the rule-case kit third-party authors use (AIC001.yml exercises the happy path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.testing import RuleCase, evaluate_case, load_rule_cases, write_profile


def test_malformed_case_names_the_case(tmp_path: Path) -> None:
    f = tmp_path / "X001.yml"
    f.write_text("rule: LC004\ncases:\n  bad:\n    expect: [{severity: high, colour: red}]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"(?s)case .bad.*colour"):
        load_rule_cases(f)


def test_file_without_cases_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "X001.yml"
    f.write_text("- just a list\n", encoding="utf-8")
    with pytest.raises(ValueError, match="expected a mapping with 'rule' and 'cases'"):
        load_rule_cases(f)


def test_profile_files_stay_inside_the_output_dir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bare file name"):
        write_profile(tmp_path, {"../escape.csv": ""})


def test_config_only_case_for_a_builtin_lint_rule(tmp_path: Path) -> None:
    case = RuleCase(
        rule="LC004", name="device_count",
        config="parallel_config:\n  data_parallel: 2\n  model_parallel: 4\n  pipeline_stage: 2\n"
               "parallel:\n  device_num: 8\n",
        expect=[{"severity": "high", "title_contains": "16"}],
    )
    evaluate_case(case, tmp_path)


def test_unknown_rule_is_reported(tmp_path: Path) -> None:
    case = RuleCase(rule="ZZ999", name="nope", config="a: 1\n")
    with pytest.raises(Exception, match="ZZ999"):
        evaluate_case(case, tmp_path)
