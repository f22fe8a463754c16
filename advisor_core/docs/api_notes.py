"""Hand-written meanings of API members that have no docstring of their own (used by :mod:`.api`)."""

from __future__ import annotations

# Meanings of the Rule class attributes (the class declares them without docstrings).
RULE_ATTRIBUTE_NOTES = {
    "code": "stable id: 1–3 capital letters + 3 digits (`CODE_PATTERN`); never reused for another meaning",
    "name": "kebab-case name (`NAME_PATTERN`), selectable like the code",
    "summary": "one line, shown by `advisor rules` and as the SARIF short description",
    "severity": "default severity; a finding sets its own (usually from its share of step time)",
    "requires": "evidence the rule can work from — any one `Need` is enough; otherwise the rule is *skipped*",
    "tags": "groups for `--select` (e.g. `compute`, `comm`, `config`)",
    "rank_tables": "per-rank tables `check` reads besides kernels (e.g. `minddata_pipeline`): read in each rank's unit, where its files are",
    "fix_availability": "whether findings carry config patches: `always`, `sometimes` or `never`",
    "reads_other_findings": "run after every other rule and read their findings with `ctx.findings_so_far()` (to cite a cause another rule found; never import it)",
    "Options": "a `RuleOptions` subclass: the rule's validated settings (`[tool.advisor.rules.CODE]`)",
}

CONTEXT_NOTES = {
    "run": "the profiled `Run` (`None` without profiles): `for rank in ctx.run`, `rank.op_view()` (kernels as distinct ops), `rank.table(name, columns)`",
    "ir": "the IR dumps (`IRDumpSet`, `None` without them); prefer `ctx.ir_graph(stage)`",
    "config": "typed view of the training YAML (`TrainingConfig`, `None` without one): `get(key)`, `located(key)`, `has(pointer)`",
    "config_doc": "the round-trip YAML document the patches apply to",
    "settings": "the resolved `[tool.advisor]` settings (read-only)",
    "sink": "diagnostics sink (warnings about inputs)",
    "has": "whether the evidence a `Need` describes is present (no table is read)",
    "ir_ranks": "IR dumps per rank, in rank order",
    "config_path": "path of the training config, if any",
}


RULE_METHOD_NOTES = {
    "check": "the rule itself: yield `Finding` objects built from the evidence in `ctx`; call `ctx.skip(reason)` to say why there are none",
    "missing_doc_sections": "the `DOC_SECTIONS` the help page lacks (the test suite requires none for built-ins)",
}
NEED_NOTES = {
    "table": "a canonical table and the columns the rule reads (all must be in the file's header)",
    "ir": "an IR stage: `frontend`, `backend` or `parallel`",
    "config": "a logical config key or JSON pointer; `*` (default) = any training config",
    "describe": "the text `advisor rules` and skip reasons show",
}
RUN_NOTES = {
    "rank": "one rank by id (iterate `for rank in run` for all, in rank order)",
    "rank_ids": "profiled rank ids, sorted",
}
RANK_NOTES = {
    "identity": "`RankIdentity`: rank id and where it came from, framework and CANN versions (see tables.md, Rank metadata)",
    "rank_id": "the rank id",
    "parallel": "`ParallelLayout` from the profiler metadata, when it says",
    "settings": "`ProfilerSettings`: profiler level, `aic_metrics` … (what was collected)",
    "env": "environment variables recorded by the profiler (`profiler_metadata.json`)",
    "path": "the rank's profile directory",
    "loader": "the `TableLoader` of a table name (`KeyError` for an unknown table)",
    "has_table": "whether the rank has the file the table is read from",
}

MODEL_MEMBER_NOTES = {
    "Finding.primary_config_location": "the first `config` location, if any",
    "Patch.preconditions": "the `test` operations",
    "Patch.changes": "the operations that are not `test`",
}
