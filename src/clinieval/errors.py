"""User-facing errors.

A :class:`UserError` is a mistake the user can fix (bad spec, missing file, unreachable server).
The CLI prints its message on one line and exits non-zero, never a traceback; anything else
escaping is a bug in clinieval and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T", bound=str)


class UserError(Exception):
    """A problem with the user's input or environment, explained in one actionable line."""


def one_of(value: str, choices: Sequence[T], what: str) -> T:
    """``value`` as the element of ``choices`` it names (so a ``Literal`` type survives a string
    from the command line), or one error naming ``what`` and every choice."""
    for choice in choices:
        if value == choice:
            return choice
    raise UserError(f"{what} {value!r} is unknown; choose from {', '.join(map(str, choices))}")
