"""Model names out of the text people see: the one masking function of the review app.

Why one: the import masks answer text before a reviewer's page can show it, and the admin pages
mask whatever they show (measure labels, reasons, answer previews); two functions would drift, and
a name one of them misses is a broken blind. :func:`masker` builds the function from the study's
model names and any ``--mask`` patterns.

Which names: every model behind the study's answers, as given (``openai:http://h:8000/v1@llama-3``,
``meta-llama/Llama-3-70B-Instruct``), and the variants a model tends to use for itself: the part
after the last ``@`` (a served name), ``/`` (a repository's model) and ``:`` (a spec's target),
each also without a trailing ``.gguf``, ``-instruct``, ``-chat``, ``-it`` or ``-hf``. A variant
matches without regard to case, only as a whole word (``gpt`` is not masked inside ``gptq``), and
with its ``-``, ``_``, ``.`` or space separators written any of those ways or left out
(``Llama 3 70B``, ``llama3-70b``). Variants shorter than three letters or digits, or only digits,
are left out: masking every "7" would wreck the text and hide nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from clinieval.errors import UserError

HIDDEN: Final = "[model hidden]"
SUFFIXES: Final = (".gguf", "-instruct", "-chat", "-it", "-hf")
_SEPARATORS: Final = re.compile(r"[-_. ]+")
_MIN_CHARS: Final = 3


def name_variants(source: str) -> set[str]:
    """``source`` and the shorter names a model may go by (see the module's docstring)."""
    found: set[str] = set()
    for cut in ("", "@", "/", ":"):
        base = source.rsplit(cut, 1)[-1] if cut else source
        base = base.strip()
        found.add(base)
        for suffix in SUFFIXES:
            if base.lower().endswith(suffix):
                found.add(base[: -len(suffix)])
    return {v for v in found if _worth_masking(v)}


def _worth_masking(variant: str) -> bool:
    letters = re.sub(r"[\W_]", "", variant)
    return len(letters) >= _MIN_CHARS and not letters.isdigit()


def _name_pattern(variant: str) -> str:
    tokens = [re.escape(t) for t in _SEPARATORS.split(variant) if t]
    return r"(?<![A-Za-z0-9])" + r"[-_. ]?".join(tokens) + r"(?![A-Za-z0-9])"


@dataclass(frozen=True, slots=True)
class Masker:
    """Replaces model names (and extra patterns) with :data:`HIDDEN`; call it for the text,
    :meth:`count` for the text and how many mentions it replaced."""

    pattern: re.Pattern[str] | None

    def count(self, text: str) -> tuple[str, int]:
        if self.pattern is None or not text:
            return text, 0
        return self.pattern.subn(HIDDEN, text)

    def __call__(self, text: str) -> str:
        return self.count(text)[0]


def masker(sources: Iterable[str], extra: Iterable[str] = ()) -> Masker:
    """The masking function for a study whose answers come from ``sources``; ``extra`` are
    regular expressions (``review import --mask``), matched without regard to case. Longer names
    are tried first, so a name that holds another is hidden whole."""
    names = sorted({v for s in sources if s for v in name_variants(s)}, key=lambda v: (-len(v), v))
    parts = [_name_pattern(v) for v in names]
    for raw in extra:
        try:
            re.compile(raw)
        except re.error as e:
            raise UserError(f"--mask {raw!r} is not a regular expression: {e}") from None
        if re.fullmatch(raw, ""):
            raise UserError(f"--mask {raw!r} matches the empty text; give a pattern that names something")
        parts.append(f"(?:{raw})")
    if not parts:
        return Masker(None)
    return Masker(re.compile("|".join(parts), re.IGNORECASE))
