"""The leaderboard as a report-layer :class:`~clinieval.report.Document`, built from its JSON.

Every number on the page is read from ``leaderboard.json`` (the dict :func:`page` receives), never
recomputed, so the page and the JSON cannot disagree; the Chromium test reads the page back and
checks each number against the JSON. Names and notes are plain text here: the report layer escapes
them. Links are relative paths (checked by :class:`~clinieval.report.Link`): each score links to
the benchmark's own report and an "items" cell to its per-item results browser; a benchmark
without one shows plain text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clinieval.analysis.leaderboard_words import format_number, format_percent
from clinieval.fsutil import slug
from clinieval.report import Block, BulletList, Document, Link, Paragraph, Raw, Section, Strong, Table
from clinieval.report.document import Cell
from clinieval.report.heatmap import heatmap_svg, matrix_table
from clinieval.suite.leaderboard_figures import forest_svg, rank_strip_svg

JSON = dict[str, Any]
NO_LINK = "—"


def anchor(benchmark: str) -> str:
    """The HTML id of a benchmark's section (the overall table links its ranks there)."""
    return "bench-" + slug(benchmark)


def rank_text(value: float) -> str:
    """A rank as shown: 2, or 1.5 for a tie (ranks are whole or halves, so no rounding is hidden)."""
    return f"{value:g}"


def interval_text(pair: Sequence[float], digits: int | None = None) -> str:
    if digits is None:
        return f"[{rank_text(pair[0])}, {rank_text(pair[1])}]"
    return f"[{format_number(pair[0], digits)}, {format_number(pair[1], digits)}]"


def percent(p: float) -> str:
    return format_percent(p, 1)


def p_text(p: float) -> str:
    return f"{p:.3g}"


def _linked(text: str, href: str | None) -> Cell:
    return Link(text, href) if href else text


def _links_line(name: str, links: Mapping[str, str | None]) -> Paragraph:
    parts: list[str | Link] = []
    if links.get("report"):
        parts += [Link(f"{name}: its own report", str(links["report"]))]
    if links.get("view"):
        parts += [" · " if parts else "", Link("every answer in the results browser", str(links["view"]))]
    if not parts:
        parts = ["This benchmark has no report or results browser to link."]
    return Paragraph(parts, "note")


def _scores_table(b: JSON, links: Mapping[str, str | None]) -> Table:
    d = b["digits"]
    ranks = {r["model"]: r for r in b["ranks"]}
    rows: list[list[Cell]] = []
    for s in b["scores"]:
        r = ranks[s["model"]]
        rows.append(
            [
                s["model"],
                _linked(format_number(s["mean"], d), links.get("report")),
                interval_text(s["ci"], d) + (" (zero width)" if s["ci"][0] == s["ci"][1] else ""),
                str(s["n"]),
                str(s["failed"]),
                rank_text(r["rank"]),
                rank_text(r["median"]),
                interval_text(r["interval"]) + ("*" if r.get("widened_to_the_tests") else ""),
                _linked("items", links.get("view")) if links.get("view") else NO_LINK,
            ]
        )
    level = b["level_percent"]
    header = [
        "Model",
        f"Calibrated ({_estimator(b)})" if b.get("calibration") else "Mean",
        f"{level}% CI",
        "n",
        "Failed",
        "Rank",
        "Median rank",
        f"{level}% rank interval",
    ]
    return Table([*header, "Answers"], rows)


def _probability_table(models: Sequence[str], ranks: Sequence[JSON]) -> Table:
    by = {r["model"]: r for r in ranks}
    k = len(models)
    return Table(
        ["Model", *(f"P(rank {r})" for r in range(1, k + 1))],
        [[m, *(percent(p) for p in by[m]["probabilities"])] for m in models],
    )


def _test_name(p: JSON) -> str:
    """The pair test in a few words (the note under the table says it in full)."""
    test = str(p.get("test") or "")
    if not test:
        return "paired bootstrap"  # a leaderboard.json written before exact tests
    if test.startswith("exact McNemar"):
        return "exact McNemar"
    if test.startswith("PPI"):
        return f"{test.split(' ', 1)[0]}, normal"
    return "sign-flip, exact" if p.get("exhaustive", True) else "sign-flip, Monte Carlo"


def _monte_carlo(p: JSON) -> str:
    error = p.get("p_monte_carlo_error")
    return "" if error is None else f" ± {error:.2g}"


def _pairs_table(b: JSON) -> Table:
    d = b["digits"]
    rows: list[list[Cell]] = [
        [
            p["a"],
            p["b"],
            str(p["n"]),
            format_number(p["mean_difference"], d),
            interval_text(p["ci"], d),
            p_text(p["p"]) + _monte_carlo(p),
            p_text(p["p_holm"]),
            "yes" if p["significant"] else "no",
            _test_name(p),
            *([MARGIN_WORDS[p["margin_call"]]] if b.get("margin") is not None else []),
        ]
        for p in b["pairs"]
    ]
    level = b["level_percent"]
    header = ["A", "B", "n", "A − B", f"{level}% CI", "p", "Holm p", f"Significant at {b['alpha']:g}", "Test"]
    if b.get("margin") is not None:
        header.append(f"Margin ±{format_number(b['margin'], d)}")
    return Table(header, rows)


MARGIN_WORDS = {
    "equivalent": "equivalent",
    "a better": "A better by at least the margin",
    "b better": "B better by at least the margin",
    "neither": "cannot say",
}


def _reasons(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def _judge_facts(judged: Mapping[str, JSON], models: Sequence[str]) -> list[Block]:
    """Who judged each model's answers and how readable the judge was (judge_facts.py)."""
    blocks: list[Block] = []
    for m in models:
        f = judged.get(m)
        if f and f.get("self_judged"):
            blocks.append(
                Paragraph(
                    f"{m}'s answers were judged by the same model (by fingerprint): a model grading itself"
                    " is not an independent judge, so its score here says little.",
                    "warning",
                )
            )
    rows: list[list[Cell]] = []
    for m in models:
        f = judged.get(m)
        if not f:
            continue
        rate = f.get("parse_rate")
        det = f.get("deterministic") or {}
        rows.append(
            [
                m,
                str(f["judge"]),
                str(f["repeats"]),
                f"{f['parsed']} of {f['replies']}" + ("" if rate is None else f" ({format_percent(rate)})"),
                _reasons(f.get("unparsed_reasons") or {}),
                _reasons(f.get("failed_calls") or {}),
                "yes" if f.get("self_judged") else "no",
                (
                    f"{format_percent(det['agree'])} of {det['items']} items with {det['name']}"
                    f" (judge {det['judge_mean']:.3f}, {det['name']} {det['deterministic_mean']:.3f})"
                )
                if det.get("items")
                else "no deterministic scorer",
            ]
        )
    header = ["Model", "Judge", "Repeats", "Replies with a verdict", "Unparsed, by reason", "Failed calls",
              "Judged itself", "Agreement"]  # fmt: skip
    blocks.append(Table(header, rows))
    blocks.append(
        Paragraph(
            "Replies without a verdict are left out, not scored 0, and are not failures a rerun could fix"
            " (the replies are kept); failed calls are retried by the next run.",
            "note",
        )
    )
    return blocks


def _judge_blocks(j: JSON) -> list[Block]:
    k = len(j["models"])
    rows: list[list[Cell]] = [
        [
            m,
            rank_text(j["gold_ranks"][m]),
            rank_text(j["per_model"][m]),
            *(str(c) for c in j["rank_counts"][m]),
            ", ".join(rank_text(row[i]) for row in j["ranks"]),
        ]
        for i, m in enumerate(j["models"])
    ]
    blocks: list[Block] = [
        Paragraph(
            f"The judge scored every answer {j['repeats']} times. Ranked within each repeat (ties share the"
            f" best rank), the models' ranks move by {rank_text(j['instability'])} in all: EHRNoteQA's"
            " instability, the sum over models and repeats of |rank − the model's most frequent rank|"
            " (0: every repeat gave the same order)."
        ),
        Table(
            [
                "Model",
                "Most frequent rank",
                "Instability",
                *(f"Repeats at rank {r}" for r in range(1, k + 1)),
                "Rank in each repeat",
            ],
            rows,
        ),
    ]
    if j["without"]:
        blocks.append(Paragraph(f"Without judge repeats: {', '.join(j['without'])}.", "note"))
    return blocks


def _benchmark(b: JSON, links: Mapping[str, str | None], board: JSON) -> Section:
    models = b["models"]
    level = b["level_percent"]
    scores = {s["model"]: s for s in b["scores"]}
    ranks = {r["model"]: r for r in b["ranks"]}
    figures = forest_svg(
        f"{b['name']}: {'calibrated' if b.get('calibration') else 'mean'} {b['metric']} with {level}% CI",
        models,
        [scores[m]["mean"] for m in models],
        [tuple(scores[m]["ci"]) for m in models],
        b["digits"],
        tuple(b["scale"]) if b["scale"] else None,
    ) + rank_strip_svg(
        f"{b['name']}: how often each model holds each rank",
        models,
        [ranks[m]["probabilities"] for m in models],
    )
    where = f"{b['rank_items']} items every model answered" + (
        f" ({b['rank_clusters']} patients, resampled whole)" if b["clustered"] else ""
    )
    blocks: list[Block] = [
        _links_line(b["name"], links),
        *(Paragraph(w, "warning") for w in b.get("warnings", [])),
        Paragraph([Strong(b["verdict"])]),
        _scores_table(b, links),
        Paragraph(
            f"{_what_the_number_is(b)}; {level}% CI by {b['ci_method']}. Failed: items whose"
            f" model call failed, left out (never scored 0). Ranks: on the {where}, rank 1 = best, ties"
            f" share the average rank; the median and {level}% interval come from {board['resamples']}"
            " bootstrap replicates"
            + (
                "; * widened to what the pair tests allow: no better than one plus the models significantly"
                " ahead of it, no worse than the number of models less those it is significantly ahead of."
                if any(r.get("widened_to_the_tests") for r in b["ranks"])
                else "."
            ),
            "note",
        ),
        Raw(f'<div class="figures">{figures}</div>', "The figures show the numbers of the tables."),
        _probability_table(models, b["ranks"]),
    ]
    if b["pairs"]:
        count = "its one pair" if len(b["pairs"]) == 1 else f"this benchmark's {len(b['pairs'])} pairs"
        note = (
            f"Test: {b['pair_test']}. Holm's step-down adjustment over {count} controls the chance of any"
            f" false claim at {b['alpha']:g}; the CIs are not adjusted."
        )
        if b.get("margin") is not None:
            note += (
                f" Margin: two one-sided tests at {b['alpha']:g} each pair (the {100 - 200 * b['alpha']:g}%"
                " paired bootstrap CI of A − B inside ± the margin: equivalent; wholly beyond it: better by"
                " at least the margin), not adjusted for the number of pairs."
            )
        blocks.append(Section("Pairwise differences", [_pairs_table(b), Paragraph(note, "note")]))
    if b.get("calibration"):
        blocks.append(Section("Calibrated by clinicians", calibration_blocks(b)))
    judged = (board.get("judges") or {}).get(b["name"])
    if judged:
        blocks.append(Section("The judge", _judge_facts(judged, models)))
    if b["judge"]:
        blocks.append(Section("Judge-run rank stability", _judge_blocks(b["judge"])))
    return Section(f"{b['name']} — {b['metric']}", blocks, anchor(b["name"]))


def _estimator(b: JSON) -> str:
    """PPI++ (the judge's weight tuned), or PPI (fixed with ``suite report --lam``)."""
    return str(b["calibration"].get("estimator") or "PPI++")


def _what_the_number_is(b: JSON) -> str:
    cal = b.get("calibration")
    if not cal:
        return "Mean over the items each model answered"
    rated = sorted({m["calibrated"]["n_rated"] for m in cal["models"]})
    per = f"{rated[0]}" if len(rated) == 1 else f"{rated[0]}–{rated[-1]}"
    return (
        f"The clinicians' mean as estimated by {_estimator(b)} from every judge score of the model and"
        f" {per} clinician ratings per model (the section below has the judge-only and clinicians-only"
        " numbers beside it)"
    )


JUDGE_COLOUR = "#999999"
CALIBRATED_COLOUR = "#1f77b4"
CALIBRATION_NOTE = (
    "Judge only: the judge's mean over every answer, biased by however much the judge is. Clinicians only:"
    " the rated sample alone, unbiased but wide. Calibrated: every judge score, corrected by the"
    " clinicians' sample: unbiased whatever the judge's bias, and narrower than the sample alone when the"
    " judge agrees with the clinicians (λ: how much weight the judge's scores get, 0 to 1; fitted to the"
    " data by PPI++, or fixed by the user with `suite report --lam`, which is plain PPI). Judge"
    " bias: the judge's mean minus the clinicians' on the rated answers; a bias that differs between"
    " models is why a ranking by the judge alone can be wrong with tight intervals. docs/calibration.md"
    " says when to trust which."
)


def calibration_blocks(b: JSON) -> list[Block]:
    """The calibration section: each model's four estimates, the judge's agreement with the
    clinicians, and a figure of judge-only against calibrated."""
    cal, d, level = b["calibration"], b["digits"], b["level_percent"]
    rows: list[list[Cell]] = []
    for m in cal["models"]:
        lam = m["calibrated"]["lam"]
        rows.append(
            [
                m["model"],
                _estimate_text(m["judge_only"], d),
                _estimate_text(m["clinicians_only"], d) + f" (n = {m['clinicians_only']['n_rated']})",
                _estimate_text(m["calibrated"], d),
                _estimate_text(m["judge_bias"], d, signed=True),
                NO_LINK if lam is None else f"{lam:.2f}",
            ]
        )
    header = ["Model", "Judge only", "Clinicians only", f"Calibrated ({_estimator(b)})", "Judge bias", "λ"]
    models = [m["model"] for m in cal["models"]]
    picture = forest_svg(
        f"{b['name']}: judge only and calibrated, {level}% CI",
        [f"{name} · {what}" for name in models for what in ("judge only", "calibrated")],
        [m[k]["value"] for m in cal["models"] for k in ("judge_only", "calibrated")],
        [tuple(m[k]["ci"]) for m in cal["models"] for k in ("judge_only", "calibrated")],
        d,
        tuple(b["scale"]) if b["scale"] else None,
        colours=[c for _ in models for c in (JUDGE_COLOUR, CALIBRATED_COLOUR)],
    )
    return [
        Paragraph(
            f"{cal['rated']} clinician ratings ({cal['kind']}) behind this benchmark's numbers;"
            f" {_agreement_text(cal['agreement'])}"
        ),
        Table(header, rows),
        Paragraph(f"{level}% intervals. " + CALIBRATION_NOTE, "note"),
        Raw(f'<div class="figures">{picture}</div>', "The figure shows the numbers of the table."),
    ]


def _estimate_text(e: JSON, digits: int, *, signed: bool = False) -> str:
    value = format_number(e["value"], digits)
    if signed and e["value"] > 0:
        value = "+" + value
    return f"{value} {interval_text(e['ci'], digits)}"


def _agreement_text(a: JSON) -> str:
    n = a.get("answers", 0)
    if not n:
        return "no rated answer has a judge score to compare."
    if "kappa" in a:
        kappa = NO_LINK if a["kappa"] is None else f"{a['kappa']:.2f}"
        share = percent(a["agreement"])
        return f"the judge agrees with the clinicians on {share} of {n} rated answers (κ {kappa})."
    r = a.get("pearson_r")
    shown = NO_LINK if r is None else f"{r:.2f}"
    return f"judge and clinician scores correlate at r = {shown} over {n} rated answers."


def _overall(board: JSON) -> Section:
    o = board["overall"]
    names = [b["name"] for b in board["benchmarks"]]
    models = [m["model"] for m in o["models"]]
    k = len(models)
    level = board["level_percent"]
    rows: list[list[Cell]] = [
        [
            m["model"],
            format_number(m["mean_rank"], 2),
            rank_text(m["rank"]),
            rank_text(m["median"]),
            interval_text(m["interval"]),
            *(percent(p) for p in m["probabilities"]),
            *(Link(rank_text(m["ranks"][n]), "#" + anchor(n)) if n in m["ranks"] else NO_LINK for n in names),
        ]
        for m in o["models"]
    ]
    header = ["Model", "Mean rank", "Overall rank", "Median", f"{level}% rank interval"]
    header += [f"P(rank {r})" for r in range(1, k + 1)] + [f"Rank on {n}" for n in names]
    blocks: list[Block] = [
        Paragraph(o["aggregation"]),
        BulletList(o["caveats"]),
        Table(header, rows),
        Raw(
            '<div class="figures">'
            + rank_strip_svg(
                "Overall: how often each model holds each overall rank",
                models,
                [m["probabilities"] for m in o["models"]],
            )
            + "</div>",
            "The figure shows the rank probabilities of the table.",
        ),
    ]
    w = o["win_rates"]
    if len(w["models"]) > 1:
        title = (
            "Win rate: share of the benchmarks both have where the row's mean beats the column's (a tie: ½)"
        )
        blocks += [
            Paragraph(
                "Win rates count benchmarks, not items, and ignore significance: a hair's win counts whole.",
                "note",
            ),
            Raw(
                f'<div class="figures">{heatmap_svg(title, w)}</div>',
                [Paragraph(title + ":"), matrix_table(w)],
            ),
        ]
    return Section("Overall ranking", blocks, "overall")


def page(
    board: JSON, links: Mapping[str, Mapping[str, str | None]], title: str, notes: Sequence[str]
) -> Document:
    """The leaderboard document from ``board`` (leaderboard.json) and each benchmark's link targets."""
    level = f"{board['level'] * 100:g}"
    board = {**board, "level_percent": level}
    # the level and alpha are the board's; each benchmark's section reads them from its own dict
    benches = [{**b, "level_percent": level, "alpha": board["alpha"]} for b in board["benchmarks"]]
    intro = Paragraph(
        f"Each score is a mean with its {level}% confidence interval; pairwise differences are tested"
        f" with Holm's correction; rank intervals say how often each model holds each rank when the"
        f" items are drawn again ({board['resamples']} bootstrap replicates, seed {board['seed']})."
        " Every number here is in leaderboard.json beside this page.",
        "note",
    )
    blocks: list[Block] = [intro, _overall(board)]
    blocks += [_benchmark(b, links.get(b["name"], {}), board) for b in benches]
    if board.get("provenance"):
        rows: list[list[Cell]] = [[p["what"], p["value"]] for p in board["provenance"]]
        blocks.append(Section("Provenance", [Table(["What", "Value"], rows)], "provenance"))
    return Document(title, blocks, warnings=list(notes))
