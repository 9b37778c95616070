"""Synthetic MedEval reports whose codes are known by construction.

A report is planned first (which findings are stated, hedged or negated, which device is in place,
which normal sentences fill it), then written, so its codes are read off the plan, never off the
text:

* a stated finding or a device is **positive**, a hedged one **unknown**, a negated one (or one a
  normal sentence negates, "The costophrenic angles are sharp.") **negative**, every other code
  **absent**; "No Finding" is positive when no pathology is stated or hedged (devices and hardware
  do not count, as in CheXpert);
* the findings hold 0-3 stated pathologies, sometimes a hedged one and a device, 2-4 negations and
  1-2 normal sentences (jargon among them), shuffled; now and then one stated finding is written
  as a contradiction, or two sentences run together without their period: real reports do both;
* most reports (:data:`WITH_PRIOR`) compare with a dated earlier study, said in a findings
  sentence of its own ("Comparison is made with the radiograph of March 3, 2019."); negated
  findings are now and then listed in one sentence ("No pneumothorax or pleural effusion."), as
  real reports do;
* the impression restates the stated and hedged findings and the devices (or the domain's
  "no acute abnormality" line when there is no pathology), as one line or a numbered list, its
  first item set against the prior study when there is one ("Compared with the radiograph of
  March 3, 2019, small left pleural effusion."). It adds nothing the findings do not say: a
  faithful summary. The dated comparison is what keeps impressions apart: without it a third of
  them were the domain's clean line, and a test impression equal to a train one is a summary
  learnt by heart.

The text is laid out like a report file (``EXAMINATION:``, ``INDICATION:``, ``FINDINGS:``,
``IMPRESSION:``, findings wrapped at 78 columns), so :func:`~..sections.parse_sections` reads the
same findings and impression back.
"""

from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass, field

from clinieval.benchmarks.medeval.items import CodeValue, ReportItem
from clinieval.benchmarks.medeval.sections import normalize_space
from clinieval.benchmarks.medeval.synth.domains import Domain, Finding, Normal
from clinieval.benchmarks.medeval.synth.text import (
    Context,
    Phrase,
    cap,
    contradiction,
    decap,
    fill,
    hedged,
    negated_noun,
    negation_list,
    pick_phrase,
    prior_study,
    run_on,
    stated,
)

__all__ = [
    "COMPARISON_SENTENCES",
    "IMPRESSION_COMPARISONS",
    "WITH_PRIOR",
    "Plan",
    "codes_of",
    "impression_lines",
    "plan_report",
    "report_item",
]

POSITIVE_COUNTS = ((0, 35), (1, 35), (2, 20), (3, 10))
"""How many pathologies a report states, with weights: about a third of reports are normal."""

WITH_PRIOR = 0.95
"""The share of reports compared with a dated earlier study."""

COMPARISON_SENTENCES = (
    "Comparison is made with {prior}.",
    "Findings are compared with {prior}.",
    "Correlation is made with {prior}.",
)
"""The findings sentence naming the prior study (it states, hedges and negates nothing)."""

IMPRESSION_COMPARISONS = (
    ("Compared with {prior}, ", ""),
    ("In comparison with {prior}, ", ""),
    ("", ", compared with {prior}"),
)
"""How the impression's first item is set against the prior study: an opening or an ending.
Neutral words only ("as on" or "unchanged" would claim a stability the findings do not state)."""

LISTED_NEGATIONS = 0.6
"""How often a report's negated findings (two or more that list cleanly) share one sentence."""

IN_VIEW = 0.3
"""How often a stated or hedged finding says where in the images it is seen ("on the lateral
view"): it changes no code, and keeps the findings of two reports apart."""


@dataclass(slots=True)
class Plan:
    """What a report says, before it is written."""

    positives: list[Phrase] = field(default_factory=list)
    hedged: list[Phrase] = field(default_factory=list)
    devices: list[Phrase] = field(default_factory=list)
    negated: list[tuple[Finding, str]] = field(default_factory=list)
    normals: list[Normal] = field(default_factory=list)
    prior: str | None = None
    """The earlier study compared with ("the radiograph of March 3, 2019"), if any."""

    def used(self) -> set[str]:
        return {p.finding.code for p in (*self.positives, *self.hedged, *self.devices)}


def _compatible(finding: Finding, chosen: set[str], domain: Domain) -> bool:
    return finding.code not in chosen and not any(finding.code in g and g & chosen for g in domain.exclusive)


def _draw_pathologies(domain: Domain, rng: random.Random, count: int, chosen: set[str]) -> list[Phrase]:
    pool = [f for f in domain.findings if f.pathology]
    rng.shuffle(pool)
    out: list[Phrase] = []
    for finding in pool:
        if len(out) == count:
            break
        if _compatible(finding, chosen, domain):
            chosen.add(finding.code)
            out.append(pick_phrase(finding, rng))
    return out


def plan_report(domain: Domain, rng: random.Random) -> Plan:
    """Draw what a report of ``domain`` states, hedges, negates and fills in."""
    counts, weights = zip(*POSITIVE_COUNTS, strict=True)
    chosen: set[str] = set()
    plan = Plan(positives=_draw_pathologies(domain, rng, rng.choices(counts, weights)[0], chosen))
    if rng.random() < 0.25:
        plan.hedged = _draw_pathologies(domain, rng, 1, chosen)
    devices = [f for f in domain.findings if not f.pathology]
    if devices and rng.random() < 0.25:
        plan.devices = [pick_phrase(rng.choice(devices), rng)]
    used = plan.used()
    negatable = [f for f in domain.findings if f.pathology and f.negations and f.code not in used]
    picked = rng.sample(negatable, min(rng.randint(2, 4), len(negatable)))
    plan.negated = [(f, rng.choice(f.negations)) for f in picked]
    taken = used | {f.code for f in picked}
    fillers = [
        n for n in domain.normals if not n.excludes & used and (n.negates is None or n.negates not in taken)
    ]
    plan.normals = rng.sample(fillers, min(rng.randint(1, 2), len(fillers)))
    plan.prior = prior_study(domain, rng) if rng.random() < WITH_PRIOR else None
    return plan


def codes_of(plan: Plan, domain: Domain) -> dict[str, CodeValue]:
    """The plan's codes in the domain's order; absent ones are left out."""
    found: dict[str, CodeValue] = {p.finding.code: "positive" for p in (*plan.positives, *plan.devices)}
    found.update({p.finding.code: "unknown" for p in plan.hedged})
    found.update({f.code: "negative" for f, _ in plan.negated})
    found.update({n.negates: "negative" for n in plan.normals if n.negates is not None})
    if "No Finding" in domain.codes and not plan.positives and not plan.hedged:
        found["No Finding"] = "positive"
    return {code: found[code] for code in domain.codes if code in found}


def _negations(plan: Plan, rng: random.Random) -> list[str]:
    """The negation sentences: those that list cleanly in one sentence (:data:`LISTED_NEGATIONS`,
    in a drawn order, the rest on their own), else one per negated finding, half of those that
    list cleanly in a drawn form ("No pneumothorax seen.", "There is no pneumothorax.")."""
    nouns = [negated_noun(f) for f, _ in plan.negated]
    listable = [noun for noun in nouns if noun is not None]
    if len(listable) >= 2 and rng.random() < LISTED_NEGATIONS:
        rng.shuffle(listable)
        alone = [text for (_, text), noun in zip(plan.negated, nouns, strict=True) if noun is None]
        return [negation_list(listable, rng), *alone]
    return [
        negation_list([noun], rng) if noun is not None and rng.random() < 0.5 else text
        for (_, text), noun in zip(plan.negated, nouns, strict=True)
    ]


def _seen(sentence: str, domain: Domain, rng: random.Random) -> str:
    """``sentence`` with, now and then (:data:`IN_VIEW`), where in the images it is seen."""
    if not domain.views or rng.random() >= IN_VIEW:
        return sentence
    return Context(ending=" " + fill(rng.choice(domain.views), rng)).apply(sentence)


def _findings(plan: Plan, domain: Domain, rng: random.Random) -> list[str]:
    stated_ones = [_seen(stated(p, rng), domain, rng) for p in plan.positives]
    if stated_ones and rng.random() < 0.12:
        stated_ones[0] = contradiction(plan.positives[0], domain, rng)[0]
    body = [*stated_ones, *(_seen(hedged(p, rng), domain, rng) for p in plan.hedged)]
    body += _negations(plan, rng) + [n.text for n in plan.normals]
    rng.shuffle(body)
    if len(body) >= 2 and rng.random() < 0.1:
        i = rng.randrange(len(body) - 1)
        body[i : i + 2] = [run_on(body[i], body[i + 1], rng)[0]]
    compared = [] if plan.prior is None else [_comparison(rng.choice(COMPARISON_SENTENCES), plan.prior)]
    return compared + [stated(p, rng) for p in plan.devices] + body


def _comparison(template: str, prior: str) -> str:
    return template.format(prior=prior)


def impression_lines(plan: Plan, domain: Domain, rng: random.Random) -> list[str]:
    """The impression: stated and hedged findings (or the domain's clean line), then devices, the
    first set against the prior study when there is one; a numbered list half of the time when
    there are two items or more."""
    items = [cap(p.np) + "." for p in plan.positives] + [f"Possible {p.np}." for p in plan.hedged]
    items = (items or [domain.clean]) + [cap(p.np) + "." for p in plan.devices]
    if plan.prior is not None:
        opening, ending = rng.choice(IMPRESSION_COMPARISONS)
        first = items[0].removesuffix(".")
        first = _comparison(opening, plan.prior) + decap(first) if opening else first
        items[0] = first + _comparison(ending, plan.prior) + "."
    if len(items) >= 2 and rng.random() < 0.5:
        return [f"{n}. {item}" for n, item in enumerate(items, 1)]
    return [" ".join(items)]


def report_item(item_id: str, domain: Domain, rng: random.Random) -> ReportItem:
    """One report of ``domain`` with its codes, findings and impression."""
    plan = plan_report(domain, rng)
    findings = " ".join(_findings(plan, domain, rng))
    lines = impression_lines(plan, domain, rng)
    wrapped = textwrap.fill(findings, width=78, break_long_words=False, break_on_hyphens=False)
    text = (
        f"EXAMINATION: {domain.exam}\nINDICATION: {rng.choice(domain.indications)}\n\n"
        f"FINDINGS:\n{wrapped}\n\nIMPRESSION:\n" + "\n".join(lines)
    )
    return ReportItem(
        id=item_id,
        text=text,
        domain=domain.name,
        findings=findings,
        impression=normalize_space(" ".join(lines)),
        codes=codes_of(plan, domain),
    )
