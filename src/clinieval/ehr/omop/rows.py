"""Rows of the staged OMOP tables as a :class:`~clinieval.ehr.timeline.Timeline`: the person, their
visits, events and notes, with every fallback counted.

The rows come from the SELECTs of :mod:`.sql` (``pid, pkey`` then the outer columns, unpacked
here in the same order); this module is plain Python, no DuckDB, so the decoding rules can be read
(and tested) on their own.

What the reader had to work around is counted, never patched silently, in each timeline's
``issues`` and in :attr:`~clinieval.ehr.omop.source.OmopSource.issues` (totals over the
timelines yielded so far):

``concept_0``
    the standard concept id is 0 or NULL; the source concept (``*_source_concept_id``) is used when
    the concept table knows it, else the ``*_source_value`` (vocabulary None).
``unknown_concept``
    a concept id (event, visit, value, unit, sex/race/ethnicity) absent from the concept table;
    the event is named ``Unknown concept <id>``.
``missing_datetime``
    no ``*_datetime``: the time is the date at midnight.
``missing_time``
    neither datetime nor date: the event is kept with time None.
``bad_datetime``
    a date or datetime that is not a date (kept as missing, and counted above too).
``no_visit``
    an event or note whose ``visit_occurrence_id`` is NULL or not one of the person's visits: kept,
    with visit_id None.

Rows whose person is not in the person table (or NULL) are skipped and counted per table in
:attr:`~clinieval.ehr.omop.source.OmopSource.orphans`.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, Literal

from clinieval.ehr.omop.tables import DOMAIN_ORDER, EVENT_TABLES, EventTable
from clinieval.ehr.timeline import Event, Note, Person, Timeline, Visit

# Standard OMOP names of the demographic concepts, for the many extracts whose concept table
# leaves them out (Synthea's does): "MALE" reads better than the source value "M".
_DEMOGRAPHIC_NAMES: dict[int, str] = {
    8507: "MALE",
    8532: "FEMALE",
    8527: "White",
    8516: "Black or African American",
    8515: "Asian",
    8657: "American Indian or Alaska Native",
    8557: "Native Hawaiian or Other Pacific Islander",
    38003563: "Hispanic or Latino",
    38003564: "Not Hispanic or Latino",
}

UnitStyle = Literal["source", "name"]


def _text(v: Any) -> str | None:
    if v is None:
        return None
    s = str(v).strip()
    return s or None


def format_number(v: Any) -> str | None:
    """A numeric value as the source wrote it: ``48.1`` stays ``48.1``, ``100.0`` becomes ``100``."""
    if v is None:
        return None
    if isinstance(v, Decimal):
        v = float(v)
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v.is_integer() and abs(v) < 1e16:
            return str(int(v))
        return repr(v)  # the shortest text that reads back as the same float
    return _text(v)


def _when(ts: Any, d: Any, bad: Any, issues: Counter[str]) -> datetime | None:
    if bad:
        issues["bad_datetime"] += 1
    if isinstance(ts, datetime):
        return ts
    issues["missing_datetime" if isinstance(d, date) else "missing_time"] += 1
    return datetime.combine(d, time()) if isinstance(d, date) else None


def timeline(
    row: tuple[Any, ...], rows: dict[str, list[tuple[Any, ...]]], style: UnitStyle, counts: Counter[str]
) -> Timeline:
    """One person's timeline from their person row and, per table, their rows (as :mod:`.sql` selects
    them); ``style`` is how units read (see :meth:`~clinieval.ehr.omop.source.OmopSource.open`) and
    ``counts`` gets the rows read per table."""
    issues: Counter[str] = Counter()
    pid = str(row[0])
    person = Person(person_id=pid, birth=_birth(row, issues))
    person.sex, person.race, person.ethnicity = (
        _demographic(row[i], row[i + 1], row[i + 2], row[i + 3], issues) for i in (7, 11, 15)
    )
    tl = Timeline(person=person, issues=issues)

    vrows = rows["visit_occurrence"]
    counts["visit_occurrence"] += len(vrows)
    for vid, ts, d, bad, ets, ed, cid, cname, known, src in (r[2:] for r in vrows):
        start = _when(ts, d, bad, issues)
        end = ets if isinstance(ets, datetime) else datetime.combine(ed, time()) if ed else None
        _, _, name = _coded(
            cid, known, None, None, cname, src, False, None, None, None, issues, zero_name="Visit"
        )
        tl.visits.append(Visit(visit_id=str(vid), type=name, start=start, end=end))
    visit_ids = {v.visit_id for v in tl.visits}

    for spec in EVENT_TABLES:
        erows = rows.get(spec.table, [])
        counts[spec.table] += len(erows)
        for r in erows:
            ev = _event(spec, r, visit_ids, issues, style)
            tl.events.append(ev)
            if spec.table == "death" and ev.time is not None:
                person.death = ev.time if person.death is None else min(person.death, ev.time)
    tl.events.sort(key=lambda e: (e.time is None, e.time or datetime.min, DOMAIN_ORDER[e.domain]))

    if "note" in rows:
        nrows = rows["note"]
        counts["note"] += len(nrows)
        for nid, ts, d, bad, title, tname, cname, body, vid in (r[2:] for r in nrows):
            if vid is None or vid not in visit_ids:
                issues["no_visit"] += 1
                vid = None
            tl.notes.append(
                Note(
                    time=_when(ts, d, bad, issues),
                    type=_text(title) or _text(tname) or _text(cname) or "note",
                    text="" if body is None else str(body),
                    visit_id=vid,
                    note_id=nid,
                )
            )
    return tl


def _birth(row: tuple[Any, ...], issues: Counter[str]) -> datetime | None:
    bts, bad, y, m, d = row[2:7]
    if bad:
        issues["bad_datetime"] += 1
    if isinstance(bts, datetime):
        return bts
    if y is None:
        return None
    try:
        return datetime(int(y), int(m or 1), int(d or 1))
    except ValueError:
        issues["bad_datetime"] += 1
        return None


def _demographic(cid: Any, name: Any, known: Any, src: Any, issues: Counter[str]) -> str | None:
    if cid is not None and cid != 0:
        if known and _text(name):
            return _text(name)
        if cid in _DEMOGRAPHIC_NAMES:
            return _DEMOGRAPHIC_NAMES[cid]
        issues["unknown_concept"] += 1
    return _text(src)


def _coded(
    cid: Any,
    known: Any,
    vocab: Any,
    code: Any,
    name: Any,
    src: Any,
    s_known: Any,
    s_vocab: Any,
    s_code: Any,
    s_name: Any,
    issues: Counter[str],
    zero_name: str = "No matching concept",
) -> tuple[str | None, str | None, str]:
    """(vocabulary, code, name) of a row's standard concept, with the fallbacks counted."""
    if cid is None or cid == 0:
        issues["concept_0"] += 1
        if s_known:
            return _text(s_vocab), _text(s_code), _text(s_name) or zero_name
        sv = _text(src)
        return None, sv, sv or zero_name
    if not known:
        issues["unknown_concept"] += 1
        return None, _text(src) or str(cid), f"Unknown concept {cid}"
    return _text(vocab), _text(code), _text(name) or f"Unknown concept {cid}"


def _event(
    spec: EventTable, r: tuple[Any, ...], visit_ids: set[str], issues: Counter[str], style: UnitStyle
) -> Event:
    (
        ts,
        d,
        bad,
        cid,
        vocab,
        code,
        name,
        known,
        src,
        s_vocab,
        s_code,
        s_name,
        s_known,
        vid,
        vnum,
        vstr,
        vcid,
        vc_name,
        vc_known,
        vsrc,
        ucid,
        u_code,
        u_name,
        u_known,
        usrc,
        csid,
        cs_name,
    ) = r[2:]
    t = spec.table
    when = _when(ts, d, bad, issues)
    if t == "visit_detail" and _text(cs_name):
        coded: tuple[str | None, str | None, str] = ("CARE_SITE", csid, str(cs_name).strip())
    elif t == "death" and (cid is None or cid == 0) and not s_known and not _text(src):
        coded = (None, None, "Death")  # no cause recorded: nothing to work around
    else:
        coded = _coded(cid, known, vocab, code, name, src, s_known, s_vocab, s_code, s_name, issues)
    if spec.visit is not None and (vid is None or vid not in visit_ids):
        issues["no_visit"] += 1
        vid = None
    value = unit = None
    if spec.value_num is not None or spec.value_concept is not None:
        value = format_number(vnum) or _text(vstr)
        if value is None and vcid is not None and vcid != 0:
            if vc_known:
                value = _text(vc_name)
            else:
                issues["unknown_concept"] += 1
                value = f"Unknown concept {vcid}"
        value = value or _text(vsrc)
        if value is not None:
            unit = _unit(ucid, u_code, u_name, u_known, usrc, issues, style)
    return Event(
        domain=t,
        time=when,
        name=coded[2],
        vocabulary=coded[0],
        code=coded[1],
        value=value,
        unit=unit,
        visit_id=vid,
    )


def _unit(
    ucid: Any, u_code: Any, u_name: Any, u_known: Any, usrc: Any, issues: Counter[str], style: UnitStyle
) -> str | None:
    if ucid is not None and ucid != 0 and not u_known:
        issues["unknown_concept"] += 1
    concept = (_text(u_code) if style == "source" else _text(u_name)) if u_known else None
    if style == "source":
        return _text(usrc) or concept
    return concept or _text(usrc)
