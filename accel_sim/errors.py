"""The one exception type for user mistakes, and the one converter from pydantic errors to it.

Anything a user can get wrong (a file, a key, a value, a flag) raises :class:`UserInputError`.
The CLI catches it once, prints ``str(err)`` as a single line and exits with code 2.
Programming errors are left to raise normally.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic is only needed by callers that validate
    from pydantic import ValidationError


class UserInputError(Exception):
    """A bad file, key or value supplied by the user.

    Args:
        source: where the bad input came from (a file path, ``--gemm``, ``simulate()``...).
        message: what is wrong and, where possible, what to do instead.
        key: the offending key or field path inside ``source`` (``memory[2].capacity_bytes``).
    """

    def __init__(self, source: str, message: str, key: str | None = None) -> None:
        self.source = str(source)
        self.key = key
        self.message = message
        super().__init__(str(self))

    def __reduce__(self):  # picklable across Dask workers
        return (type(self), (self.source, self.message, self.key))

    def __str__(self) -> str:
        where = f"{self.source}: {self.key}" if self.key else self.source
        return re.sub(r"\s*[\r\n]+\s*", " ", f"{where}: {self.message}")  # always one line


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def user_error_from_validation(
    err: ValidationError,
    source: str,
    *,
    drop_loc: Collection[str] = (),
    expected_keys: Callable[[Sequence[str]], Collection[str]] | None = None,
) -> UserInputError:
    """The first problem of a pydantic ``ValidationError`` as one :class:`UserInputError`.

    Args:
        err: the validation error.
        source: the file (or API argument) the validated data came from.
        drop_loc: location parts to leave out of the key (a tagged union's tag, e.g. ``cube``).
        expected_keys: for an unknown key at location ``loc`` (without the key itself), the keys
            allowed there, listed in the message.

    The key is the dotted location (``memory.1.capacity_bytes``); a model validator may name a
    field itself by starting its message with ``"field: "``. Scalar inputs are shown as
    ``(got ...)``; further problems are counted, not listed.
    """
    problems = err.errors()
    first = problems[0]
    loc = [str(p) for p in first["loc"] if str(p) not in drop_loc]
    key = ".".join(loc) or None
    kind = first["type"]
    message = re.sub(r"^(Value|Assertion) error, ", "", first["msg"])
    if kind == "extra_forbidden":
        message = "unknown key"
        if expected_keys is not None:
            allowed = sorted(expected_keys(loc[:-1]))
            if allowed:
                message += f"; expected one of {', '.join(allowed)}"
    elif kind == "missing":
        message = "required key is missing"
    else:
        match = re.match(r"^([A-Za-z_][\w.]*): (.*)$", message)
        if match:  # a model validator naming the field: "field: message"
            key = ".".join([*loc, match.group(1)])
            message = match.group(2)
        elif "input" in first and not isinstance(first["input"], dict | list):
            message += f" (got {_short(first['input'])})"
    more = len(problems) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return UserInputError(source, message, key)
