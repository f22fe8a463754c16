"""What a rule sees: the inputs of one analysis, its options, and helpers to build findings.

Rules read evidence through the context only — ``ctx.run`` (profiles; tables on
demand), ``ctx.ir`` (IR dumps, parsed on demand), ``ctx.config`` (typed view of
the training YAML) — and use :meth:`RuleContext.config_location` and
:meth:`RuleContext.config_patch` to point at and patch the config. A rule never
imports another rule or a loader's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from advisor_core.config.training import TrainingConfig
from advisor_core.config.plain import json_plain as _plain
from advisor_core.diagnostics import DiagnosticSink
from advisor_core.engine.findings import Finding, Location, Patch, PatchOp, Safety
from advisor_core.engine.rule import Need, Rule, RuleOptions

if TYPE_CHECKING:  # pragma: no cover
    from advisor_core.config.document import ConfigDocument
    from advisor_core.ir.dumps import IRDumpSet, RankDumps
    from advisor_core.ir.model import IRFile
    from advisor_core.model.run import Run


@dataclass
class AnalysisInputs:
    """What one analysis looks at; every part is optional."""

    run: "Run | None" = None
    ir: "IRDumpSet | None" = None
    config_doc: "ConfigDocument | None" = None
    sink: DiagnosticSink = field(default_factory=DiagnosticSink)
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._config: TrainingConfig | None = None
        self._parsed: dict[tuple[str, str], "IRFile | None"] = {}
        # (rule code, rank id) → what the rule's rank_evidence returned for that rank
        self.rank_evidence: dict[tuple[str, int], Any] = {}

    def _leave_config_out(self) -> None:
        """Leave the config out (it disagrees with the run: see ``Session``); rules then see none."""
        self.config_doc = None
        self._config = None

    @property
    def config(self) -> TrainingConfig | None:
        if self._config is None and self.config_doc is not None:
            self._config = TrainingConfig(self.config_doc.data, str(self.config_doc.path))
        return self._config

    @property
    def has_profile(self) -> bool:
        return self.run is not None and bool(self.run.ranks)

    def unavailable_because(self, need: Need) -> str | None:
        """Why a table need is not met though its file exists (a column missing …); ``None`` otherwise."""
        if need.kind != "table" or self.run is None:
            return None
        reasons = dict.fromkeys(r.unusable_because(need.name, need.columns) for r in self.run if r.has_table(need.name))
        reasons.pop(None, None)
        return "; ".join(str(x) for x in reasons) or None

    def ir_ranks(self) -> "list[RankDumps]":
        if self.ir is None:
            return []
        return [self.ir.ranks[k] for k in sorted(self.ir.ranks, key=lambda r: (r is None, r if r is not None else -1))]

    def ir_graph(self, stage: str, rank: "RankDumps | None" = None) -> "IRFile | None":
        """The parsed ``frontend``/``backend``/``parallel`` graph of ``rank`` (default: the first rank)."""
        ranks = [rank] if rank is not None else self.ir_ranks()
        for rd in ranks:
            f = {"frontend": rd.final_frontend, "backend": rd.backend_kernel_graph, "parallel": rd.parallel_graph}[stage]()
            if f is not None:
                return rd.parse(f)
        return None

    def available(self, need: Need) -> bool:
        """Is the evidence ``need`` describes present (without reading tables)?"""
        if need.kind == "table":
            if need.name == "cluster_step_trace":  # msprof-analyze's cluster output, beside (or instead of) the ranks
                return self.run is not None and self.run.cluster_step_trace() is not None
            return self.run is not None and any(rank.usable(need.name, need.columns) for rank in self.run)
        if need.kind == "ir":
            for rd in self.ir_ranks():
                f = {"frontend": rd.final_frontend, "backend": rd.backend_kernel_graph, "parallel": rd.parallel_graph}.get(need.name)
                if f is not None and f() is not None:
                    return True
            return False
        cfg = self.config
        if cfg is None:
            return False
        if need.name == "*":
            return True
        if need.name.startswith("/"):
            return cfg.has(need.name)
        return cfg.located(need.name).present


class RuleContext:
    """One rule's view of an analysis (see module docstring)."""

    def __init__(self, inputs: AnalysisInputs, options: RuleOptions, code: str, rule: Any = None,
                 earlier: "Sequence[Finding]" = ()) -> None:
        self._inputs = inputs
        self.options = options
        self.code = code
        self.skip_reasons: list[str] = []
        self._rule = rule
        self._earlier = tuple(earlier)

    def findings_so_far(self) -> "tuple[Finding, ...]":
        """The findings of the rules that ran before this one (every other rule when this rule sets
        ``reads_other_findings``); read-only — a rule cites them, it does not change them."""
        return self._earlier

    def rank_evidence(self, rank: Any) -> Any:
        """What this rule's ``rank_evidence`` returned for ``rank`` (computed now if the engine has not).

        ``None`` when the rule has no ``rank_evidence`` or it failed on that rank (the
        failure is reported by the engine).
        """
        key = (self.code, rank.rank_id)
        store = self._inputs.rank_evidence
        if key not in store:
            if self._rule is None or type(self._rule).rank_evidence is Rule.rank_evidence:
                store[key] = None
            else:
                rank.ensure_timeline()  # the unit that had it has not run for this rank
                store[key] = self._rule.rank_evidence(rank)
        return store[key]

    # -- evidence -----------------------------------------------------------------
    @property
    def run(self) -> "Run | None":
        return self._inputs.run

    @property
    def ir(self) -> "IRDumpSet | None":
        return self._inputs.ir

    @property
    def config(self) -> TrainingConfig | None:
        return self._inputs.config

    @property
    def config_doc(self) -> "ConfigDocument | None":
        return self._inputs.config_doc

    @property
    def settings(self) -> Mapping[str, Any]:
        return self._inputs.settings

    @property
    def sink(self) -> DiagnosticSink:
        return self._inputs.sink

    def has(self, need: Need) -> bool:
        return self._inputs.available(need)

    @property
    def has_profile(self) -> bool:
        """Is there at least one profiled rank?"""
        return self._inputs.has_profile

    def ir_graph(self, stage: str, rank: "RankDumps | None" = None) -> "IRFile | None":
        return self._inputs.ir_graph(stage, rank)

    def ir_ranks(self) -> "list[RankDumps]":
        return self._inputs.ir_ranks()

    def step_time_us(self, rank: Any) -> float | None:
        """Mean step time of ``rank`` (µs): the step breakdown's total, else the kernel span per step."""
        from advisor_core.analyses.step_time import mean_step_time_us

        return mean_step_time_us(rank)

    def skip(self, reason: str) -> None:
        """Say why this rule found nothing (shown under ``skipped`` when it yields no finding)."""
        self.skip_reasons.append(reason)

    # -- config helpers -----------------------------------------------------------------
    @property
    def config_path(self) -> str | None:
        doc = self.config_doc
        return str(doc.path) if doc is not None else None

    def config_location(self, key_or_pointer: str, note: str | None = None) -> Location | None:
        """A ``config`` location (file, 1-based line/column of the key) for a logical key or pointer.

        For an absent key, the location of its nearest existing parent is given
        (where the key would be added).
        """
        cfg, doc = self.config, self.config_doc
        if cfg is None or doc is None:
            return None
        pointer = key_or_pointer if key_or_pointer.startswith("/") else cfg.pointer(key_or_pointer)
        probe = pointer
        pos = None
        while probe:
            pos = doc.position(probe)
            if pos is not None:
                break
            probe = probe.rsplit("/", 1)[0]
        line, col = pos if pos is not None else (1, 1)
        return Location(kind="config", path=str(doc.path), line=line, column=col, key_path=pointer, note=note)

    def config_patch(
        self,
        title: str,
        changes: Iterable[tuple[str, Any]],
        *,
        safety: Safety = Safety.UNSAFE,
        description: str = "",
        remove: Iterable[str] = (),
    ) -> Patch | None:
        """An RFC 6902 patch setting each ``(key_or_pointer, value)``; ``None`` without a config.

        Every existing value gets a ``test`` precondition first (so the patch refuses
        to apply to a file that changed since it was analysed), then ``replace``;
        absent keys get ``add``.
        """
        cfg = self.config
        if cfg is None:
            return None
        tests: list[PatchOp] = []
        edits: list[PatchOp] = []
        for key, value in changes:
            pointer = key if key.startswith("/") else cfg.pointer(key)
            if cfg.has(pointer):
                tests.append(PatchOp(op="test", path=pointer, value=_plain(cfg.at(pointer))))
                edits.append(PatchOp(op="replace", path=pointer, value=value))
            else:
                edits.append(PatchOp(op="add", path=pointer, value=value))
        for pointer in remove:
            if cfg.has(pointer):
                tests.append(PatchOp(op="test", path=pointer, value=_plain(cfg.at(pointer))))
                edits.append(PatchOp(op="remove", path=pointer))
        if not edits:
            return None
        return Patch(title=title, safety=safety, ops=tests + edits, target=self.config_path, description=description)


def path_str(p: Path | str | None) -> str | None:
    return None if p is None else str(p)
