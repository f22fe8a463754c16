"""Settings: ``[tool.advisor]`` in ``pyproject.toml`` and/or ``advisor.toml``, overridden by flags.

Lookup: ``--settings FILE`` if given; otherwise the nearest ``advisor.toml`` or
``pyproject.toml`` with a ``[tool.advisor]`` table, walking up from the current
directory (stopping at a ``.git`` directory or the filesystem root). In
``advisor.toml`` the keys sit at the top level (a ``[tool.advisor]`` table is
accepted too). Keys::

    select = ["MD", "CT001"]        # codes, prefixes, names, tags or "ALL"
    extend-select = []              # added to select
    ignore = ["AL001"]
    fail-on = "medium"              # high | medium | low | never
    format = "text"
    scheduler = "tcp://10.0.0.5:8786" # run the per-rank work on this Dask cluster ("local": a local one)
    [plugins]
    autoload = true
    load = ["my-plugin"]            # load even when autoload is off
    block = ["noisy-plugin"]
    [plugins.my-plugin]             # a plugin's own table, given to its advisor_configure hook
    colour = "blue"
    [rules.MD001]                   # per-rule options, validated by the rule
    min_gap_share_pct = 3.0

Unknown top-level keys are errors (a typo must not silently do nothing).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KNOWN_KEYS = {"select", "extend-select", "ignore", "fail-on", "format", "plugins", "rules", "output", "host", "scheduler"}
FAIL_LEVELS = ("high", "medium", "low", "never")


class SettingsError(ValueError):
    """A settings file that cannot be used; the message names the file and key."""


@dataclass
class Settings:
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    fail_on: str = "low"
    format: str = "text"
    plugins_autoload: bool | None = None
    plugins_load: list[str] = field(default_factory=list)
    plugins_block: list[str] = field(default_factory=list)
    plugin_tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    scheduler: str | None = None
    source: str | None = None

    def effective_select(self) -> list[str] | None:
        if self.select is None and not self.extend_select:
            return None
        return list(self.select or ["ALL"]) + list(self.extend_select)

    def as_dict(self) -> dict[str, Any]:
        return {
            "select": self.select,
            "extend-select": self.extend_select,
            "ignore": self.ignore,
            "fail-on": self.fail_on,
            "format": self.format,
            "plugins": {**self.plugin_tables, "autoload": self.plugins_autoload, "load": self.plugins_load,
                        "block": self.plugins_block},
            "rules": self.rule_options,
            "host": self.host,
            "scheduler": self.scheduler,
            "source": self.source,
        }


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def find_settings_file(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest settings table above ``start``, with its file."""
    here = start.resolve()
    for d in [here, *here.parents]:
        adv = d / "advisor.toml"
        if adv.is_file():
            data = _read_toml(adv)
            return adv, data.get("tool", {}).get("advisor", data) if "tool" in data else data
        py = d / "pyproject.toml"
        if py.is_file():
            data = _read_toml(py)
            table = data.get("tool", {}).get("advisor")
            if table is not None:
                return py, table
        if (d / ".git").exists():
            break
    return None


def _str_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise SettingsError(f"{where} must be a list of strings")


def parse_settings(table: dict[str, Any], source: str | None) -> Settings:
    where = source or "settings"
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise SettingsError(f"{where}: unknown key(s) {', '.join(unknown)} in [tool.advisor] (known: {', '.join(sorted(KNOWN_KEYS))})")
    s = Settings(source=source)
    if "select" in table:
        s.select = _str_list(table["select"], f"{where}: select")
    if "extend-select" in table:
        s.extend_select = _str_list(table["extend-select"], f"{where}: extend-select")
    if "ignore" in table:
        s.ignore = _str_list(table["ignore"], f"{where}: ignore")
    if "fail-on" in table:
        v = str(table["fail-on"]).lower()
        if v not in FAIL_LEVELS:
            raise SettingsError(f"{where}: fail-on must be one of {', '.join(FAIL_LEVELS)}, not {table['fail-on']!r}")
        s.fail_on = v
    if "format" in table:
        s.format = str(table["format"])
    plugins = table.get("plugins", {})
    if not isinstance(plugins, dict):
        raise SettingsError(f"{where}: plugins must be a table")
    # [plugins.<name>] sub-tables belong to that plugin (read in advisor_configure).
    s.plugin_tables = {k: dict(v) for k, v in plugins.items() if isinstance(v, dict)}
    bad = sorted(set(plugins) - {"autoload", "load", "block"} - set(s.plugin_tables))
    if bad:
        raise SettingsError(f"{where}: unknown key(s) plugins.{', plugins.'.join(bad)} "
                            "(a plugin's own settings go in a [plugins.<name>] table)")
    if "autoload" in plugins:
        if not isinstance(plugins["autoload"], bool):
            raise SettingsError(f"{where}: plugins.autoload must be true or false")
        s.plugins_autoload = plugins["autoload"]
    s.plugins_load = _str_list(plugins.get("load", []), f"{where}: plugins.load")
    s.plugins_block = _str_list(plugins.get("block", []), f"{where}: plugins.block")
    rules = table.get("rules", {})
    if not isinstance(rules, dict) or not all(isinstance(v, dict) for v in rules.values()):
        raise SettingsError(f"{where}: rules must be a table of tables ([rules.MD001] …)")
    s.rule_options = {k.upper(): dict(v) for k, v in rules.items()}
    host = table.get("host", {})
    if not isinstance(host, dict):
        raise SettingsError(f"{where}: host must be a table")
    s.host = dict(host)
    if "scheduler" in table:
        if not isinstance(table["scheduler"], str) or not table["scheduler"].strip():
            raise SettingsError(f"{where}: scheduler must be a Dask scheduler address (tcp://HOST:PORT) or \"local\"")
        s.scheduler = table["scheduler"].strip()
    return s


def load_settings(explicit: Path | None = None, cwd: Path | None = None) -> Settings:
    """Settings from ``explicit`` or the nearest settings file (defaults when none)."""
    if explicit is not None:
        if not explicit.is_file():
            raise SettingsError(f"{explicit}: settings file does not exist")
        data = _read_toml(explicit)
        table = data.get("tool", {}).get("advisor", data) if "tool" in data else data
        return parse_settings(table, str(explicit))
    found = find_settings_file(cwd or Path.cwd())
    if found is None:
        return Settings()
    return parse_settings(found[1], str(found[0]))
