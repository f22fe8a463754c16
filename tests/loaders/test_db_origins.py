"""``docs/tables.md`` says where each column comes from in the SQLite export: hold it to what the DB loader returns.

A small simulated run written as both exports is read with ``--source db``. A column the docs
list as "not in the DB export" must come back empty; a column given a DB origin must come back
filled, unless the simulator has no value for it in the text export either (named below).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor_core.loaders.registry import BUILTIN_LOADERS
from advisor_core.model.run import load_run
from advisor_core.simulate import simulate_scenario

DB_TABLES = [ld for ld in BUILTIN_LOADERS if ld.db is not None]
# documented DB origins the simulator leaves empty in both exports (the sentinel 4294967295 / no stream pointer)
EMPTY_IN_THE_SIMULATION = {("kernels", "model_id"), ("kernels", "context_id"), ("memory_record", "stream_ptr")}


@pytest.fixture(scope="module")
def both_exports(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("origins")
    simulate_scenario("clean", out, ranks=4, layers=1, steps=2, export="both")
    return out / "profile"


def _frame(root: Path, source: str, ld):  # noqa: ANN001, ANN202
    rank = load_run(root, source=source).rank(0)
    return rank.table(ld.name, list(ld.columns)) if ld.projectable else rank.table(ld.name), rank


@pytest.mark.parametrize("ld", DB_TABLES, ids=[ld.name for ld in DB_TABLES])
def test_documented_db_origin_matches_what_the_db_loader_returns(both_exports, ld):
    db, rank = _frame(both_exports, "db", ld)
    assert rank.table_source(ld.name)[1] in ld.db.artifacts
    assert db is not None and len(db) > 0
    text, _ = _frame(both_exports, "text", ld)
    for col in ld.columns:
        filled = bool(db[col].notna().any())
        if col not in ld.db_origin:
            assert not filled, f"{ld.name}.{col}: documented as not in the DB export, but the DB loader fills it"
        elif (ld.name, col) in EMPTY_IN_THE_SIMULATION:
            assert not filled and not text[col].notna().any(), f"{ld.name}.{col}"
        else:
            assert filled, f"{ld.name}.{col}: documented as {ld.db_origin[col]!r}, but empty from the DB"
    assert set(ld.db_origin) - {"_note"} <= set(ld.columns)  # no origin for a column the table lacks


def test_every_column_of_a_db_table_is_in_the_docs():
    from advisor_core.docs.markdown import table_cell
    from advisor_core.docs.tables import render_tables

    text = render_tables()
    for ld in DB_TABLES:
        section = text.split(f"### From the SQLite export (`{ld.name}`)", 1)[1].split("\n## ", 1)[0]
        for col in ld.columns:
            want = table_cell(ld.db_origin.get(col, "not in the DB export (missing)"))
            assert f"| `{col}` | {want} |" in section, (ld.name, col)
