"""Releasing llama.cpp handles before the interpreter tears its modules down.

A ``Llama`` still referenced at shutdown is freed by its ``__del__`` after llama-cpp-python's and
contextlib's module globals are already ``None``, which prints "Exception ignored in
Llama.__del__" tracebacks (harmless, but they read like a crash). Closing it is not enough: the
``__del__`` of a closed ``Llama`` still runs its empty exit stack then. So owners are remembered
weakly and, at exit, each drops its references while the library is whole, which frees the handle
there and then."""

from __future__ import annotations

import atexit
import weakref
from typing import Protocol


class Releasable(Protocol):
    def release(self) -> None:
        """Drop every reference to the native handle and close it."""


_OWNERS: weakref.WeakSet[Releasable] = weakref.WeakSet()


def release_at_exit(owner: Releasable) -> None:
    """Have ``owner.release()`` called at interpreter exit if ``owner`` is still alive then."""
    _OWNERS.add(owner)


@atexit.register
def _release_all() -> None:
    for owner in list(_OWNERS):
        owner.release()
