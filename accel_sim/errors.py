"""The one exception type for user mistakes.

Anything a user can get wrong (a file, a key, a value, a flag) raises :class:`UserInputError`.
The CLI catches it once, prints ``str(err)`` as a single line and exits with code 2.
Programming errors are left to raise normally.
"""

from __future__ import annotations


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
        return f"{where}: {self.message}"
