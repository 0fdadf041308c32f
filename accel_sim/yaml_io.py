"""The one YAML reader for user files (architectures, models, sweeps).

Safe loading (no Python objects) plus three refusals ``yaml.safe_load`` does not make:

* a key given twice in one mapping (``safe_load`` silently keeps the last value);
* nesting deeper than :data:`MAX_DEPTH` collections (deep nesting ends in a RecursionError);
* files larger than :data:`MAX_BYTES`.

Every problem is one :class:`~accel_sim.errors.UserInputError` naming the file and the line.

Speed: a file is parsed with libyaml (PyYAML's C parser, ~10× faster than the pure-Python one:
an architecture file in ~3 ms instead of ~27 ms, paid by every command that loads one) after a
pass over its events has checked the nesting depth (libyaml's composer recurses in C, where a
deep file would overflow the stack rather than raise). Anything libyaml refuses, or a file too
deeply nested, or holding a tab (which libyaml takes inside a plain scalar where the Python
loader refuses it), is parsed again by the pure-Python loader, whose messages are the ones a
user sees. Values are the same either way (both loaders share the Python constructor and
resolver); libyaml, closer to the YAML spec, accepts a few texts the Python parser refuses, e.g.
``{unit?: pJ}`` (the schema then judges the key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node

from accel_sim.errors import UserInputError

#: Deepest nesting of mappings and sequences accepted (our files use fewer than 8 levels).
MAX_DEPTH = 64
#: Largest YAML file accepted, in bytes (16 MiB; shipped files are a few KiB).
MAX_BYTES = 16 * 2**20
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Refused(yaml.YAMLError):
    """A refusal of :class:`_StrictLoader`, carrying the message, key and 1-based line."""

    def __init__(self, message: str, key: str | None, line: int) -> None:
        super().__init__(message)
        self.message, self.key, self.line = message, key, line


class _StrictConstruction:
    """A loader mixin (shared by the pure-Python and the libyaml loader) refusing a key given
    twice in one mapping, and naming the line of a value the constructor cannot build (an
    impossible date such as ``2020-13-45`` raises ValueError inside PyYAML's timestamp
    constructor)."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, OverflowError, AttributeError) as err:
            # (AttributeError: an explicit !!timestamp tag on text its pattern does not match)
            line = node.start_mark.line + 1
            why = "not a date or time" if isinstance(err, AttributeError) else str(err)
            what = f"the value {node.value!r}" if isinstance(node.value, str) else "the value"
            raise _Refused(f"cannot read {what} at line {line} ({why})", None, line) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeConstructor reports it
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise _Refused(
                        f"duplicate key at line {line} (first given at line {first})",
                        str(key),
                        line,
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _StrictLoader(_StrictConstruction, yaml.SafeLoader):
    """``SafeLoader`` refusing duplicate keys and nesting deeper than :data:`MAX_DEPTH`."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        collection = self.check_event(yaml.CollectionStartEvent)
        self._depth += collection
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels at line {mark.line + 1}, "
                               f"column {mark.column + 1}", None, mark.line + 1)  # fmt: skip
            return super().compose_node(parent, index)
        finally:
            self._depth -= collection


_CLoader = getattr(yaml, "CSafeLoader", None)
_FastLoader = type("_FastLoader", (_StrictConstruction, _CLoader), {}) if _CLoader else None


def _shallow(text: str) -> bool:
    """Whether libyaml parses ``text`` and its collections nest at most :data:`MAX_DEPTH` deep
    (a pass over the events, which libyaml produces without recursing)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_CLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    return False
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return False
    return True


def _fast_load(text: str) -> tuple[bool, Any]:
    """``(True, data)`` if libyaml loads ``text`` without a problem, else ``(False, None)``: the
    caller then loads it with the pure-Python loader, whose messages are the reference."""
    if _FastLoader is None or "\t" in text or not _shallow(text):
        return False, None
    loader = _FastLoader(text)
    try:
        return True, loader.get_single_data()
    except (yaml.YAMLError, RecursionError):
        return False, None
    finally:
        loader.dispose()


def _problem(err: yaml.YAMLError) -> str:
    """What is wrong, in a few words (a reader error names the character and its position)."""
    problem = getattr(err, "problem", None) or "malformed YAML"
    if isinstance(err, ConstructorError) and "unhashable" in str(problem):
        problem = "a mapping key must be a plain value"
    return str(problem)


def load_yaml_text(text: str, source: str) -> Any:
    """Parse YAML ``text`` read from ``source`` (a file path, for messages)."""
    parsed, data = _fast_load(text)
    if parsed:
        return data
    try:  # (the reader checks the characters as it is built: a control character raises here)
        loader = _StrictLoader(text)
    except yaml.reader.ReaderError as err:
        pos = err.position
        line, column = text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)
        code = err.character if isinstance(err.character, int) else ord(err.character)
        why = f"malformed YAML at line {line}, column {column}: control character #x{code:04x}"
        raise UserInputError(source, f"{why} is not allowed") from None
    try:
        return loader.get_single_data()
    except _Refused as err:
        raise UserInputError(source, err.message, err.key) from None
    except RecursionError:
        raise UserInputError(source, f"nested too deeply (limit {MAX_DEPTH} levels)") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserInputError(source, f"malformed YAML{where}: {_problem(err)}") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> Any:
    """Read and parse the YAML file at ``path``; every problem is one :class:`UserInputError`."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise UserInputError(str(path), f"{size} bytes; YAML files are limited to {MAX_BYTES}")
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UserInputError(str(path), "file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserInputError(str(path), f"cannot read: {err.__class__.__name__}") from None
    return load_yaml_text(text, str(path))
