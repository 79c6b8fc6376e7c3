"""Reading a config's YAML safely: bounded, total, and without YAML 1.1 surprises.

:func:`read_config_file` and :func:`load_yaml` (also used for the value of a
``key=value`` override) never raise anything but :class:`ConfigError`, whose
message is one line per problem, with the place and the key path:

* a file is read as bytes, at most :data:`MAX_BYTES`, and must be UTF-8 (a BOM
  is allowed); anything else is ``<path>: not UTF-8 text (byte 0x.. at offset N)``;
* nesting deeper than :data:`MAX_DEPTH` levels, and aliases that would expand to
  more than :data:`MAX_NODES` values ("billion laughs"), are refused from the
  parser's event stream, before any Python object is built (so no
  ``RecursionError`` or ``MemoryError``);
* duplicate keys are refused with both line numbers (YAML would keep the last);
* YAML 1.1 surprises are refused with the key named: base-60 numbers (``1:30``
  is 90), ``yes``/``no``/``on``/``off``/``y``/``n`` (only ``true``/``false``
  are booleans; quote the word for a string) and octal-looking ``0777``;
* integer literals longer than :data:`MAX_INT_DIGITS` digits are refused before
  ``int()`` sees them (Python refuses to convert 4,300 digits or more).

:func:`clip` and :func:`clip_text` (from :mod:`rayfl.text_checks`) cut echoed
values and messages short.

Example:
    >>> load_yaml("rounds: 3", "cfg.yaml")
    {'rounds': 3}
    >>> try:
    ...     load_yaml("rounds: 1:30", "cfg.yaml")
    ... except ConfigError as e:
    ...     print(str(e)[:60])
    cfg.yaml, line 1: rounds: '1:30' is a YAML 1.1 base-60 numbe
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from rayfl.text_checks import clip, clip_text

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_NODES",
    "ConfigError",
    "clip",
    "clip_text",
    "load_yaml",
    "read_config_file",
]

MAX_BYTES = 1 << 20  # 1 MiB: a config is a few KB
MAX_DEPTH = 64
MAX_NODES = 100_000  # values after alias expansion
MAX_INT_DIGITS = 30

_BOOL_WORDS = {"yes", "no", "on", "off", "y", "n"}
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class ConfigError(ValueError):
    """A configuration problem, printed by the CLI in a few lines, no traceback."""


def read_config_file(path: Path) -> Any:
    """Parse the YAML file ``path`` (checked to be a file) with :func:`load_yaml`.

    Raises:
        ConfigError: Too big, unreadable, not UTF-8, or any :func:`load_yaml` problem.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ConfigError(
            f"{clip_text(str(path), 200)}: cannot read: {e.strerror}"
        ) from None
    where = clip_text(str(path), 200)
    if len(data) > MAX_BYTES:
        raise ConfigError(
            f"{where}: larger than {MAX_BYTES // 1024} KiB (1 MiB); a config is a "
            "few KB: is this the right file?"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{where}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
        ) from None
    return load_yaml(text, where)


def load_yaml(text: str, where: str, *, lines: bool = True, root: str = "") -> Any:
    """Parse one YAML document with the checks of this module.

    Args:
        text: The YAML text.
        where: What to name in messages (a path, ``override 'k=v'``).
        lines: Whether to give line numbers (not for a one-line override).
        root: The key path of the document (an override's key), for messages.

    Raises:
        ConfigError: One line naming ``where``, the line and key path.
    """
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{where}: longer than 1 MiB")
    at = (lambda mark: f"{where}, line {mark.line + 1}") if lines else (lambda _: where)
    try:
        _check_events(text, at)
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_nodes(node, at, root)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except ConfigError:
        raise
    except yaml.YAMLError as e:
        detail = " ".join(str(e).split())
        raise ConfigError(
            f"{where}: not valid YAML: {clip_text(detail, 300)}"
        ) from None
    except Exception as e:  # a constructor's own error (e.g. a bad timestamp)
        raise ConfigError(
            f"{where}: cannot read a value: {clip_text(str(e), 200)} ({type(e).__name__})"
        ) from None


def _check_events(text: str, at: Any) -> None:
    """Refuse deep nesting and alias bombs from the event stream (no objects built).

    Each node's size is the number of values it expands to; an alias counts
    its anchor's size.
    """
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = []  # [anchor, size] of each open collection

    def add(size: int, event: Any) -> None:
        if stack:
            stack[-1][1] += size
            if stack[-1][1] > MAX_NODES:
                raise ConfigError(
                    f"{at(event.start_mark)}: more than {MAX_NODES:,} values, "
                    "counting what aliases expand to (a config has a few hundred)"
                )

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append([event.anchor, 1])
            if len(stack) > MAX_DEPTH:
                raise ConfigError(
                    f"{at(event.start_mark)}: nested deeper than {MAX_DEPTH} levels"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
            add(size, event)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            add(1, event)
        elif isinstance(event, yaml.AliasEvent):
            add(sizes.get(event.anchor, 1), event)


def _check_nodes(top: yaml.Node, at: Any, root: str) -> None:
    """Refuse duplicate keys and YAML 1.1 surprises, naming the key path."""
    todo: list[tuple[yaml.Node, str]] = [(top, root)]
    seen = 0
    while todo:
        node, path = todo.pop()
        seen += 1
        if seen > MAX_NODES:  # the event check bounds this; belt and braces
            raise ConfigError(f"{at(node.start_mark)}: more than {MAX_NODES:,} values")
        if isinstance(node, yaml.ScalarNode):
            _check_scalar(node, path, at)
        elif isinstance(node, yaml.SequenceNode):
            todo += [(v, f"{path}[{i}]") for i, v in enumerate(node.value)]
        elif isinstance(node, yaml.MappingNode):
            keys: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != _MERGE_TAG:
                    name = f"{path}.{key.value}" if path else key.value
                    _check_scalar(key, name, at, key=True)
                    first = keys.setdefault((key.tag, key.value), key.start_mark.line)
                    if first != key.start_mark.line:
                        raise ConfigError(
                            f"{at(key.start_mark)}: {clip_text(name)}: duplicate key "
                            f"(lines {first + 1} and {key.start_mark.line + 1}); "
                            "YAML would keep only the last: merge them"
                        )
                else:
                    name = path
                    todo.append((key, path))
                todo.append((value, name))


def _check_scalar(
    node: yaml.ScalarNode, path: str, at: Any, *, key: bool = False
) -> None:
    """A plain scalar that YAML 1.1 reads as something other than it looks.

    A key ``y`` or ``n`` stays a string in PyYAML, so only a value is refused.
    """
    if node.style is not None:  # quoted or block: a string
        return
    value, tag, name = node.value, node.tag, clip_text(path or "<value>")
    shown = clip_text(value)
    word = value.lower()
    if (tag == _BOOL_TAG and word not in ("true", "false")) or (
        word in _BOOL_WORDS and not key
    ):
        raise ConfigError(
            f"{at(node.start_mark)}: {name}: {shown!r} is a YAML 1.1 boolean; write "
            f"true or false, or quote it ({shown!r}) for a string"
        )
    if tag not in (_INT_TAG, _FLOAT_TAG):
        return
    digits = value.lstrip("+-").replace("_", "")
    if ":" in digits:
        number = _base60(digits)
        raise ConfigError(
            f"{at(node.start_mark)}: {name}: {shown!r} is a YAML 1.1 base-60 number "
            f"({number}); write the number, or quote it for a string"
        )
    if tag == _INT_TAG and re.fullmatch(r"0[0-9]+", digits):
        raise ConfigError(
            f"{at(node.start_mark)}: {name}: {shown!r} is a YAML 1.1 octal number; "
            f"write {digits.lstrip('0') or '0'} (decimal) or quote it for a string"
        )
    if tag == _INT_TAG and len(digits) > MAX_INT_DIGITS:
        raise ConfigError(
            f"{at(node.start_mark)}: {name}: an integer of {len(digits):,} digits "
            f"(at most {MAX_INT_DIGITS})"
        )


def _base60(digits: str) -> str:
    """The value YAML 1.1 gives ``1:30`` (90), as text, for the message."""
    whole, _, frac = digits.partition(".")
    total = 0
    for part in whole.split(":"):
        total = total * 60 + int(part[:MAX_INT_DIGITS] or 0)
    return f"{total}.{frac}" if frac else str(total)
