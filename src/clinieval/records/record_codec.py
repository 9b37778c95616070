"""How a record's long texts are stored once per run instead of in every line.

A record used to hold its sample's context twice (in ``sample`` and inside the prompt built from
it) and again for every repeat: a PubMedQA run wrote 8.7 MB of results for 4.1 MB of input, and
a MedAlign record with a long EHR far more. Here every text of at least :data:`MIN_SHARED`
characters in a sample's ``input`` or ``context`` or a message's content goes into the run's
``texts.jsonl`` once (keyed by a hash of the text), and the record line refers to it:

- ``{"$text": ID}`` stands for a whole text;
- a message whose content contains the sample's input or context is kept as
  ``{"$join": [before, {"$text": ID}, after]}``, so the prompt around the record costs only the
  template's own words.

Lines written before this existed hold plain strings and read back unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from clinieval.types import JSON

MIN_SHARED = 512
"""Texts shorter than this stay inline: a reference would save less than it costs to read."""


def text_id(text: str) -> str:
    """A 96-bit content hash: collisions are out of reach for any run's handful of texts."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


class MissingText(KeyError):
    """A record refers to a text the run's ``texts.jsonl`` does not hold."""


class TextTable:
    """The long texts of one run, each stored once; encodes record dicts for writing and decodes
    them for reading."""

    def __init__(self, known: Mapping[str, str] | None = None) -> None:
        self.texts: dict[str, str] = dict(known or {})

    def _ref(self, text: str, new: list[tuple[str, str]]) -> dict[str, str]:
        tid = text_id(text)
        if tid not in self.texts:
            self.texts[tid] = text
            new.append((tid, text))
        return {"$text": tid}

    def encode(self, record: JSON) -> tuple[JSON, list[tuple[str, str]]]:
        """``record`` (a ``SampleRecord.to_dict()``, changed in place) with its long texts
        replaced by references, and the (id, text) pairs this table had not seen yet, which must
        be written before the record."""
        new: list[tuple[str, str]] = []
        sample = record["sample"]
        shared: list[tuple[str, dict[str, str]]] = []
        for field in ("context", "input"):  # the longer one first: it is the one worth finding
            text = sample.get(field)
            if isinstance(text, str) and len(text) >= MIN_SHARED:
                ref = self._ref(text, new)
                sample[field] = ref
                shared.append((text, ref))
        for message in record["messages"]:
            content = message["content"]
            if isinstance(content, str) and len(content) >= MIN_SHARED:
                message["content"] = self._message(content, shared, new)
        return record, new

    def _message(
        self, content: str, shared: list[tuple[str, dict[str, str]]], new: list[tuple[str, str]]
    ) -> Any:
        for text, ref in shared:
            at = content.find(text)
            if at >= 0:
                return {"$join": [content[:at], ref, content[at + len(text) :]]}
        return self._ref(content, new)

    def decode(self, record: JSON) -> JSON:
        """``record`` (changed in place) with every reference replaced by its text."""
        sample = record["sample"]
        for field in ("context", "input"):
            sample[field] = self._text(sample.get(field))
        for message in record["messages"]:
            message["content"] = self._text(message["content"])
        return record

    def _text(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        if "$text" in value:
            tid = value["$text"]
            try:
                return self.texts[tid]
            except KeyError:
                raise MissingText(tid) from None
        if "$join" in value:
            return "".join(part if isinstance(part, str) else self._text(part) for part in value["$join"])
        return value

    @classmethod
    def from_lines(cls, lines: Iterable[Mapping[str, str]]) -> TextTable:
        return cls({line["id"]: line["text"] for line in lines})
