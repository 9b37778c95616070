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
* the impression restates the stated and hedged findings and the devices (or the domain's
  "no acute abnormality" line when there is no pathology), as one line or a numbered list. It adds
  nothing the findings do not say: a faithful summary.

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
    Phrase,
    cap,
    contradiction,
    hedged,
    pick_phrase,
    run_on,
    stated,
)

__all__ = ["Plan", "codes_of", "impression_lines", "plan_report", "report_item"]

POSITIVE_COUNTS = ((0, 35), (1, 35), (2, 20), (3, 10))
"""How many pathologies a report states, with weights: about a third of reports are normal."""


@dataclass(slots=True)
class Plan:
    """What a report says, before it is written."""

    positives: list[Phrase] = field(default_factory=list)
    hedged: list[Phrase] = field(default_factory=list)
    devices: list[Phrase] = field(default_factory=list)
    negated: list[tuple[Finding, str]] = field(default_factory=list)
    normals: list[Normal] = field(default_factory=list)

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


def _findings(plan: Plan, domain: Domain, rng: random.Random) -> list[str]:
    stated_ones = [stated(p, rng) for p in plan.positives]
    if stated_ones and rng.random() < 0.12:
        stated_ones[0] = contradiction(plan.positives[0], domain, rng)[0]
    body = [*stated_ones, *(hedged(p, rng) for p in plan.hedged)]
    body += [text for _, text in plan.negated] + [n.text for n in plan.normals]
    rng.shuffle(body)
    if len(body) >= 2 and rng.random() < 0.1:
        i = rng.randrange(len(body) - 1)
        body[i : i + 2] = [run_on(body[i], body[i + 1], rng)[0]]
    return [stated(p, rng) for p in plan.devices] + body


def impression_lines(plan: Plan, domain: Domain, rng: random.Random) -> list[str]:
    """The impression: stated and hedged findings (or the domain's clean line), then devices; a
    numbered list half of the time when there are two items or more."""
    items = [cap(p.np) + "." for p in plan.positives] + [f"Possible {p.np}." for p in plan.hedged]
    items = (items or [domain.clean]) + [cap(p.np) + "." for p in plan.devices]
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
