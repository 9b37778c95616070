"""The administrator's pages: ``/admin`` (every study's progress), ``/admin/studies/{name}``
(progress per reviewer and the live inter-rater agreement, one table per scale or label set) and
``/admin/studies/{name}/disagreements`` (the items where reviewers differ most on one measure).

Admins see counts and agreement; on the disagreements page they also see the reviewers' scores,
ranks or labels side by side, each with the reviewer's written rationale (or comment, or rewrite)
beside it: admins adjudicate disagreements and need the reasons, not only the numbers (issue 37:
"the disagreements page omits written rationales"). That page is admin-only, checked on the server
(:func:`~clinieval.review.web.security.current_admin`: a reviewer gets 403 before any study is
looked up), so reviewers still never read each other's text. The study page itself stays counts
and agreement only. Never a model name: answers are named by the start of their text, and every
text shown, rationales included, goes through the study's one masking function
(:func:`clinieval.review.blinding.masker`) before it reaches the page (blinding holds for admins
too, who may also review); Jinja's autoescaping renders it as text, never as markup.
"""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import Engine

from clinieval.errors import UserError
from clinieval.review import accounts, assigning, store
from clinieval.review.blinding import masker
from clinieval.review.db import User
from clinieval.review.importing import masking_report
from clinieval.review.web import agreement_view, data
from clinieval.review.web.render import render
from clinieval.review.web.security import NotFound, current_admin, engine_of

router = APIRouter()


@router.get("/admin", response_class=HTMLResponse)
def admin_home(request: Request, user: User = Depends(current_admin)) -> Response:
    engine = engine_of(request)
    studies = [assigning.progress(engine, s.name) for s in store.list_studies(engine)]
    users = accounts.list_users(engine)
    return render(request, "admin.html", {"user": user, "studies": studies, "users": users})


@router.get("/admin/studies/{name}", response_class=HTMLResponse)
def admin_study(request: Request, name: str, user: User = Depends(current_admin)) -> Response:
    engine = engine_of(request)
    try:
        progress = assigning.progress(engine, name)
    except store.NotFound:
        raise NotFound("No study of that name.") from None
    tables, summary, note = agreement_tables(engine, name)
    values = {
        "user": user,
        "progress": progress,
        "agreement": tables,
        "agreement_summary": summary,
        "agreement_note": note,
        "conventions": agreement_view.CONVENTIONS,
        "masking": masking_report(engine, name),
    }
    return render(request, "admin_study.html", values)


def agreement_tables(engine: Engine, study: str) -> tuple[list[agreement_view.Table], str | None, str | None]:
    """The study's agreement as one table per measure, a summary line (how many submitted reviews
    from how many reviewers it rests on), or no tables and a note saying why."""
    try:
        from clinieval.review.agreement import study_agreement  # numpy and scipy: loaded on first use
    except ImportError:  # pragma: no cover - the module ships with this package
        return [], None, "Agreement: not available yet."
    try:
        result = study_agreement(engine, study)
    except UserError as e:
        return [], None, f"Agreement: not available yet ({e})."
    hide = masker(data.study_sources(engine, study))
    tables = agreement_view.tables(result, data.study_measures(engine, study), hide)
    n, reviewers = result.get("submitted", 0), result.get("reviewers", 0)
    plural = ("" if n == 1 else "s", "" if reviewers == 1 else "s")
    summary = (
        f"From {n} submitted review{plural[0]} by {reviewers} reviewer{plural[1]} (drafts are not counted)."
    )
    return tables, summary, None


@router.get("/admin/studies/{name}/disagreements", response_class=HTMLResponse)
def admin_disagreements(request: Request, name: str, user: User = Depends(current_admin)) -> Response:
    """``?on=MEASURE`` (a scale, a label set, ``rank``, ``correct``, ``decision``; the first when
    left out): the items where reviewers differ most on it, their values side by side with their
    written reasons, masked. Answers are named by the start of their text, never by their model or
    their import key."""
    from clinieval.review.agreement import UnknownMeasure, disagreements

    engine = engine_of(request)
    try:
        found = disagreements(engine, name, request.query_params.get("on"))
    except store.NotFound:
        raise NotFound("No study of that name.") from None
    except UnknownMeasure:
        raise NotFound("This study has no such measure.") from None
    hide = masker(data.study_sources(engine, name))
    items = [
        replace(
            d,
            preview=hide(d.preview),
            rows=tuple((hide(what), tuple(hide(v) for v in values)) for what, values in d.rows),
            written=tuple(tuple(hide(t) for t in texts) for texts in d.written),
        )
        for d in found.items
    ]
    values = {"user": user, "found": found, "items": items, "measure_label": hide(found.measure.label)}
    return render(request, "admin_disagreements.html", values)
