"""What a rule is: metadata, the evidence it needs, validated options, and ``check``.

A rule is a class. Its docstring is its help page (``advisor explain CODE``) and
must have the sections ``What``, ``Why``, ``Example`` and ``Fix``. It declares the
evidence it can work from in ``requires`` — any one of the listed needs is
enough; a rule none of whose needs is available is reported as *skipped* with
the reason, never run and never crashed. ``check`` receives a
:class:`~advisor_core.engine.context.RuleContext` and yields
:class:`~advisor_core.engine.findings.Finding` objects; it may call
``ctx.skip(reason)`` to say why it found nothing.

Example (a complete third-party rule)::

    class AicpuShare(Rule):
        '''Operators on AI_CPU take a large share of device time. ...'''
        code = "AIC001"
        name = "aicpu-share"
        summary = "AI_CPU operators take a large share of device time"
        severity = Severity.MEDIUM
        requires = Requirements(any_of=(Need.table("kernels", ("accelerator_core", "duration_us")),))

        class Options(RuleOptions):
            min_share_pct: float = 5.0

        def check(self, ctx):
            ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Literal

from pydantic import BaseModel, ConfigDict

from advisor_core.engine.findings import Finding, Severity

if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.engine.context import RuleContext
    from advisor_core.model.run import Rank

CODE_PATTERN = re.compile(r"^[A-Z]{1,3}[0-9]{3}$")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
DOC_SECTIONS = ("What", "Why", "Example", "Fix")


@dataclass(frozen=True)
class Need:
    """One piece of evidence: a table (with columns), an IR stage, or a config key.

    ``kind``:
      * ``table`` — ``name`` is a canonical table (``kernels``, ``step_trace`` …),
        ``columns`` the canonical columns the rule reads; ``cluster_step_trace`` is
        msprof-analyze's ``cluster_step_trace_time.csv`` of the run folder;
      * ``ir`` — ``name`` is ``frontend`` (final front-end graph), ``backend``
        (kernel graph) or ``parallel`` (``step_parallel_end``);
      * ``config`` — ``name`` is a logical key of
        :data:`advisor_core.config.training.KEYS` or a JSON pointer, or ``*`` for
        "any training config".
    """

    kind: Literal["table", "ir", "config"]
    name: str
    columns: tuple[str, ...] = ()

    @classmethod
    def table(cls, name: str, columns: Iterable[str] = ()) -> "Need":
        return cls("table", name, tuple(columns))

    @classmethod
    def ir(cls, stage: str) -> "Need":
        return cls("ir", stage)

    @classmethod
    def config(cls, key: str = "*") -> "Need":
        return cls("config", key)

    def describe(self) -> str:
        if self.kind == "table":
            cols = f" ({', '.join(self.columns)})" if self.columns else ""
            return f"table {self.name}{cols}"
        if self.kind == "ir":
            return {"frontend": "IR dump (final front-end graph, e.g. NN_validate_*.ir)",
                    "backend": "IR dump (backend kernel graph, graph_build_*.ir)",
                    "parallel": "IR dump (step_parallel_end_*.ir)"}.get(self.name, f"IR stage {self.name}")
        return "training config" if self.name == "*" else f"config key {self.name}"


@dataclass(frozen=True)
class Measure:
    """A time a finding is about, measured on one run: what it is and µs per step."""

    name: str
    value_us: float


@dataclass(frozen=True)
class Requirements:
    """Evidence a rule can work from: at least one of ``any_of`` must be present."""

    any_of: tuple[Need, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        return " or ".join(n.describe() for n in self.any_of) or "nothing"


class RuleOptions(BaseModel):
    """Base for a rule's options; unknown keys are errors, values are validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Rule:
    """Base class of every rule (see module docstring)."""

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    severity: ClassVar[Severity] = Severity.MEDIUM
    requires: ClassVar[Requirements] = Requirements()
    tags: ClassVar[tuple[str, ...]] = ()
    # Per-rank tables ``check`` reads (besides kernels, which come through the op view): the engine reads
    # them in each rank's unit, where the rank's files are, so the client does not read them one rank at a time.
    rank_tables: ClassVar[tuple[str, ...]] = ()
    fix_availability: ClassVar[Literal["always", "sometimes", "never"]] = "sometimes"
    # A rule that links its findings to the causes other rules found (the cluster rules: a slow
    # rank's cause is MD001's or CT001's finding on that rank) runs after every rule without it and
    # reads their findings with ``ctx.findings_so_far()``; it never imports them.
    reads_other_findings: ClassVar[bool] = False
    Options: ClassVar[type[RuleOptions]] = RuleOptions

    def __init__(self, options: RuleOptions | None = None) -> None:
        self.options = options if options is not None else self.Options()

    def check(self, ctx: "RuleContext") -> Iterable[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    def measure(self, ctx: "RuleContext", finding: Finding) -> "Measure | None":
        """Optional: the time ``finding`` is about, measured on the run in ``ctx`` (µs per step).

        ``advisor compare`` calls it with a finding of the run before a fix, once on that
        run and once on the run after, and sets the change beside the finding's estimate
        (MD001: the data wait; a gradient-tail finding: the exposed AllReduce). ``None``
        (the default) lets compare use the steady step time.
        """
        return None

    def rank_evidence(self, rank: "Rank") -> Any:
        """Optional: evidence from one profiled rank that needs its kernel order, or per-rank work.

        Called once per rank, where the rank's files are read (a worker process on a
        large run), with the rank's op view built and its timeline
        (``rank.op_view().timeline``) at hand — the only place kernel order is available,
        and the place per-rank work runs on every core: what ``check`` would otherwise
        compute rank after rank in the client belongs here (a value kept with
        ``rank.cached(key, ..., hand_over=True)`` comes back with the rank too).
        Return something small and picklable (no kernel rows); ``check`` reads it with
        ``ctx.rank_evidence(rank)``. Use only the rank and ``self.options`` here: the IR
        and the config are the client's. What it returns is kept on the run for these options:
        a later analysis of the same run with the same rules and options (``lint``'s configs
        against one baseline, a session analysed again) reuses it, so ``check`` must treat it
        as read-only. The default does nothing.
        """
        return None

    @classmethod
    def help_text(cls) -> str:
        """The docstring, dedented: the rule's help page."""
        import inspect

        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def validate_class(cls) -> list[str]:
        """Problems with the rule's metadata (empty when fine)."""
        problems = []
        code = getattr(cls, "code", None)
        if not isinstance(code, str) or not CODE_PATTERN.match(code):
            problems.append(f"code {code!r} must be 1–3 capital letters then 3 digits (e.g. MD001)")
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            problems.append(f"name {name!r} must be kebab-case (e.g. minddata-bottleneck)")
        if not getattr(cls, "summary", None):
            problems.append("summary is empty")
        if not cls.__doc__ or not cls.__doc__.strip():
            problems.append("has no docstring (its help page)")
        if not isinstance(getattr(cls, "severity", None), Severity):
            problems.append("severity must be a Severity")
        if not isinstance(getattr(cls, "requires", None), Requirements) or not cls.requires.any_of:
            problems.append("requires must list at least one Need")
        if not (isinstance(cls.Options, type) and issubclass(cls.Options, RuleOptions)):
            problems.append("Options must subclass RuleOptions")
        if not callable(getattr(cls, "check", None)) or cls.check is Rule.check:
            problems.append("does not implement check(ctx)")
        return problems

    @classmethod
    def missing_doc_sections(cls) -> list[str]:
        text = cls.help_text()
        return [s for s in DOC_SECTIONS if not re.search(rf"^{s}\b", text, re.MULTILINE)]
