"""What ``advisor compare`` reports, as pydantic records (the JSON output is their dump)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field


class StepStats(BaseModel):
    """Steady-state step time of one side, µs (warm-up steps left out)."""

    mean: float | None = None
    median: float | None = None
    p90: float | None = None
    steps: int = 0
    warmup: str = ""  # how warm-up was detected and what was left out


class Breakdown(BaseModel):
    """Mean steady-state step breakdown, µs per step (the slowest rank's step)."""

    computing: float | None = None
    communication_not_overlapped: float | None = None
    free: float | None = None
    preparing: float | None = None


class RankStep(BaseModel):
    rank: int
    before: float | None = None
    after: float | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def delta(self) -> float | None:
        """before − after (positive: the rank got faster)."""
        return None if self.before is None or self.after is None else self.before - self.after


class FindingOutcome(BaseModel):
    """One finding of BEFORE, held against AFTER."""

    code: str
    title: str
    fingerprint: str
    status: Literal["gone", "still there", "changed"]
    estimate_us: float | None = None  # the saving BEFORE promised, per step
    metric: str = ""  # the time the finding is about
    before_us: float | None = None
    after_us: float | None = None
    measured_us: float | None = None  # before − after of that time
    ratio: float | None = None  # measured ÷ estimate (gone findings above the noise only)
    after_title: str | None = None
    after_estimate_us: float | None = None  # what AFTER's analysis now estimates for it (still there, changed)
    noise_us: float | None = None  # noise of the measured time: NOISE_FRACTION of it (the step's noise for the step)
    within_noise: bool = False  # estimate and measured change both within the noise: too small to measure
    estimate_memory_bytes: float | None = None
    measured_memory_bytes: float | None = None
    note: str = ""


class KernelDelta(BaseModel):
    """An op type or a cell whose kernel time per step changed, µs (mean over the ranks on both sides)."""

    what: str  # "MatMulV3" or "layers.N.attention.wq · MatMulV3"
    kind: Literal["type", "cell"]
    before_us: float
    after_us: float

    @computed_field  # type: ignore[prop-decorator]
    @property
    def delta(self) -> float:
        """after − before (positive: more time)."""
        return self.after_us - self.before_us


class ConfigChange(BaseModel):
    key: str  # JSON pointer
    before: str | None = None  # JSON text of the value, None when absent
    after: str | None = None


class Comparison(BaseModel):
    """Everything ``compare`` says (see :func:`advisor_core.compare.compare_runs`)."""

    schema_version: int = 1
    before: str
    after: str
    step_before: StepStats = Field(default_factory=StepStats)
    step_after: StepStats = Field(default_factory=StepStats)
    step_change_us: float | None = None  # before − after of the mean (positive: faster)
    step_change_significant: bool = False
    noise_us: float | None = None
    breakdown_before: Breakdown = Field(default_factory=Breakdown)
    breakdown_after: Breakdown = Field(default_factory=Breakdown)
    peak_memory_before: float | None = None  # bytes, highest over the ranks (memory_record.csv)
    peak_memory_after: float | None = None
    ranks: list[RankStep] = Field(default_factory=list)
    findings: list[FindingOutcome] = Field(default_factory=list)
    new_findings: list[dict] = Field(default_factory=list)  # findings of AFTER with no match in BEFORE
    kernels: list[KernelDelta] = Field(default_factory=list)
    regressions: list[KernelDelta] = Field(default_factory=list)
    kernels_compared: bool = True  # False when the runs' kernels are not comparable (see not_comparable)
    config_changes: list[ConfigChange] = Field(default_factory=list)
    not_comparable: list[str] = Field(default_factory=list)  # what could not be compared, and why
    notes: list[str] = Field(default_factory=list)  # compared, but differs in a way worth saying (model dims)
    estimates_from: str = "the analysis of BEFORE"
