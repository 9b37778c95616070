"""MedAlign's XML EHR dialects: read both into a :class:`Timeline`, write the paper's one.

Two dialects are read, told apart by the root element:

* ``<record>`` -- the paper's dialect (and the public ``sample-ehr-clean.xml``): ``<visit type start>``
  then ``<day start>`` then a ``<person>`` block, coded elements named after the OMOP table
  (``<measurement start>`` holding ``<code>[VOCAB/CODE] name value unit</code>`` lines) and
  ``<note type start>free text</note>``.
* ``<eventstream>`` -- the released files' dialect (layout *inferred*, see the spec):
  ``<encounter start_timestamp end_timestamp>`` holding an optional ``<person>`` and
  ``<entry timestamp><event type name code note_id>text</event></entry>`` items, either directly
  or inside ``<events>``.

Only the paper dialect is written. Times are written as ``MM/DD/YYYY hh:mm AM/PM`` (the sample's
event lines; ``MM/DD/YYYY hh:mm:ss AM/PM`` when a time has seconds). Times are read in any of
``MM/DD/YYYY HH:MM`` (24-hour), ``MM/DD/YYYY h:mm AM/PM``, a date-less ``h:mm AM/PM`` (the
enclosing day's date), an optional ``:ss``, a bare date, or ISO ``YYYY-MM-DD[ HH:MM[:SS]]``.

Code lines: ``[VOCAB/CODE] rest`` with ``rest`` split as ``name value [unit]`` only for the
``measurement`` and ``observation`` domains (the OMOP tables that hold values), when ``rest``
ends in a number (``-3``, ``98.2``, ``<5``) optionally followed by one or two unit tokens that do
not start with a digit (``kg``, ``mm Hg``, ``sq meters``, ``%``). Otherwise the whole of ``rest``
is the name. The split keeps single spaces, so writing the event back yields the same line (apart
from the whitespace around it). A line without a ``[VOCAB/CODE]`` head is kept as a name with no
vocabulary and written back bare.

Events and notes whose visit is unknown are written into synthetic ``<visit type="No visit">``
blocks, one per calendar day (plus one for undated items), placed in time order among the real
visits; reading such a block gives visit-less items again.

Reader and writer stay one module on purpose: the writer is built to be a fixed point of the
reader (times, code-line splitting, note dedenting, ``No visit`` blocks are each defined once and
used both ways), so the two halves of that round trip change together. Bytes become elements in
:mod:`clinieval.ehr.xml_tree`.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from clinieval.ehr.timeline import EVENT_DOMAINS, Event, Note, Person, Timeline, Visit
from clinieval.ehr.xml_tree import XmlNode, parse_xml_tree
from clinieval.errors import UserError
from clinieval.fsutil import atomic_open

__all__ = [
    "NO_VISIT",
    "format_time",
    "iter_xml",
    "parse_code_line",
    "parse_time",
    "read_xml",
    "timeline_to_xml",
    "write_xml",
]

NO_VISIT = "No visit"
"""``type`` of the synthetic visit blocks that hold events and notes without a visit."""

VALUE_DOMAINS = frozenset({"measurement", "observation"})
_IND = "    "
_TIME_FORMATS = "MM/DD/YYYY HH:MM, MM/DD/YYYY hh:mm AM/PM or hh:mm AM/PM"

# ----------------------------------------------------------------------------------------- times

_TIME_RE = re.compile(
    r"""^\s*
    (?:(?P<mo>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4}))?
    (?:\s*(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?\s*(?P<ap>[AaPp]\.?[Mm]\.?)?)?
    \s*$""",
    re.VERBOSE,
)
_ISO_RE = re.compile(r"^\s*\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?\s*$")


def parse_time(text: str, day: date | None = None) -> datetime | None:
    """A MedAlign time string as a datetime; None if it is not one.

    ``day`` supplies the date of a date-less ``9:00 PM``; without it such a time is not read.
    """
    if _ISO_RE.match(text):
        try:
            return datetime.fromisoformat(text.strip())
        except ValueError:
            return None
    m = _TIME_RE.match(text)
    if m is None or (m["y"] is None and m["h"] is None):
        return None
    if m["y"] is not None:
        try:
            on = date(int(m["y"]), int(m["mo"]), int(m["d"]))
        except ValueError:
            return None
    elif day is not None:
        on = day
    else:
        return None
    hour = int(m["h"] or 0)
    minute = int(m["mi"] or 0)
    second = int(m["s"] or 0)
    if m["ap"]:
        pm = m["ap"][0] in "Pp"
        if hour == 0 or (hour > 12 and not pm):
            return None
        if hour <= 12:
            hour = hour % 12 + (12 if pm else 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    return datetime(on.year, on.month, on.day, hour, minute, second)


def format_time(t: datetime) -> str:
    """``MM/DD/YYYY hh:mm AM/PM`` (``hh:mm:ss`` when there are seconds); locale-independent."""
    h12 = t.hour % 12 or 12
    sec = f":{t.second:02d}" if t.second else ""
    ampm = "PM" if t.hour >= 12 else "AM"
    return f"{t.month:02d}/{t.day:02d}/{t.year:04d} {h12:02d}:{t.minute:02d}{sec} {ampm}"


def _format_birth(t: datetime) -> str:
    return f"{t.month}/{t.day}/{t.year}"


# ------------------------------------------------------------------------------------ code lines

_CODE_RE = re.compile(r"^\[(?P<vocab>[^/\]]*)/(?P<code>[^\]]*)\](?: (?P<rest>.*))?$", re.DOTALL)
_VALUE_RE = re.compile(
    r"^(?P<name>.*\S) (?P<value>[<>]?=?[-+]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?: (?P<unit>(?:[^\s\d]|\d+[*^])\S{0,15}(?: [^\s\d]\S{0,15})?))?$",
    re.DOTALL,
)


def parse_code_line(line: str, domain: str) -> Event:
    """One ``<code>`` line (whitespace around it ignored) as an undated Event of ``domain``."""
    text = line.strip()
    m = _CODE_RE.match(text)
    if m is None:
        return Event(domain=domain, time=None, name=text)
    rest = m["rest"] or ""
    value = unit = None
    if domain in VALUE_DOMAINS:
        v = _VALUE_RE.match(rest)
        if v is not None:
            rest, value, unit = v["name"], v["value"], v["unit"]
    return Event(domain, None, rest, m["vocab"], m["code"], value, unit)


def _code_line(e: Event) -> str:
    body = " ".join(x for x in (e.name, e.value, e.unit) if x)
    if e.vocabulary is None and e.code is None:
        return body.strip()
    vocab = "UNKNOWN" if e.vocabulary is None else e.vocabulary
    code = "0" if e.code is None else e.code
    return f"[{vocab}/{code}] {body}".rstrip()


# ---------------------------------------------------------------------------------------- writer

_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_DOMAIN_NAMES = "an event domain is an ASCII letter or '_', then letters, digits, '_', '.' or '-'"


def _esc(s: str) -> str:
    s = _ILLEGAL_XML.sub("\ufffd", s)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def _attr(s: str) -> str:
    return _esc(s).replace('"', "&quot;").replace("\n", "&#10;").replace("\t", "&#9;")


def _start(t: datetime | None) -> str:
    return "" if t is None else f' start="{format_time(t)}"'


def _blank(line: str) -> bool:
    return not line.strip(" \t")


def _dedent(text: str) -> str:
    """Remove the common leading spaces/tabs of the non-blank lines; blank lines become empty."""
    lines = text.split("\n")
    margins = [line[: len(line) - len(line.lstrip(" \t"))] for line in lines if not _blank(line)]
    margin = min(margins, default="")
    for m in margins:
        while not m.startswith(margin):
            margin = margin[:-1]
    return "\n".join("" if _blank(line) else line[len(margin) :] for line in lines)


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line if line else line for line in text.split("\n"))


Item = Event | Note
_Day = tuple[datetime | None, list[Item]]


@dataclass
class _Block:
    type: str
    start: datetime | None
    items: list[Item] = field(default_factory=list)


def _blocks(tl: Timeline) -> list[_Block]:
    known = {v.visit_id: i for i, v in enumerate(tl.visits)}
    real = [_Block(v.type, v.start) for v in tl.visits]
    orphans: dict[date | None, list[Item]] = {}
    for x in tl.items():  # time order, undated last, source order among equals
        i = known.get(x.visit_id) if x.visit_id is not None else None
        if i is not None:
            real[i].items.append(x)
        else:
            orphans.setdefault(None if x.time is None else x.time.date(), []).append(x)
    synthetic = [_Block(NO_VISIT, xs[0].time, xs) for xs in orphans.values()]
    keyed = [(b.start is None, b.start or datetime.min, 0, i, b) for i, b in enumerate(real)]
    keyed += [(b.start is None, b.start or datetime.min, 1, i, b) for i, b in enumerate(synthetic)]
    return [k[-1] for k in sorted(keyed, key=lambda k: k[:4])]


def _person_lines(p: Person, at: datetime | None) -> list[str]:
    lines = []
    if p.birth is not None:
        lines.append(f"Birth:{_format_birth(p.birth)}")
    for label, val in (("Race", p.race), ("Gender", p.sex), ("Ethnicity", p.ethnicity)):
        flat = " ".join((val or "").split())  # one line each, as the block is read line by line
        if flat:
            lines.append(f"{label}: {flat}")
    age = None if at is None else p.age_at(at)
    if age is not None:
        lines += [f"Age in Days: {age[0]}", f"Age in Years: {age[1]}"]
    return lines


def _day_items(items: list[Item], visit_start: datetime | None) -> Iterator[_Day]:
    days: dict[date | None, list[Item]] = {}
    for x in items:
        days.setdefault(None if x.time is None else x.time.date(), []).append(x)
    for d, xs in days.items():
        start = xs[0].time
        if d is not None and start is not None and visit_start is not None and visit_start.date() == d:
            start = min(start, visit_start)
        yield start, xs


def _element_lines(xs: list[Item], pad: str) -> Iterator[str]:
    i = 0
    while i < len(xs):
        x = xs[i]
        if isinstance(x, Note):
            yield f'{pad}<note type="{_attr(x.type)}"{_start(x.time)}>\n'
            body = _dedent(x.text)  # what the reader gives back, so writing is a fixed point
            if body:
                yield _esc(_indent(body, pad + _IND)) + "\n"
            yield f"{pad}</note>\n"
            i += 1
            continue
        if not _NAME_RE.match(x.domain):
            raise ValueError(f"event domain {x.domain!r} is not a valid XML element name")
        group = [x]
        while (
            i + len(group) < len(xs)
            and isinstance(nxt := xs[i + len(group)], Event)
            and nxt.domain == x.domain
            and nxt.time == x.time
        ):
            group.append(nxt)
        yield f"{pad}<{x.domain}{_start(x.time)}>\n"
        for e in group:
            yield f"{pad}{_IND}<code>{_esc(_code_line(e))}</code>\n"
        yield f"{pad}</{x.domain}>\n"
        i += len(group)


def iter_xml(tl: Timeline) -> Iterator[str]:
    """The paper-dialect document in chunks (one visit's day at a time); see :func:`timeline_to_xml`."""
    yield "<record>\n"
    for b in _blocks(tl):
        yield f'{_IND}<visit type="{_attr(b.type)}"{_start(b.start)}>\n'
        for day_start, xs in _day_items(b.items, b.start):
            pad = _IND * 3
            out = [f"{_IND * 2}<day{_start(day_start)}>\n", f"{pad}<person>\n"]
            out += [f"{pad}{_IND}{_esc(line)}\n" for line in _person_lines(tl.person, day_start)]
            out.append(f"{pad}</person>\n")
            out += _element_lines(xs, pad)
            out.append(f"{_IND * 2}</day>\n")
            yield "".join(out)
        yield f"{_IND}</visit>\n"
    yield "</record>\n"


def timeline_to_xml(tl: Timeline) -> str:
    """The timeline as one MedAlign paper-dialect ``<record>`` document.

    Visits in start order (undated last); in each, one ``<day>`` per calendar day with a
    ``<person>`` block (age computed on that day) and the events and notes in time order;
    consecutive same-domain events at the same time share one element. Deterministic.
    """
    return "".join(iter_xml(tl))


def write_xml(tl: Timeline, path: str | os.PathLike[str]) -> Path:
    """Write :func:`timeline_to_xml` to ``path`` (UTF-8) atomically: a temp file, then os.replace."""
    dest = Path(path)
    with atomic_open(dest) as f:
        for chunk in iter_xml(tl):
            f.write(chunk)
    return dest


# ---------------------------------------------------------------------------------------- readers


@dataclass
class _Ctx:
    where: str
    tl: Timeline
    person_seen: bool = False
    visit_n: int = 0

    def fail(self, node: XmlNode, what: str) -> UserError:
        return UserError(f"{self.where} line {node.line}: {what}")

    def time(self, node: XmlNode, attr: str, day: date | None, required: bool = False) -> datetime | None:
        raw = node.attrib.get(attr)
        if raw is None or (not raw.strip() and not required):
            if required:
                raise self.fail(node, f"<{node.tag}> has no {attr}= time")
            return None
        t = parse_time(raw, day)
        if t is None:
            raise self.fail(node, f"cannot read <{node.tag}> {attr} time {raw!r} (expected {_TIME_FORMATS})")
        return t

    def new_visit(self, vtype: str, start: datetime | None, end: datetime | None = None) -> str:
        self.visit_n += 1
        vid = f"v{self.visit_n}"
        self.tl.visits.append(Visit(vid, vtype, start, end))
        return vid

    def person(self, birth: datetime | None, race: str | None, sex: str | None, eth: str | None) -> None:
        p = self.tl.person
        if not self.person_seen:
            p.birth, p.race, p.sex, p.ethnicity = birth, race, sex, eth
            self.person_seen = True
        elif (p.birth, p.race, p.sex, p.ethnicity) != (birth, race, sex, eth):
            self.tl.issues["person_mismatch"] += 1

    def check_age(self, at: datetime | None, days: str | None, years: str | None) -> None:
        age = None if at is None else self.tl.person.age_at(at)
        if age is None:
            return
        for got, want in ((days, age[0]), (years, age[1])):
            if got is not None and got.strip() != str(want):
                self.tl.issues["age_mismatch"] += 1
                return


def _read_note_text(raw: str) -> str:
    """A note's text without the layout around it: the blank line after the opening tag, the
    blank line before the closing tag, and the indentation common to all its lines."""
    lines = raw.split("\n")
    if len(lines) > 1 and _blank(lines[0]):
        lines = lines[1:]
    if len(lines) > 1 and _blank(lines[-1]):
        lines = lines[:-1]
    elif len(lines) == 1 and _blank(lines[0]):
        lines = []
    return _dedent("\n".join(lines))


def _read_person_block(ctx: _Ctx, node: XmlNode, at: datetime | None) -> None:
    fields: dict[str, str] = {}
    for line in node.own_text().split("\n"):
        key, sep, val = line.partition(":")
        if sep:
            fields[key.strip().lower()] = val.strip()
    birth = None
    if fields.get("birth"):
        birth = parse_time(fields["birth"])
        if birth is None:
            ctx.tl.issues["bad_birth_date"] += 1
    race, sex, eth = (fields.get(k) or None for k in ("race", "gender", "ethnicity"))
    ctx.person(birth, race, sex, eth)
    ctx.check_age(at, fields.get("age in days"), fields.get("age in years"))


def _read_items(ctx: _Ctx, nodes: Iterable[XmlNode], day: date | None, visit_id: str | None) -> None:
    tl = ctx.tl
    for node in nodes:
        if node.tag == "person":
            _read_person_block(ctx, node, None if day is None else datetime(day.year, day.month, day.day))
        elif node.tag == "note":
            t = ctx.time(node, "start", day)
            tl.notes.append(Note(t, node.attrib.get("type", "NULL"), _read_note_text(node.text()), visit_id))
        elif node.tag in ("day", "visit"):
            raise ctx.fail(node, f"<{node.tag}> is nested where an event or note was expected")
        else:
            t = ctx.time(node, "start", day)
            codes = [c for c in node.children if c.tag == "code"]
            if node.tag not in EVENT_DOMAINS:
                tl.issues["unknown_domain"] += 1
            if not codes:
                tl.issues["element_without_code"] += 1
            elif not _NAME_RE.match(node.tag):  # the writer could not write these events back
                raise ctx.fail(node, f"<{node.tag}> cannot hold events: {_DOMAIN_NAMES}")
            for c in codes:
                e = parse_code_line(c.text(), node.tag)
                e.time, e.visit_id = t, visit_id
                tl.events.append(e)


def _read_record(ctx: _Ctx, root: XmlNode) -> None:
    for vnode in root.children:
        if vnode.tag != "visit":
            _read_items(ctx, [vnode], None, None)
            ctx.tl.issues["item_outside_visit"] += 1
            continue
        vstart = ctx.time(vnode, "start", None)
        vtype = vnode.attrib.get("type", "NULL")
        vid = None if vtype == NO_VISIT else ctx.new_visit(vtype, vstart)
        loose: list[XmlNode] = []
        for dnode in vnode.children:
            if dnode.tag != "day":
                loose.append(dnode)
                continue
            dstart = ctx.time(dnode, "start", None if vstart is None else vstart.date())
            day = dstart.date() if dstart else (vstart.date() if vstart else None)
            for child in dnode.children:
                if child.tag == "person":
                    _read_person_block(ctx, child, dstart)
                else:
                    _read_items(ctx, [child], day, vid)
        _read_items(ctx, loose, None if vstart is None else vstart.date(), vid)


_RELEASE_DOMAINS = {
    "condition": "condition_occurrence",
    "procedure": "procedure_occurrence",
    "drug": "drug_exposure",
    "device": "device_exposure",
    "lab": "measurement",
}


def _child_text(node: XmlNode | None, *path: str) -> str | None:
    for tag in path:
        if node is None:
            return None
        node = next((c for c in node.children if c.tag == tag), None)
    if node is None:
        return None
    return node.text().strip() or None


def _read_release_person(ctx: _Ctx, node: XmlNode, at: datetime | None) -> None:
    raw_birth = _child_text(node, "birthdate")
    birth = None if raw_birth is None else parse_time(raw_birth)
    if raw_birth is not None and birth is None:
        ctx.tl.issues["bad_birth_date"] += 1
    ctx.person(
        birth,
        _child_text(node, "demographics", "race"),
        _child_text(node, "demographics", "gender"),
        _child_text(node, "demographics", "ethnicity"),
    )
    ctx.check_age(at, _child_text(node, "age", "days"), _child_text(node, "age", "years"))


def _read_eventstream(ctx: _Ctx, root: XmlNode) -> None:
    tl = ctx.tl
    if root.attrib.get("person_id"):
        tl.person.person_id = root.attrib["person_id"]
    for enc in root.children:
        if enc.tag != "encounter":
            tl.issues["unknown_element"] += 1
            continue
        start = ctx.time(enc, "start_timestamp", None)
        end = ctx.time(enc, "end_timestamp", None)
        entries = [c for c in enc.children if c.tag == "entry"]
        for ev in (c for c in enc.children if c.tag == "events"):
            entries += [c for c in ev.children if c.tag == "entry"]
        visit_events = [
            (e, ev)
            for e in entries
            for ev in e.children
            if ev.tag == "event" and ev.attrib.get("type") == "visit"
        ]
        vtype = enc.attrib.get("type") or (visit_events[0][1].attrib.get("name") if visit_events else None)
        if start is None and visit_events:
            start = ctx.time(visit_events[0][0], "timestamp", None)
        vid = ctx.new_visit(vtype or "Encounter", start, end)
        for pnode in (c for c in enc.children if c.tag == "person"):
            _read_release_person(ctx, pnode, start)
        for entry in entries:
            t = ctx.time(entry, "timestamp", None if start is None else start.date())
            for ev in entry.children:
                if ev.tag != "event":
                    tl.issues["unknown_element"] += 1
                    continue
                etype = ev.attrib.get("type", "").strip()
                name = ev.attrib.get("name", "")
                text = ev.text()
                if etype == "visit":
                    continue  # the encounter's own visit event: it is the Visit above
                if etype == "note" or (ev.attrib.get("note_id") or "").strip():
                    note_id = (ev.attrib.get("note_id") or "").strip() or None
                    tl.notes.append(Note(t, name.strip() or "NULL", _read_note_text(text), vid, note_id))
                    continue
                domain = _RELEASE_DOMAINS.get(etype, etype)
                if not _NAME_RE.match(domain):  # the writer could not write this event back
                    raise ctx.fail(ev, f"<event> type {etype!r} is not a domain name: {_DOMAIN_NAMES}")
                if domain not in EVENT_DOMAINS:
                    tl.issues["unknown_event_type"] += 1
                code_attr = (ev.attrib.get("code") or "").strip()
                e = parse_code_line(name, domain)
                if code_attr and e.vocabulary is None and e.code is None:
                    vocab, sep, code = code_attr.partition("/")
                    e.vocabulary, e.code = (vocab, code) if sep else (None, code_attr)
                value = text.strip()
                if value and e.value is None:
                    e.value = value
                if ev.attrib.get("unit") and e.unit is None:
                    e.unit = ev.attrib["unit"].strip() or None
                e.time, e.visit_id = t, vid
                tl.events.append(e)


def read_xml(path_or_text: str | os.PathLike[str], person_id: str | None = None) -> Timeline:
    """A MedAlign XML EHR (either dialect) as a Timeline.

    ``path_or_text`` is a file path, or the document itself when it is a str starting with ``<``.
    The person id is ``person_id``, else the eventstream's ``person_id=``, else the file's stem,
    else ``"unknown"``. Raises UserError for a missing file, malformed XML (with line and column),
    an unknown root element, or an unreadable time (with the line and the value).
    """
    text_in = isinstance(path_or_text, str) and path_or_text.lstrip("\ufeff \t\r\n").startswith("<")
    data: bytes | str
    if text_in:
        where = "<xml text>"
        data = str(path_or_text).lstrip("\ufeff")
        stem = None
    else:
        p = Path(path_or_text)
        where, stem = str(p), p.stem
        try:
            data = p.read_bytes()
        except OSError as e:
            raise UserError(f"cannot read MedAlign EHR {p}: {e.strerror or e}") from None
    root = parse_xml_tree(data, where)
    tl = Timeline(person=Person(person_id or stem or "unknown"), issues=Counter())
    ctx = _Ctx(where, tl)
    if root.tag == "record":
        _read_record(ctx, root)
    elif root.tag == "eventstream":
        _read_eventstream(ctx, root)
        if person_id:
            tl.person.person_id = person_id
    else:
        raise UserError(
            f"{where}: root element <{root.tag}> is not a MedAlign EHR; expected <record> (paper dialect) "
            "or <eventstream> (release dialect)"
        )
    return tl
