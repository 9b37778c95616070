"""User-facing errors.

A :class:`UserError` is a mistake the user can fix (bad spec, missing file, unreachable server).
The CLI prints its message on one line and exits non-zero, never a traceback; anything else
escaping is a bug in clinieval and keeps its traceback.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

T = TypeVar("T", bound=str)


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)

EXIT_FAILED_ITEMS = 3
"""Exit status of a command that finished but left items failed (a judge call that failed, say):
distinct from 2 (a user's mistake, nothing done) and 1 (a bug or every call failed), so a script can
tell "the results are written but incomplete" from "nothing happened"."""


class UserError(Exception):
    """A problem with the user's input or environment, explained in one actionable line."""


def shown(name: str) -> str:
    """A name from a user's file for a one-line error: as written, or quoted and escaped when it
    holds a line break or another unprintable character (a quoted CSV cell may)."""
    return name if name.isprintable() else repr(name)


def one_of(value: str, choices: Sequence[T], what: str) -> T:
    """``value`` as the element of ``choices`` it names (so a ``Literal`` type survives a string
    from the command line), or one error naming ``what`` and every choice."""
    for choice in choices:
        if value == choice:
            return choice
    raise UserError(f"{what} {value!r} is unknown; choose from {', '.join(map(str, choices))}")


_RESUME = "everything finished before this is kept: free some space and run the same command again to resume"
_WRITABLE = "nothing finished was changed: make the folder writable or write elsewhere, then run it again"
_STORAGE_ADVICE = {
    errno.ENOSPC: ("no space left on the device", _RESUME),
    errno.EDQUOT: ("disk quota exceeded", _RESUME),
    errno.EROFS: ("the file system is read-only", _WRITABLE),
    errno.EACCES: ("permission denied", _WRITABLE),
    errno.EPERM: ("operation not permitted", _WRITABLE),
}


def storage_message(error: OSError) -> str | None:
    """One line for a write the disk refused (full, read-only, not ours), naming the file and what
    to do; None for any other OSError, which stays a bug with its traceback.

    Why here and not at each write: a run writes results, a cache, a manifest and reports from many
    places, and each of them ends the same way when the disk says no. Resuming is what makes the
    advice true: finished items are on disk, the rerun asks only for the rest."""
    advice = _STORAGE_ADVICE.get(error.errno or 0)
    if advice is None:
        return None
    what, todo = advice
    where = error.filename if error.filename is not None else "a file"
    return f"cannot write {where}: {what}; {todo}"


def by_name(items: Iterable[N], what: str) -> dict[str, N]:
    """``name -> item`` for a catalog the command line names things from (scorers, rubrics),
    refusing two items with one name: a name means one thing everywhere, never a silent override."""
    out: dict[str, N] = {}
    for item in items:
        if item.name in out:
            raise UserError(f"two {what}s are named {item.name!r}")
        out[item.name] = item
    return out


def pick_named(known: Mapping[str, N], name: str, what: str, listed: Callable[[N], str] | None = None) -> N:
    """The item called ``name``, or one error listing every known one (``listed`` says how)."""
    try:
        return known[name]
    except KeyError:
        shown = "; ".join(map(listed, known.values())) if listed else ", ".join(known)
        raise UserError(f"unknown {what} {name!r}; known: {shown}") from None
