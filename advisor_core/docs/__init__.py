"""Generated reference documentation: ``docs/tables.md``, ``docs/rules.md``, ``docs/plugins.md``.

Usage::

    python -m advisor_core.docs {tables|rules|hooks|all} [--check] [--docs-dir DIR]

* ``tables`` writes ``docs/tables.md``: every normalised table, the files it is
  read from, and every header spelling (or JSON key) behind each canonical
  column, with its dtype. Built from the loader specs
  (:class:`~advisor_core.loaders.csvtable.CsvTableSpec`, the column tuples of the
  JSON loaders) and the loader catalogue; dtypes of the non-CSV tables are those
  the readers actually produce.
* ``rules`` writes ``docs/rules.md``: one section per *built-in* rule (the
  ``ascend-advisor`` distribution's entry point; third-party plugins are left out
  so the page does not depend on what happens to be installed), with its
  metadata, options and help page — the same text ``advisor explain CODE`` prints.
* ``hooks`` refreshes the generated regions of ``docs/plugins.md`` (hookspecs,
  the Rule / RuleContext API, the finding and patch models, the test kit's case
  schema); the prose around them is hand-written and kept. A region sits between
  ``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->``.

``--check`` writes nothing: it prints a unified diff for every document that is
out of date and exits 1 (0 when all are current).

Modules: :mod:`.driver` (targets, ``check``, the CLI), :mod:`.tables` with :mod:`.tables_intro`,
:mod:`.tables_specs`, :mod:`.tables_derived` and :mod:`.tables_metadata`; :mod:`.rules`;
:mod:`.plugins` with :mod:`.api` and :mod:`.api_notes`; shared rendering in :mod:`.markdown`
and :mod:`.fields`.
"""

from __future__ import annotations

from advisor_core.docs.api_notes import (
    CONTEXT_NOTES,
    MODEL_MEMBER_NOTES,
    NEED_NOTES,
    RANK_NOTES,
    RULE_ATTRIBUTE_NOTES,
    RULE_METHOD_NOTES,
    RUN_NOTES,
)
from advisor_core.docs.driver import DEFAULT_DOCS_DIR, TARGETS, check, expected, main
from advisor_core.docs.markdown import rst_to_md
from advisor_core.docs.plugins import BEGIN, END, REGIONS, hookspecs, render_plugins
from advisor_core.docs.rules import builtin_rules, render_rules
from advisor_core.docs.tables import render_tables
from advisor_core.docs.tables_derived import reader_dtypes
from advisor_core.docs.tables_specs import all_csv_specs

__all__ = [
    "BEGIN",
    "CONTEXT_NOTES",
    "DEFAULT_DOCS_DIR",
    "END",
    "MODEL_MEMBER_NOTES",
    "NEED_NOTES",
    "RANK_NOTES",
    "REGIONS",
    "RULE_ATTRIBUTE_NOTES",
    "RULE_METHOD_NOTES",
    "RUN_NOTES",
    "TARGETS",
    "all_csv_specs",
    "builtin_rules",
    "check",
    "expected",
    "hookspecs",
    "main",
    "reader_dtypes",
    "render_plugins",
    "render_rules",
    "render_tables",
    "rst_to_md",
]
