"""Reading, editing and writing the training YAML the simulator runs (ruamel round trip).

The config is kept as a ruamel ``CommentedMap`` so that the copy written to
``OUT/config/<name>.yaml`` keeps the comments, key order and anchors of the input. Edits
(``--set key=value``, ``--ranks``, ``--layers``, a scenario's changes) are applied to that
tree in place; anchored values (``train_dataset: &train_dataset``) change at every alias,
exactly as they would if the user edited the file.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from advisor_core.simulate.errors import SimulationInputError

__all__ = ["new_yaml", "load_config_text", "load_config_file", "dump_config", "set_dotted", "parse_set", "get_dotted"]


def new_yaml() -> YAML:
    """The round-trip YAML instance used for every read and write (pure Python: keeps comments)."""
    y = YAML(typ="rt", pure=True)
    y.preserve_quotes = True
    y.width = 4096  # never re-wrap long lines (select_recompute regex lists)
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def load_config_text(text: str, where: str) -> CommentedMap:
    """Parse a training YAML; a parse error becomes a :class:`SimulationInputError`."""
    try:
        data = new_yaml().load(text)
    except Exception as exc:  # noqa: BLE001 - the parser raises many types
        raise SimulationInputError(f"{where}: not valid YAML ({exc})") from None
    if not isinstance(data, CommentedMap):
        raise SimulationInputError(f"{where}: the top level must be a mapping of config sections")
    return data


def load_config_file(path: str | Path) -> CommentedMap:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SimulationInputError(f"--config {p}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise SimulationInputError(f"--config {p}: not UTF-8 text") from None
    return load_config_text(text, f"--config {p}")


def dump_config(data: CommentedMap) -> str:
    buf = io.StringIO()
    new_yaml().dump(data, buf)
    return buf.getvalue()


def parse_set(item: str) -> tuple[str, Any]:
    """``a.b.c=value`` → (``"a.b.c"``, value parsed as YAML: ``4112`` → int, ``[85, 160]`` → list)."""
    if "=" not in item:
        raise SimulationInputError(f"--set {item!r}: expected key=value (e.g. model.model_config.hidden_size=4112)")
    key, _, raw = item.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise SimulationInputError(f"--set {item!r}: the key must be a dotted path such as parallel_config.model_parallel")
    try:
        value = YAML(typ="rt", pure=True).load(raw) if raw.strip() else None
    except Exception as exc:  # noqa: BLE001
        raise SimulationInputError(f"--set {key}: value {raw!r} is not valid YAML ({exc})") from None
    return key, value


def _index(node: Any, part: str, key: str) -> Any:
    if isinstance(node, dict):
        return node[part] if part in node else _MISSING
    if isinstance(node, list):
        if part.isdigit() and int(part) < len(node):
            return node[int(part)]
        return _MISSING
    raise SimulationInputError(f"--set {key}: '{part}' is below a value that is not a mapping or list")


_MISSING = object()


def get_dotted(data: Any, key: str, default: Any = None) -> Any:
    node = data
    for part in key.split("."):
        if not isinstance(node, (dict, list)):
            return default
        node = _index(node, part, key)
        if node is _MISSING:
            return default
    return node


def set_dotted(data: CommentedMap, key: str, value: Any) -> None:
    """Set ``key`` (dotted; list items by index) to ``value``, creating missing mappings."""
    parts = key.split(".")
    node: Any = data
    for part in parts[:-1]:
        nxt = _index(node, part, key)
        if nxt is _MISSING or nxt is None:
            if isinstance(node, list):
                raise SimulationInputError(f"--set {key}: list index '{part}' is out of range")
            nxt = CommentedMap()
            node[part] = nxt
        elif not isinstance(nxt, (dict, list)):
            raise SimulationInputError(f"--set {key}: '{part}' holds a value, not a mapping")
        node = nxt
    last = parts[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise SimulationInputError(f"--set {key}: list index '{last}' is out of range")
        node[int(last)] = value
    else:
        node[last] = value

