"""User-facing errors.

A :class:`UserError` is a mistake the user can fix (bad spec, missing file, unreachable server).
The CLI prints its message on one line and exits non-zero, never a traceback; anything else
escaping is a bug in clinieval and keeps its traceback.
"""


class UserError(Exception):
    """A problem with the user's input or environment, explained in one actionable line."""
