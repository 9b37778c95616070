"""Numbered scores: AutoMedEval's ``Score: Doctor 1: X points. Doctor 2: Y points. ...``.

One of the readers under :mod:`clinieval.judge.verdict`'s principle: the verdict is what follows
the reply's last ``Score:``, one whole number per numbered item on the scale, each item once. A
rationale or a quoted answer that says "Doctor 1: 3 key facts" comes before that block, so it is
never read; the benchmark passes in its worked example, so that a reply copying the example's
analysis and scores is ``echo`` rather than a verdict (:data:`ECHO_RUN`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from clinieval.judge.verdict import (
    COLON,
    MARK,
    OWN_LABEL,
    UNIT,
    VALUE,
    Number,
    VerdictParseError,
    check_not_revised_later,
    check_revision_stated,
    read_committed,
    refusal_or,
)

_RATIONALE_HEADER = re.compile(
    rf"(?im)^[^\w\n]*(?:analy[sz]e|analysis|step[ \t]*\d+|reason(?:ing)?|rationale|explanation|justification)"
    rf"{MARK}[ \t]*{COLON}"
)
_PARAGRAPH = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True, slots=True)
class NumberedFormat:
    """A verdict of k numbered items: ``{marker}: {item} 1: X points. {item} 2: Y points. ...``.

    ``echoes`` are texts the prompt shows (a worked example's reply) whose copy is never this
    item's verdict; ``next_item`` is a header that, after a verdict, starts an item the judge
    invented (the reply ends there).
    """

    item: str = "Doctor"
    marker: str = "Score"
    low: int = 1
    high: int = 5
    echoes: tuple[str, ...] = ()
    next_item: str | None = None

    def entry(self) -> re.Pattern[str]:
        return re.compile(
            rf"(?i)(?<!\w){MARK}{re.escape(self.item)}{MARK}[ \t]*{MARK}(?P<n>\d{{1,4}})(?!\d)"
            rf"{MARK}[ \t]*{COLON}{MARK}"
        )

    def marker_pattern(self) -> re.Pattern[str]:
        # "Score:", "**Score:**", a full-width colon, "Scores:", "### Score" on its own line, then item 1
        return re.compile(
            rf"(?i)(?<![\w#*_`])(?:#+[ \t]*+)?{MARK}{re.escape(self.marker)}s?{MARK}[ \t]*+{COLON}?{MARK}"
            rf"\s*+(?:[-+*][ \t]++)?(?={MARK}{re.escape(self.item)}\b)"
        )


@dataclass(frozen=True, slots=True)
class NumberedReading:
    """Where the verdict block of a reply lies, in ``text`` (the reply without echoes)."""

    text: str
    start: int
    end: int
    echoed: bool

    @property
    def rationale(self) -> str:
        """What precedes the block; for a verdict written first, what follows it."""
        before = self.text[: self.start].strip()
        return before or self.text[self.end :].strip()


@dataclass(frozen=True, slots=True)
class _Entry:
    """One ``Doctor N: value`` in a block: its number, where it stands, and its value, or why the
    value is not one (a decimal, a range, ...), or neither when no number follows."""

    n: int
    start: int
    value: Number | None
    error: VerdictParseError | None
    raw: str

    @property
    def valued(self) -> bool:
        return self.value is not None or self.error is not None


def _words(text: str) -> re.Pattern[str]:
    """``text`` matched whatever the whitespace between its words."""
    return re.compile(r"\s+".join(re.escape(w) for w in text.split()))


def _strip_echoes(text: str, echoes: Sequence[str]) -> tuple[str, bool]:
    echoed = False
    for echo in echoes:
        if echo.strip():
            text, n = _words(echo).subn("", text)
            echoed = echoed or n > 0
    return text, echoed


def _entries(fmt: NumberedFormat, text: str, start: int, end: int) -> Iterator[_Entry]:
    """Each ``Doctor N:`` of the block, its value read up to the next item or the line's end (a
    revision or a hedge inside that slot counts: :func:`read_committed`)."""
    found = list(fmt.entry().finditer(text, start, end))
    for i, m in enumerate(found):
        n = int(m.group("n"))
        raw = re.split(r"[.;,\n]", text[m.end() : m.end() + 40], maxsplit=1)[0].strip()
        line_end = text.find("\n", m.end(), end)
        slot_end = min(
            found[i + 1].start() if i + 1 < len(found) else end, line_end if line_end >= 0 else end
        )
        try:
            value = read_committed(text, m.end(), slot_end, fmt.low, fmt.high, f"{fmt.item} {n}:")
            error = None
        except VerdictParseError as e:
            value, error = None, e
        yield _Entry(n, m.start(), value, error, raw)


def _bare_tail(fmt: NumberedFormat, text: str) -> int | None:
    """Where the reply's trailing lines that hold nothing but numbered scores begin (a reply
    that is only the verdict, without its ``Score:``); None when its last line is anything else."""
    entry = fmt.entry()
    start = None
    offset = len(text.rstrip())
    for line in reversed(text[:offset].splitlines(keepends=True)):
        offset -= len(line)
        if not line.strip():
            if start is None:
                continue
            break
        rest, pos, bare = [], 0, False
        for m in entry.finditer(line):
            value = VALUE.match(line, m.end())
            if value is None:
                return start
            rest.append(line[pos : m.start()])
            unit = UNIT.match(line, value.end())
            pos = unit.end() if unit else value.end()
            bare = True
        rest.append(line[pos:])
        if not bare or re.search(r"\w", "".join(rest)):
            break
        start = offset
    return start


_SCORE_WORDS = re.compile(r"(?i)\b(?:scores?|scoring|rat(?:ing|ings|ed)|points?|grades?|verdicts?|marks?)\b")


def _counts_header(text: str, tail: int) -> bool:
    """Whether the bare lines at ``tail`` sit under a heading that names something other than a
    score ("Number of key facts each answer covers:"): counts, not a verdict."""
    before = text[:tail].rstrip().rsplit("\n", 1)[-1]
    heading = before.strip().strip("*_`# ")
    return heading.endswith((":", "\uff1a")) and _SCORE_WORDS.search(heading) is None


def _locate(fmt: NumberedFormat, text: str, echoed: bool) -> NumberedReading | None:
    """The final verdict block of ``text``: after its last marker, up to a rationale header, or
    a paragraph break once every item has a value."""
    markers = list(fmt.marker_pattern().finditer(text))
    if markers:
        start, body = markers[-1].start(), markers[-1].end()
    else:
        tail = _bare_tail(fmt, text)
        if tail is None or _counts_header(text, tail):
            return None
        start = body = tail
    header = _RATIONALE_HEADER.search(text, body)
    end = header.start() if header else len(text)
    return NumberedReading(text, start, end, echoed)


def _end_at_paragraph(fmt: NumberedFormat, reading: NumberedReading, k: int) -> NumberedReading:
    """A verdict block ends at the paragraph break after its last item (k items with values)."""
    seen: set[int] = set()
    previous = reading.start
    for entry in _entries(fmt, reading.text, reading.start, reading.end):
        gap = _PARAGRAPH.search(reading.text, previous, entry.start)
        if gap is not None and seen >= set(range(1, k + 1)):
            return NumberedReading(reading.text, reading.start, gap.start(), reading.echoed)
        if entry.valued:
            seen.add(entry.n)
        previous = entry.start + 1
    return reading


def _untable(fmt: NumberedFormat, text: str) -> str:
    """A markdown table of scores ("| Doctor 1 | 3 |") as the format's own lines ("Doctor 1: 3"),
    its header and rule rows dropped: the same verdict, laid out as a table."""
    item = re.escape(fmt.item)
    if not re.search(rf"(?im)^[ \t]*\|[ \t]*{MARK}{item}", text):
        return text
    text = re.sub(
        rf"(?im)^[ \t]*\|[ \t]*{MARK}({item}[ \t]*\d+){MARK}[ \t]*\|[ \t]*([^|\n]*?)[ \t]*\|.*$",
        r"\1: \2",
        text,
    )
    text = re.sub(r"(?m)^[ \t]*\|[ \t:|-]*\|[ \t]*$\n?", "", text)
    return re.sub(rf"(?im)^[ \t]*\|[ \t]*{item}[ \t]*\|[^\n]*$\n?", "", text)


def locate_numbered(reply: str, k: int, fmt: NumberedFormat) -> NumberedReading | None:
    """The final verdict block of ``reply``, without raising; None when it has none."""
    text, echoed = _strip_echoes(_untable(fmt, reply), fmt.echoes)
    if fmt.next_item is not None:
        markers = [m.span() for m in fmt.marker_pattern().finditer(text)]
        for header in re.finditer(fmt.next_item, text):
            before = [span for span in markers if span[1] <= header.start()]
            if not before:
                continue
            start, body = before[-1]
            rationale = _RATIONALE_HEADER.search(text, body, header.start())
            head = NumberedReading(text, start, rationale.start() if rationale else header.start(), echoed)
            try:
                _scores(fmt, _end_at_paragraph(fmt, head, k), k)
            except VerdictParseError:
                continue
            text = text[: header.start()]  # a verdict, then an item of the judge's own: cut there
            break
    reading = _locate(fmt, text, echoed)
    return None if reading is None else _end_at_paragraph(fmt, reading, k)


def _scores(fmt: NumberedFormat, reading: NumberedReading, k: int) -> list[int]:
    entries = list(_entries(fmt, reading.text, reading.start, reading.end))
    valued = [e for e in entries if e.valued]
    if not valued:
        if entries:
            e = entries[0]
            raise VerdictParseError(f"{fmt.item} {e.n}: {e.raw!r} is not a score", "not_a_verdict")
        raise VerdictParseError(f"0 '{fmt.item} N: S' scores found; {k} expected", "missing")
    for e in valued:
        if e.error is not None:
            raise e.error
    for e in valued:
        if not 1 <= e.n <= k:
            raise VerdictParseError(f"{fmt.item} {e.n} is scored, but there are {k} answers", "extra")
    given: dict[int, int] = {}
    for e in valued:
        assert e.value is not None
        score = int(e.value.value)
        if given.setdefault(e.n, score) != score:
            raise VerdictParseError(
                f"{fmt.item} {e.n} is given {given[e.n]} and {score} in the final verdict", "conflict"
            )
    missing = [n for n in range(1, k + 1) if n not in given]
    if missing:
        raise VerdictParseError(
            f"{len(given)} '{fmt.item} N: S' scores found; {k} expected (none for {fmt.item} {missing[0]})",
            "missing",
        )
    for position, e in enumerate(valued[:k], 1):
        if e.n != position:
            raise VerdictParseError(
                f"score {position} is for {fmt.item} {e.n}, not {fmt.item} {position}", "order"
            )
    return [given[n] for n in range(1, k + 1)]


def numbered_scores(reply: str, k: int, fmt: NumberedFormat) -> list[int]:
    """The k scores of the reply's final verdict block, item 1..k; else VerdictParseError.

    Within the block the paper-style rule holds: the first k valued items must be 1..k in that
    order. An item named twice with different values, a missing or an extra item, a decimal, a
    range or a value outside [low, high] is unparsed with its reason.
    """
    if not reply.strip():
        raise VerdictParseError("empty judge output", "empty")
    reading = locate_numbered(reply, k, fmt)
    if reading is None:
        if _strip_echoes(reply, fmt.echoes)[1]:
            raise VerdictParseError("the only verdict is a copy of the prompt's worked example", "echo")
        missing = f"no '{fmt.marker}: {fmt.item} 1: S ...' verdict in the output"
        raise refusal_or(reply, VerdictParseError(missing, "no_verdict"))
    scores = _scores(fmt, reading, k)
    _unexplained_block_change(fmt, reading, k, scores)
    check_not_revised_later(reading.text[reading.end :], r"\d")
    for echo in fmt.echoes:
        if _copies(fmt, reading, scores, echo, k):
            raise VerdictParseError(
                "the verdict is the prompt's worked example, copied with its analysis", "echo"
            )
    return scores


def _unexplained_block_change(
    fmt: NumberedFormat, reading: NumberedReading, k: int, scores: list[int]
) -> None:
    """An earlier complete verdict block with other scores must be revised in words ("Wait, ...",
    "On reflection ...", "Corrected score:") before the final one; else ``conflict``."""
    text = reading.text
    if re.search(rf"(?i)\b{OWN_LABEL}\W*$", text[max(0, reading.start - 30) : reading.start]):
        return  # "Corrected score:" states the revision in its label
    markers = [m for m in fmt.marker_pattern().finditer(text) if m.start() < reading.start]

    def earlier() -> Iterator[tuple[object, int]]:
        for i in range(len(markers) - 1, -1, -1):
            stop = markers[i + 1].start() if i + 1 < len(markers) else reading.start
            block = _end_at_paragraph(fmt, NumberedReading(text, markers[i].start(), stop, reading.echoed), k)
            try:
                yield _scores(fmt, block, k), markers[i].end()
            except VerdictParseError:
                continue

    check_revision_stated(text, earlier(), scores, reading.start)


ECHO_RUN = 80
"""Characters of a worked example's analysis (whitespace aside) that a reply must copy verbatim,
with the example's scores, for its verdict to count as the example echoed rather than a verdict."""


def _flat(text: str) -> str:
    return " ".join(text.split())


def _copies(fmt: NumberedFormat, reading: NumberedReading, scores: list[int], echo: str, k: int) -> bool:
    """Whether the reply's verdict is ``echo`` copied in part: the example's own scores after a
    verbatim stretch of the example's analysis (a small model rewriting the worked example)."""
    example = locate_numbered(echo, k, NumberedFormat(fmt.item, fmt.marker, fmt.low, fmt.high))
    if example is None:
        return False
    try:
        if _scores(fmt, example, k) != scores:
            return False
    except VerdictParseError:
        return False
    ours, theirs = _flat(reading.rationale), _flat(example.rationale)
    if len(ours) < ECHO_RUN or len(theirs) < ECHO_RUN:
        return False
    match = SequenceMatcher(None, ours, theirs, autojunk=False).find_longest_match(
        0, len(ours), 0, len(theirs)
    )
    return match.size >= ECHO_RUN


__all__ = ["ECHO_RUN", "NumberedFormat", "NumberedReading", "locate_numbered", "numbered_scores"]
