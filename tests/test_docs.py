"""The documentation room: rule help pages, hookspec docs, generated docs in sync (datasette/ruff style).

``docs/tables.md``, ``docs/rules.md`` and the generated regions of ``docs/plugins.md`` come
from ``python -m advisor_core.docs``; when one of these tests fails after a code change,
regenerate with ``python -m advisor_core.docs all`` and commit the result.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor_core import docs
from advisor_core.cli.engine_cmds import explain_command
from advisor_core.engine.rule import DOC_SECTIONS

DOCS = Path(__file__).resolve().parent.parent / "docs"
HOOKSPECS = docs.hookspecs()
try:  # rule modules are edited often: a broken one fails one test, not the collection
    BUILTIN = docs.builtin_rules()
    BUILTIN_ERROR = None
except RuntimeError as exc:
    BUILTIN, BUILTIN_ERROR = {}, str(exc)


# -- (a) every built-in rule has a complete help page ------------------------------------------


@pytest.mark.parametrize("code", sorted(BUILTIN))
def test_rule_docstring_has_sections(code: str) -> None:
    cls = BUILTIN[code].cls
    missing = cls.missing_doc_sections()
    assert not missing, f"{code} ({cls.__module__}) help page lacks section(s) {missing}; needs {DOC_SECTIONS}"
    first = cls.help_text().splitlines()[0].strip()
    assert first and first not in DOC_SECTIONS, f"{code}: the help page must open with a summary sentence"


def test_builtin_rules_load_and_are_only_builtins() -> None:
    assert BUILTIN_ERROR is None, BUILTIN_ERROR
    # docs/rules.md must not depend on which third-party plugins are installed.
    assert BUILTIN and all(r.plugin.builtin for r in BUILTIN.values())


# -- (b) every hookspec is documented ------------------------------------------------------------


def test_there_are_hookspecs() -> None:
    assert {"advisor_register_rules", "advisor_register_loaders"} <= {n for n, _, _ in HOOKSPECS}


@pytest.mark.parametrize("name", [n for n, _, _ in HOOKSPECS])
def test_hookspec_has_docstring(name: str) -> None:
    fn = dict((n, f) for n, f, _ in HOOKSPECS)[name]
    assert fn.__doc__ and len(fn.__doc__.strip()) > 40, f"hookspec {name} needs a docstring: it is the plugin contract"


@pytest.mark.parametrize("name", [n for n, _, _ in HOOKSPECS])
def test_hookspec_is_in_plugins_md(name: str) -> None:
    text = (DOCS / "plugins.md").read_text(encoding="utf-8")
    assert f"### `{name}`" in text, f"docs/plugins.md has no section for hookspec {name}"


def test_rule_api_attributes_have_notes() -> None:
    from advisor_core.engine.rule import Rule

    missing = [a for a in Rule.__annotations__ if a not in docs.RULE_ATTRIBUTE_NOTES]
    assert not missing, f"add a meaning for Rule attribute(s) {missing} to advisor_core.docs.RULE_ATTRIBUTE_NOTES"


# -- (c) the committed docs are what the generator writes ----------------------------------------


@pytest.mark.parametrize("target", ["tables", "hooks", "rules"])
def test_docs_up_to_date(target: str) -> None:
    diff = docs.check(target, DOCS)
    assert diff is None, (
        f"docs/{docs.TARGETS[target]} is out of date; run `python -m advisor_core.docs {target}`\n{diff[:4000]}"
    )


def test_check_reports_a_stale_doc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tables.md").write_text("# stale\n", encoding="utf-8")
    assert docs.main(["tables", "--check", "--docs-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "+# Normalised tables" in out and "-# stale" in out
    assert (tmp_path / "tables.md").read_text(encoding="utf-8") == "# stale\n"  # --check writes nothing
    assert docs.main(["tables", "--docs-dir", str(tmp_path)]) == 0
    assert docs.main(["tables", "--check", "--docs-dir", str(tmp_path)]) == 0


def test_plugins_md_prose_survives_regeneration(tmp_path: Path) -> None:
    stale = (DOCS / "plugins.md").read_text(encoding="utf-8")
    stale = re.sub(r"(<!-- BEGIN GENERATED: models[^>]*-->\n).*?(<!-- END GENERATED: models -->)", r"\1old\n\2", stale, flags=re.S)
    (tmp_path / "plugins.md").write_text(stale + "\nA hand-written closing line.\n", encoding="utf-8")
    assert docs.check("hooks", tmp_path) is not None
    docs.main(["hooks", "--docs-dir", str(tmp_path)])
    text = (tmp_path / "plugins.md").read_text(encoding="utf-8")
    assert "A hand-written closing line." in text and "### `Finding`" in text
    assert docs.check("hooks", tmp_path) is None


def test_every_table_column_is_documented() -> None:
    from advisor_core.loaders.registry import BUILTIN_LOADERS

    text = (DOCS / "tables.md").read_text(encoding="utf-8")
    for ld in BUILTIN_LOADERS:
        section = text.split(f"\n## `{ld.name}`\n", 1)[1].split("\n## ", 1)[0]
        for col in ld.columns:
            row = next((line for line in section.splitlines() if line.startswith(f"| `{col}`")), None)
            assert row is not None, f"tables.md: {ld.name}.{col} is not documented"
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert cells[1] not in ("", "?"), f"tables.md: {ld.name}.{col} has no dtype"
            assert cells[2], f"tables.md: {ld.name}.{col} has no source (add it to advisor_core.docs.tables_derived._SOURCES)"


def test_every_csv_spec_is_documented() -> None:
    text = (DOCS / "tables.md").read_text(encoding="utf-8")
    for spec in docs.all_csv_specs():
        for col in spec.columns:
            for header in col.headers:
                assert f"| `{header}` | `{spec.name}` | `{col.name}` |" in text, f"{spec.name}: header {header!r} missing"


# -- (d) `advisor explain` prints the help page docs/rules.md holds -------------------------------


def _help_block(code: str) -> str:
    text = (DOCS / "rules.md").read_text(encoding="utf-8")
    section = re.split(r"^## ", text, flags=re.M)
    body = next(s for s in section if s.startswith(f"{code} "))
    m = re.search(r"^Help page \(`advisor explain " + code + r"`\):\n\n(`{3,})text\n(.*?)\n\1$", body, re.S | re.M)
    assert m, f"rules.md: no help page block for {code}"
    return m.group(2)


@pytest.mark.parametrize("code", ["MD001", "LC005"])
def test_explain_matches_rules_md(code: str) -> None:
    res = CliRunner().invoke(explain_command, [code, "--no-plugins"])
    assert res.exit_code == 0, res.output
    assert res.output.rstrip("\n").endswith(_help_block(code)), (
        f"`advisor explain {code}` and docs/rules.md differ; run `python -m advisor_core.docs rules`"
    )
