"""Findings and patches: what rules produce, what reporters and ``advisor fix`` consume.

A :class:`Finding` says what is slow, why, what fixing it is worth per step, how
sure the rule is, the numbers it used, where the problem is (profile row, IR
node, config key) and zero or more :class:`Patch` objects. A patch is a list of
RFC 6902 operations on the training-config document; its first operations are
``test`` preconditions on the current values, so a patch computed from one
version of a file refuses to apply to another.
"""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Severity(str, Enum):
    """Finding severity; ordered high > medium > low."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        return {"high": 3, "medium": 2, "low": 1}[self.value]


class Safety(str, Enum):
    """Fix safety, as in ruff: safe fixes apply by default, unsafe ones only when asked.

    ``safe``: purely performance-affecting, no convergence or accuracy risk.
    ``unsafe``: changes the model, precision, parallel layout, batch, or trades
    memory for time (recompute) — needs a human decision.
    ``display_only``: shown, never applied (e.g. a model-code change).
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display_only"


class PatchOp(BaseModel):
    """One RFC 6902 operation. ``path`` is a JSON Pointer (RFC 6901) into the config document."""

    model_config = ConfigDict(frozen=True)

    op: Literal["add", "remove", "replace", "test"]
    path: str
    value: Any = None

    @field_validator("path")
    @classmethod
    def _pointer(cls, v: str) -> str:
        if v and not v.startswith("/"):
            raise ValueError(f"JSON pointer must start with '/': {v!r}")
        return v


class Patch(BaseModel):
    """A config change that fixes (part of) a finding."""

    model_config = ConfigDict(frozen=True)

    title: str
    safety: Safety
    ops: list[PatchOp]
    target: str | None = Field(None, description="config file the patch applies to")
    description: str = ""
    diff: str | None = Field(None, description="rendered unified diff against the target, when it was available")
    notes: list[str] = Field(default_factory=list, description="e.g. which alias sites an anchored value also changes")

    @property
    def preconditions(self) -> list[PatchOp]:
        return [o for o in self.ops if o.op == "test"]

    @property
    def changes(self) -> list[PatchOp]:
        return [o for o in self.ops if o.op != "test"]


class Location(BaseModel):
    """Where a finding points.

    ``kind``: ``config`` (``path`` + 1-based ``line``/``column`` + ``key_path`` JSON
    pointer), ``ir`` (``path`` + ``line`` + ``node`` like ``@graph:%12``), ``profile``
    (``path`` + ``table``/``row`` or ``op``), or ``source`` (a model-code line
    from an IR ``# In file`` line).
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["config", "ir", "profile", "source"]
    path: str | None = None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    key_path: str | None = None
    node: str | None = None
    table: str | None = None
    row: int | None = None
    op: str | None = None
    rank: int | None = None
    note: str | None = None


class Evidence(BaseModel):
    """One number a rule used, with its unit and (optionally) the threshold it was held against."""

    model_config = ConfigDict(frozen=True)

    name: str
    value: Any
    unit: str | None = None
    threshold: Any = None
    source: str | None = None


class Finding(BaseModel):
    """One problem found by one rule."""

    model_config = ConfigDict(frozen=True)

    code: str
    rule: str = Field(description="rule name, e.g. minddata-bottleneck")
    title: str
    message: str
    severity: Severity
    saving_us: float | None = Field(None, description="estimated saving per step, µs")
    step_time_us: float | None = Field(None, description="step time the saving is a share of, µs")
    confidence: float = Field(0.8, ge=0.0, le=1.0)
    evidence: list[Evidence] = Field(default_factory=list)
    locations: list[Location] = Field(default_factory=list)
    patches: list[Patch] = Field(default_factory=list)
    memory_delta_bytes: float | None = Field(
        None, description="estimated change of peak device memory per rank if fixed (negative = saved)"
    )
    rank: int | None = None
    plugin: str | None = None
    tags: list[str] = Field(default_factory=list)
    count: int = Field(1, ge=1, description="occurrences of this cause folded into the finding")
    group: str | None = Field(None, description="a rule's key for one cause: its findings with the same group are "
                              "folded into one (default: the same title and the same fix)")

    @property
    def saving_pct(self) -> float | None:
        """Estimated saving as a share of step time, %."""
        if self.saving_us is None or not self.step_time_us:
            return None
        return 100.0 * self.saving_us / self.step_time_us

    @property
    def score(self) -> float:
        """Ranking key: estimated saving × confidence (findings without an estimate score 0)."""
        return (self.saving_us or 0.0) * self.confidence

    def fingerprint(self) -> str:
        """Stable identity across runs: code + where it points, never the title or any figure.

        Titles carry measured numbers ("13.9 ms per step") that change from run to run;
        code-scanning tools match alerts across runs by this value (SARIF
        ``partialFingerprints``), so only the code and the locations' stable parts —
        config key, IR node, op, table, file name — go in.
        """
        locs = [[loc.kind, loc.key_path, loc.node, loc.op, loc.table,
                 None if loc.path is None else loc.path.replace("\\", "/").rsplit("/", 1)[-1]]
                for loc in self.locations[:3]]
        key = {"code": self.code, "rule": self.rule, "locs": locs, "rank": self.rank}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    def primary_config_location(self) -> Location | None:
        for loc in self.locations:
            if loc.kind == "config":
                return loc
        return None


def group_key(f: Finding) -> tuple[Any, ...]:
    """What makes two findings one cause: same rule, and the same group (or title) and fix."""
    fix = tuple(sorted(json.dumps([o.model_dump(mode="json") for o in p.ops], sort_keys=True) for p in f.patches))
    return (f.code, f.rule, f.plugin, ("group", f.group) if f.group else ("title", f.title), fix)


def group_findings(findings: list[Finding]) -> list[Finding]:
    """Fold findings of one cause into one (ruff groups a rule's hits, clippy folds repeats).

    The folded finding keeps the first occurrence's title, message, evidence and patches,
    says how many occurrences it stands for (``count``, and ``occurrences`` evidence),
    sums their savings and memory, takes the highest severity and confidence, and keeps
    every location (duplicates once). Its rank is the common one, else none.
    """
    groups: dict[tuple[Any, ...], list[Finding]] = {}
    for f in findings:
        groups.setdefault(group_key(f), []).append(f)
    out = []
    for members in groups.values():
        if len(members) == 1:
            out.append(members[0])
            continue
        out.append(_fold(members))
    return out


def _fold(members: list[Finding]) -> Finding:
    first = members[0]
    count = sum(m.count for m in members)
    savings = [m.saving_us for m in members if m.saving_us is not None]
    memory = [m.memory_delta_bytes for m in members if m.memory_delta_bytes is not None]
    locations: list[Location] = []
    seen: set[str] = set()
    for m in members:
        for loc in m.locations:
            key = loc.model_dump_json()
            if key not in seen:
                seen.add(key)
                locations.append(loc)
    ranks = {m.rank for m in members}
    total = sum(savings) if savings else None
    note = (f" The same cause at {count} places" + (f"; together {total:,.1f} µs per step." if total is not None else "."))
    return first.model_copy(update={
        "title": f"{first.title} ({count} places)",
        "message": first.message + note,
        "saving_us": total,
        "memory_delta_bytes": sum(memory) if memory else None,
        "severity": max((m.severity for m in members), key=lambda s: s.rank),
        "confidence": max(m.confidence for m in members),
        "evidence": [*first.evidence, Evidence(name="occurrences", value=count)],
        "locations": locations,
        "rank": ranks.pop() if len(ranks) == 1 else None,
        "count": count,
    })


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Rank by estimated saving × confidence, then severity, code, rank, title (deterministic)."""
    return sorted(
        findings,
        key=lambda f: (-round(f.score, 6), -f.severity.rank, f.code, -1 if f.rank is None else f.rank, f.title, f.fingerprint()),
    )
