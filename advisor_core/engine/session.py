"""One analysis session: classify inputs, load plugins, open profiles/IR/config, run rules.

This is the layer the CLI and the notebook API share::

    from advisor_core.api import open_session
    s = open_session("out/")              # any mix of profile dirs, IR dumps, a YAML
    s.table("kernels", ["name", "duration_us"])     # every rank stacked, with a rank column
    result = s.analyze(select=["MD001"])
    s.findings_frame(result)              # one row per finding

Everything is lazy: tables are read when a rule (or you) asks for them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from advisor_core.diagnostics import DiagnosticSink
from advisor_core.discover.inputs import classify_inputs
from advisor_core.engine.context import AnalysisInputs
from advisor_core.engine.plugins import PluginHost, load_plugins
from advisor_core.engine.runner import AnalysisResult, run_rules
from advisor_core.engine.settings import Settings

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class SessionOptions:
    profiles: Sequence[Path] = ()
    graphs: Sequence[Path] = ()
    config: Path | None = None
    autoload_plugins: bool | None = None
    load_plugins: Sequence[str] = ()
    block_plugins: Sequence[str] = ()
    settings: Settings = field(default_factory=Settings)
    jobs: int | None = None  # worker processes for the per-rank work; None: every core when it pays
    scheduler: str | None = None  # a Dask scheduler address (tcp://HOST:PORT) or "local" for the per-rank work
    scheduler_timeout: float = 30.0  # seconds to reach the scheduler and find a worker
    task_timeout: float | None = None  # Dask: seconds with no task finishing before a rank is given up (None: default)
    source: str = "auto"  # which export a table is read from when a rank has both: auto | text | db
    # the profile/IR is a baseline from an earlier run (``advisor lint``): a config that no longer matches it is
    # the change under review, so it is checked on its own and the stale baseline is dropped (not an error)
    baseline: bool = False
    # the config already parsed by the caller (``advisor lint`` parses each file to tell YAML from not): not parsed twice
    config_document: Any = None
    # reads the caller began ahead (``advisor analyze``; see engine.ahead): let go at the end of ``analyze``
    read_ahead: Sequence[Any] = ()
    # the profiles and IR dumps already loaded for several sessions (``advisor lint``'s baseline, one for every config)
    evidence: SharedEvidence | None = None


class Session:
    """Inputs, plugins and lazily opened evidence for one analysis."""

    def __init__(self, paths: Sequence[str | Path] = (), options: SessionOptions | None = None,
                 host: PluginHost | None = None) -> None:
        opts = options or SessionOptions()
        self.options = opts
        self.sink = DiagnosticSink()
        s = opts.settings
        self.host = host or load_plugins(
            autoload=opts.autoload_plugins if opts.autoload_plugins is not None else s.plugins_autoload,
            load=list(opts.load_plugins) + list(s.plugins_load),
            block=list(opts.block_plugins) + list(s.plugins_block),
        )
        self.classified = classify_inputs([Path(p) for p in paths], self.sink, plugin_classifier=self.host.classify)
        self.profile_paths = list(opts.profiles) or self.classified.profiles
        self._read_ahead: list[Any] = list(opts.read_ahead)
        self.graph_paths = list(opts.graphs) or self.classified.graphs
        configs = [opts.config] if opts.config is not None else self.classified.configs
        if len(configs) > 1:
            self.sink.warning(
                "several-configs",
                f"{len(configs)} training configs found ({', '.join(str(c) for c in configs)}); "
                f"using {configs[0]} (pass --config to choose)",
                configs[0],
            )
        self.config_path = configs[0] if configs else None
        self._run: Any = None
        self._ir: Any = None
        self._doc: Any = None
        self._inputs: AnalysisInputs | None = None
        self._mismatches: list[Any] = []
        self._check_at: int | None = None  # where in the sink the config check's word goes, while it waits
        self._loaded = False

    # -- evidence ---------------------------------------------------------------------
    def _loaders(self) -> dict[str, Any]:
        return table_loaders(self.host)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        shared = self.options.evidence
        if shared is not None:
            self._run, self._ir = shared.load()
        else:
            self._run, self._ir = load_evidence(self.profile_paths, self.graph_paths, self.sink, self._loaders,
                                                self.options.source)
        if self.config_path is not None:
            from advisor_core.config.document import ConfigDocument

            given = self.options.config_document
            same = given is not None and Path(str(given.path)).resolve() == Path(self.config_path).resolve()
            self._doc = given if same else ConfigDocument.load(Path(self.config_path), self.sink)
        self._mismatches = []
        if self._doc is not None and (self._run is not None or self._ir is not None):
            from advisor_core.engine.consistency import reads_kernels

            if reads_kernels(self._run, self._ir) and not self.options.baseline:
                # The check would build the op views of two ranks here, one after the other, before the per-rank
                # units that build every rank's (in worker processes, or on a cluster): it waits for those
                # (_settle_config, called by run_rules between the units and the checks, or by whoever asks
                # first), and what it says goes where it would have been said now.
                self._check_at = self.sink.mark()
            else:
                self._check_config()

    def _check_config(self) -> None:
        """Hold the config against the run; a config that disagrees is said and left out."""
        from advisor_core.config.training import TrainingConfig
        from advisor_core.engine.consistency import check_inputs

        at, self._check_at = self._check_at, None
        said = DiagnosticSink()
        self._mismatches = check_inputs(self._run, self._ir, TrainingConfig(self._doc.data, str(self._doc.path)))
        if self._mismatches and self.options.baseline:
            for m in self._mismatches:
                said.warning("baseline-disagrees", f"{m.message(str(self.config_path))}; the baseline is "
                             "left out and only the checks of the config alone run", self.config_path)
            self._run, self._ir = None, None  # evidence of another shape says nothing about this config
            self._mismatches = []
        for m in self._mismatches:
            said.error("inputs-disagree", m.message(str(self.config_path)), self.config_path)
        self.sink.insert_at(at if at is not None else self.sink.mark(), said)
        if self._mismatches:
            self._doc = None  # a config from another run: nothing is computed from it
            if self._inputs is not None:
                self._inputs._leave_config_out()

    def _settle_config(self) -> None:
        """The config check that waited for the op views (see :meth:`_load`), if it still waits."""
        if self._check_at is not None:
            self._check_config()

    @property
    def mismatches(self) -> list[Any]:
        """How the config disagrees with the run (then it is left out of the analysis)."""
        self._load()
        self._settle_config()
        return self._mismatches

    @property
    def run(self) -> Any:
        self._load()
        return self._run

    @property
    def ir(self) -> Any:
        self._load()
        return self._ir

    @property
    def config_doc(self) -> Any:
        self._load()
        self._settle_config()
        return self._doc

    def inputs(self) -> AnalysisInputs:
        """The evidence of this session (one object: rank evidence computed by an analysis stays on it)."""
        self._load()
        self._settle_config()
        return self._unsettled_inputs()

    def _unsettled_inputs(self) -> AnalysisInputs:
        """:meth:`inputs`, perhaps with the config not yet held against the run (see :meth:`_load`)."""
        self._load()
        if self._inputs is None:
            self._inputs = AnalysisInputs(run=self._run, ir=self._ir, config_doc=self._doc, sink=self.sink,
                                          settings=self.options.settings.as_dict())
        return self._inputs

    def describe_inputs(self) -> dict[str, Any]:
        self._load()
        return {
            "profiles": [str(p) for p in self.profile_paths],
            "ranks": self._run.rank_ids if self._run is not None else [],
            "graphs": [str(p) for p in self.graph_paths],
            "config": str(self.config_path) if self.config_path is not None else None,
            "classified": self.classified.kinds,
        }

    # -- notebook helpers ---------------------------------------------------------------
    def table(self, name: str, columns: Sequence[str] | None = None) -> "pd.DataFrame | None":
        """Table ``name`` of every rank, stacked with a ``rank`` column (``None`` when absent)."""
        return None if self.run is None else self.run.table(name, columns)

    def analyze(
        self,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        progress: Any = None,
        summaries: bool = False,
    ) -> AnalysisResult:
        """Run the rules; with ``summaries`` also the frames a charting format draws (``result.summaries``:
        per-rank step breakdown, top kernels, MindData queue use, link bandwidth — see
        :func:`advisor_core.analyses.cluster.report_summaries`)."""
        s = self.options.settings
        sel = list(select) if select is not None else s.effective_select()
        ign = list(ignore) if ignore is not None else s.ignore
        opts = dict(s.rule_options)
        opts.update({k.upper(): dict(v) for k, v in (options or {}).items()})
        cluster = None
        if self.options.scheduler:
            from advisor_core.engine.dask_units import DaskUnits

            cluster = DaskUnits(self.options.scheduler, self.options.scheduler_timeout,  # fails before any work
                                self.options.task_timeout)
        try:
            result = run_rules(self._unsettled_inputs(), self.host, select=sel, ignore=ign, options=opts,
                               workers=self.options.jobs, progress=progress, cluster=cluster,
                               settle=self._settle_config)
            if summaries:  # while the op views are still within reach (a Dask cluster holds them)
                from advisor_core.analyses.cluster import report_summaries

                result.summaries = report_summaries(self.run)
        finally:
            if self._read_ahead:  # not claimed (the run failed first, or read its kernels otherwise): let it go
                from advisor_core.loaders.readahead import discard

                # waited for unless the run is being interrupted (Ctrl-C, an error): then its end is not held up
                discard(self._read_ahead, wait=sys.exc_info()[0] is None)
                self._read_ahead = []
            if cluster is not None:
                for rank in self.run or []:
                    rank.forget_op_view_loader()
                cluster.close()
        result.inputs = self.describe_inputs()
        return result

    @staticmethod
    def findings_frame(result: AnalysisResult) -> "pd.DataFrame":
        """One row per finding: code, severity, saving (µs, %), confidence, title, location, patch count."""
        import pandas as pd

        rows = []
        for i, f in enumerate(result.findings, 1):
            loc = f.locations[0] if f.locations else None
            rows.append(
                {
                    "rank_in_report": i,
                    "code": f.code,
                    "rule": f.rule,
                    "severity": f.severity.value,
                    "saving_us": f.saving_us,
                    "saving_pct": f.saving_pct,
                    "confidence": f.confidence,
                    "title": f.title,
                    "location": None if loc is None else (loc.key_path or loc.node or loc.op or loc.path),
                    "patches": len(f.patches),
                    "memory_delta_bytes": f.memory_delta_bytes,
                }
            )
        return pd.DataFrame(rows)


def load_evidence(profiles: Sequence[Path], graphs: Sequence[Path], sink: DiagnosticSink,
                  loaders: Callable[[], dict[str, Any]], source: str = "auto") -> tuple[Any, Any]:
    """The run of ``profiles`` and the IR dumps of ``graphs`` (each ``None`` without), what is wrong with them in
    ``sink``; ``loaders()`` gives the table loaders (asked only with profiles: they import the columnar stack)."""
    run = ir = None
    if profiles:
        from advisor_core.model.run import load_run

        run = load_run(*profiles, sink=sink, loaders=loaders(), report_empty=True, source=source)
    if graphs:
        from advisor_core.ir.dumps import find_ir_dumps

        for g in graphs:
            found = find_ir_dumps(Path(g), sink)
            if found is not None and found.ranks:
                if ir is None:
                    ir = found
                else:
                    sink.warning("several-ir-roots", f"several IR dump directories; using {dumps_root(ir)}", g)
    return run, ir


class SharedEvidence:
    """Profiles and IR dumps loaded once, when first asked for, for several sessions: ``advisor lint`` checks
    every config against the same baseline. What is wrong with them is said in ``sink``, once."""

    def __init__(self, profiles: Sequence[Path], graphs: Sequence[Path], host: PluginHost, source: str = "auto") -> None:
        self.profiles, self.graphs = list(profiles), list(graphs)
        self.sink = DiagnosticSink()
        self._host, self._source = host, source
        self._loaded: tuple[Any, Any] | None = None

    def load(self) -> tuple[Any, Any]:
        """The run and the IR dumps (each ``None`` without), loaded the first time."""
        if self._loaded is None:
            self._loaded = load_evidence(self.profiles, self.graphs, self.sink, lambda: table_loaders(self._host),
                                         self._source)
        return self._loaded


def table_loaders(host: PluginHost) -> dict[str, Any]:
    """Table name → loader: the built-in catalogue plus what plugins register (first registration wins)."""
    from advisor_core.loaders.registry import TableLoader

    out: dict[str, TableLoader] = {}
    for rec, ld in host.loaders():
        if not isinstance(ld, TableLoader):
            host._fail(rec, "advisor_register_loaders", f"{ld!r} is not a TableLoader")
            continue
        if ld.name in out:
            if rec.builtin:
                continue
            host._fail(rec, "advisor_register_loaders", f"table {ld.name!r} is already provided")
            continue
        out[ld.name] = ld
    return out


def dumps_root(dumps: Any) -> str:
    return str(getattr(dumps, "root", ""))
