"""AIC001's rule cases (AIC001.yml), run through the installed ``advisor`` entry points."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.testing import evaluate_case, load_rule_cases

CASES = load_rule_cases(Path(__file__).with_name("AIC001.yml"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_aic001(case, tmp_path: Path) -> None:
    evaluate_case(case, tmp_path)
