"""Test kit for rule authors: YAML rule cases run through the installed plugin system.

A rule's cases live in one YAML file (sqlfluff's model), each a small input in the *real*
file formats and the findings it must give::

    rule: AIC001
    cases:
      double_cast_on_aicpu:
        description: a DOUBLE Cast lands on AI_CPU every step
        profile:                          # files of ASCEND_PROFILER_OUTPUT/, verbatim
          kernel_details.csv: |
            Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Input Data Types
            1,trans_Cast_5,Cast,AI_CPU,1000,197,DT_DOUBLE
            ...
          step_trace_time.csv: |
            Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive)
            1,3100,0,0,0,200,3300,0,0
        config: |                         # optional training YAML
          ...
        options: {min_share_pct: 2}       # optional rule options
        expect:
          - severity: high
            title: AI_CPU operators take 6.0% of the step
            saving_us: 177.3             # compared to 0.1 % (or `saving_us_tolerance`)
      quiet_profile:
        profile: {...}
        expect: []
        skipped: below 1.0%               # a substring of the rule's skip reason

Run them with one parametrized test::

    from advisor_core.testing import load_rule_cases, evaluate_case

    CASES = load_rule_cases(Path(__file__).with_name("AIC001.yml"))

    @pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
    def test_aic001(case, tmp_path):
        evaluate_case(case, tmp_path)

The rule is found through the ``advisor`` entry-point group exactly as ``advisor analyze``
finds it, so a case also proves the distribution is installed and registered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["ExpectedFinding", "RuleCase", "load_rule_cases", "write_profile", "run_case", "evaluate_case"]

PROFILE_DIR_NAME = "localhost_12345_20250101000000000_ascend_ms"


class ExpectedFinding(BaseModel):
    """What one finding must say; fields left out are not checked."""

    model_config = ConfigDict(extra="forbid")

    code: str | None = None
    severity: str | None = None
    title: str | None = None
    title_contains: str | None = None
    message_contains: list[str] = Field(default_factory=list)
    saving_us: float | None = None
    saving_us_tolerance: float | None = Field(None, description="absolute, µs; default 0.1 % of saving_us")
    patches: int | None = Field(None, description="number of patches")
    patch_ops: list[dict[str, Any]] | None = Field(None, description="the first patch's RFC 6902 operations")


class RuleCase(BaseModel):
    """One named case of a rule's YAML fixture file."""

    model_config = ConfigDict(extra="forbid")

    rule: str
    name: str
    description: str = ""
    profile: dict[str, str] | None = Field(None, description="file name under ASCEND_PROFILER_OUTPUT/ → its text")
    profiler_info: dict[str, Any] | None = Field(None, description="profiler_info_{rank}.json content (rank 0 default)")
    config: str | None = Field(None, description="training YAML text")
    options: dict[str, Any] = Field(default_factory=dict)
    expect: list[ExpectedFinding] = Field(default_factory=list)
    skipped: str | None = Field(None, description="substring of the skip reason when nothing is expected")


def load_rule_cases(path: str | Path) -> list[RuleCase]:
    """The cases of one fixture file; a malformed file raises ``ValueError`` naming the case and key."""
    from ruamel.yaml import YAML

    p = Path(path)
    data = YAML(typ="safe").load(p.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "rule" not in data or not isinstance(data.get("cases"), dict):
        raise ValueError(f"{p}: expected a mapping with 'rule' and 'cases'")
    cases = []
    for name, body in data["cases"].items():
        try:
            cases.append(RuleCase(rule=str(data["rule"]), name=str(name), **(body or {})))
        except (ValidationError, TypeError) as exc:
            raise ValueError(f"{p}: case {name!r}: {exc}") from None
    return cases


def write_profile(root: Path, files: dict[str, str], profiler_info: dict[str, Any] | None = None) -> Path:
    """Write a one-rank MindSpore profile directory under ``root``; returns the ``*_ascend_ms`` path."""
    prof = root / PROFILE_DIR_NAME
    out = prof / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    info = profiler_info or {"ms_profiler_info": {"rank_id": 0, "rank_size": 1, "device_id": 0}}
    rank = int(info.get("ms_profiler_info", {}).get("rank_id", 0))
    (prof / f"profiler_info_{rank}.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    for name, text in files.items():
        if "/" in name or "\\" in name or name.startswith("."):
            raise ValueError(f"profile file name {name!r}: give a bare file name of ASCEND_PROFILER_OUTPUT/")
        (out / name).write_text(text, encoding="utf-8")
    return prof


def run_case(case: RuleCase, workdir: str | Path) -> Any:
    """Build the case's inputs under ``workdir`` and run only its rule; the ``AnalysisResult``."""
    from advisor_core.api import open_session

    work = Path(workdir)
    paths: list[Path] = []
    if case.profile is not None:
        paths.append(write_profile(work / "profile", case.profile, case.profiler_info))
    config = None
    if case.config is not None:
        config = work / "config.yaml"
        config.write_text(case.config, encoding="utf-8")
    if not paths and config is None:
        raise ValueError(f"case {case.name!r}: give a profile and/or a config")
    session = open_session(*paths, config=config)
    return session.analyze(select=[case.rule], options={case.rule: case.options} if case.options else None)


def _mismatches(exp: ExpectedFinding, f: Any) -> list[str]:
    out = []
    if exp.code is not None and f.code != exp.code:
        out.append(f"code {f.code!r} != {exp.code!r}")
    if exp.severity is not None and f.severity.value != exp.severity:
        out.append(f"severity {f.severity.value!r} != {exp.severity!r}")
    if exp.title is not None and f.title != exp.title:
        out.append(f"title {f.title!r} != {exp.title!r}")
    if exp.title_contains is not None and exp.title_contains not in f.title:
        out.append(f"title {f.title!r} lacks {exp.title_contains!r}")
    for s in exp.message_contains:
        if s not in f.message:
            out.append(f"message lacks {s!r}: {f.message!r}")
    if exp.saving_us is not None:
        tol = exp.saving_us_tolerance if exp.saving_us_tolerance is not None else abs(exp.saving_us) * 1e-3
        if f.saving_us is None or abs(f.saving_us - exp.saving_us) > tol:
            out.append(f"saving_us {f.saving_us} != {exp.saving_us} ± {tol:g}")
    if exp.patches is not None and len(f.patches) != exp.patches:
        out.append(f"{len(f.patches)} patch(es), expected {exp.patches}")
    if exp.patch_ops is not None:
        got = [o.model_dump(exclude_none=True) for o in f.patches[0].ops] if f.patches else None
        if got != exp.patch_ops:
            out.append(f"patch ops {got} != {exp.patch_ops}")
    return out


def evaluate_case(case: RuleCase, workdir: str | Path) -> Any:
    """Run ``case`` and raise ``AssertionError`` listing every difference; returns the result."""
    result = run_case(case, workdir)
    problems: list[str] = [f"rule error: {e.message}" for e in result.errors]
    if case.rule not in result.rules:
        problems.append(f"rule {case.rule} is not registered (is its distribution installed?)")
    findings = [f for f in result.findings if f.code == case.rule]
    if len(findings) != len(case.expect):
        got = "; ".join(f"{f.severity.value} {f.title}" for f in findings) or "none"
        problems.append(f"{len(findings)} finding(s), expected {len(case.expect)}: {got}")
    for i, (exp, f) in enumerate(zip(case.expect, findings), 1):
        problems.extend(f"finding {i}: {m}" for m in _mismatches(exp, f))
    if case.skipped is not None:
        reasons = [s.reason for s in result.skipped if s.code == case.rule]
        if not any(case.skipped in r for r in reasons):
            problems.append(f"skip reason containing {case.skipped!r} not given (got {reasons})")
    if problems:
        raise AssertionError(f"{case.rule} case {case.name!r}:\n  " + "\n  ".join(problems))
    return result
