"""How fast, and how right, is the medspaCy report labeller next to a plain regex labeller?

Both label the same chest reports with the CheXpert labeler's phrase lists (read in place from
``shared/data/chexpert-labeler``) and the same aggregation (strongest value per observation,
CheXpert's No Finding rule), so the comparison is only about how mentions are found and classified:

* **medspaCy**: :class:`clinieval.benchmarks.medeval.labeller.Labeller`: sentences, unmention
  phrases, section headers, ConText triggers with directions, scopes and terminators.
* **plain regex**: the phrases matched in each sentence; a mention is negative when "no", "not" or
  "without" stands within the ``--window`` words before it, else uncertain when "may", "might",
  "possible", "possibly", "probable" or "suspected" does, else positive.

The reports are the labeler's 4 public sample reports repeated ``--repeat`` times, plus
``--synthetic`` chest reports generated here from the phrase lists (seeded), so a few hundred in
all. Both labellers are built before the clock starts (medspaCy's imports take seconds); each is
timed ``--rounds`` times in alternating order and the median is reported. Agreement is per cell
(4 reports x 14 observations) against ``labeled_reports.csv``.

    .venv/bin/python bench/medeval_labeller.py --repeat 25 --synthetic 400 --rounds 5

**On the development set** (``--dev``): the hand-labelled sentences and short reports of
``tests/data/medeval-labeller-dev.jsonl`` (conventions in its ``.md``), labelled by this checkout
and, with ``--before DIR``, by an older checkout (run through ``PYTHONPATH=DIR/src``, e.g. a
``git worktree`` of the commit before the labeller's fix). Each side runs in a worker process of
its own (``bench/_labeller_worker.py``, which imports nothing but the labeller), built before
the clock starts, timed on the dev set's
reports repeated ``--dev-repeat`` times for ``--rounds`` rounds; the two sides' workers run
``--alternations`` times in alternating order (a shared machine's load falls on both alike) and
the median of all their rounds is reported. Printed per side: cells and reports right, agreement
per observation, and the confusion of gold -> predicted values.

    git worktree add /tmp/labeller-before <commit before the fix>
    .venv/bin/python bench/medeval_labeller.py --dev --before /tmp/labeller-before --rounds 5 --alternations 4

**On the frozen part** (``--frozen``): the same on ``tests/data/medeval-labeller-families-frozen.jsonl``,
written from the conventions before the labeller was changed for it (issue 36).

**On the generated phrasing families** (``--families``): ``--per-family`` variants of each family of
``tests/labeller_families.py`` (a fixed sample for ``--seed``), labelled as the dev set is (before
and after with ``--before``); printed per family: variants labelled exactly right.

    .venv/bin/python bench/medeval_labeller.py --families --per-family 200 --before /tmp/labeller-before

**On the CheXpert labeler's public sample** (``--samples``): its 4 reports against
``labeled_reports.csv`` (the labeler's own output), agreement per observation; no timing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from clinieval.benchmarks.medeval.items import CHEXPERT_NUMBERS, CodeValue
from clinieval.benchmarks.medeval.labeller import Labeller, read_reports
from clinieval.benchmarks.medeval.labeller.aggregate import Mention, aggregate
from clinieval.benchmarks.medeval.labeller.rules import DomainRules, load_chexpert_rules

REPO = Path(__file__).resolve().parents[1]
CHEXPERT = REPO.parent / "shared" / "data" / "chexpert-labeler"

NEGATION = re.compile(r"\b(?:no|not|without)\b", re.IGNORECASE)
UNCERTAINTY = re.compile(r"\b(?:may|might|possible|possibly|probable|suspected)\b", re.IGNORECASE)
SENTENCE_END = re.compile(r"[.!?]\s+|\n\s*\n")

Labels = list[dict[str, CodeValue]]


class RegexLabeller:
    """Phrase match plus a look-back window for negation and uncertainty cues."""

    def __init__(self, rules: DomainRules, window: int) -> None:
        self.rules = rules
        self.window = window
        self.patterns = [
            (code, phrase, re.compile(phrase.pattern, re.IGNORECASE))
            for code, phrases in rules.mentions.items()
            for phrase in phrases
        ]

    def value(self, sentence: str, start: int) -> CodeValue:
        before = " ".join(sentence[:start].split()[-self.window :])
        if NEGATION.search(before):
            return "negative"
        return "unknown" if UNCERTAINTY.search(before) else "positive"

    def mentions(self, report: str) -> list[Mention]:
        found = []
        for sentence in SENTENCE_END.split(report):
            for code, phrase, pattern in self.patterns:
                for match in pattern.finditer(sentence):
                    found.append(Mention(code, self.value(sentence, match.start()), phrase))
        return found

    def label(self, reports: Sequence[str]) -> Labels:
        return [aggregate(self.mentions(r), self.rules) for r in reports]


# --- synthetic reports ----------------------------------------------------------------------

WORDS = {
    "atelecta": "atelectasis",
    "consolidat": "consolidation",
    "opaci": "opacity",
    "degenera": "degenerative change",
    "calcifi": "calcification",
    "hyperinflat": "hyperinflation",
    "inflam": "inflammation",
    "prominen": "prominence",
    "atherosclero": "atherosclerosis",
    "arthroplast": "arthroplasty",
    "reticula": "reticulation",
    "defib": "defibrillator",
    "infectious": "infectious process",
}
"""CheXpert phrases that are word stems, completed so that the generated text reads as English."""

TEMPLATES = (
    "There is {a}.",
    "No {a}.",
    "No evidence of {a} or {b}.",
    "{A} is not seen.",
    "May represent {a}.",
    "Possible {a}.",
    "{A} cannot be excluded.",
    "Mild {a}, without {b}.",
    "Stable {a}.",
    "Small {a}, likely {b}.",
    "Heart size is normal.",
    "Lungs are clear.",
    "No acute cardiopulmonary process.",
)


def phrase_words(rules: DomainRules) -> list[str]:
    words = {WORDS.get(p.text, p.text).strip() for ps in rules.mentions.values() for p in ps}
    return sorted(w for w in words if w.replace(" ", "").replace("-", "").isalpha())


def synthetic_reports(rules: DomainRules, n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = phrase_words(rules)
    reports = []
    for _ in range(n):
        sentences = []
        for _ in range(rng.randint(3, 7)):
            a, b = rng.sample(words, 2)
            text = rng.choice(TEMPLATES).format(a=a, b=b, A=a[0].upper() + a[1:])
            sentences.append(text)
        body = " ".join(sentences)
        reports.append(f"FINDINGS: {body}\n\nIMPRESSION: {sentences[0]}" if rng.random() < 0.5 else body)
    return reports


# --- measuring ------------------------------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def agreement(labels: Labels, gold: list[list[str]], codes: Sequence[str]) -> dict[str, object]:
    """Per-cell and whole-row agreement with the gold CSV's cells."""
    cells = [
        (CHEXPERT_NUMBERS[lab[c]], row[i + 1])
        for lab, row in zip(labels, gold, strict=True)
        for i, c in enumerate(codes)
    ]
    rows = sum(
        all(CHEXPERT_NUMBERS[lab[c]] == row[i + 1] for i, c in enumerate(codes))
        for lab, row in zip(labels, gold, strict=True)
    )
    agree = sum(a == b for a, b in cells)
    return {
        "cells": len(cells),
        "cells_agree": agree,
        "cell_agreement": agree / len(cells),
        "rows_exact": rows,
    }


def mutual_agreement(a: Labels, b: Labels, codes: Sequence[str]) -> float:
    pairs = [(x[c], y[c]) for x, y in zip(a, b, strict=True) for c in codes]
    return sum(p == q for p, q in pairs) / len(pairs)


def run(args: argparse.Namespace) -> dict[str, object]:
    rules = load_chexpert_rules(args.chexpert)
    public = read_reports(args.chexpert / "sample_reports.csv")
    with (args.chexpert / "labeled_reports.csv").open(newline="", encoding="utf-8") as f:
        gold = list(csv.reader(f))[1:]
    reports = public * args.repeat + synthetic_reports(rules, args.synthetic)

    t = time.perf_counter()
    medspacy_labeller = Labeller("chest x-ray", chexpert=args.chexpert)
    build_s = time.perf_counter() - t
    regex_labeller = RegexLabeller(rules, args.window)
    sides: dict[str, Callable[[Sequence[str]], Labels]] = {
        "medspacy": medspacy_labeller.label,
        "regex": regex_labeller.label,
    }
    for label in sides.values():  # warm-up, untimed
        label(reports[:20])
    times: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            times[name].append(timed(lambda name=name: sides[name](reports)))

    codes = medspacy_labeller.codes
    results: dict[str, object] = {
        "reports": len(reports),
        "public_reports": len(public) * args.repeat,
        "synthetic_reports": args.synthetic,
        "mean_words": statistics.mean(len(r.split()) for r in reports),
        "rounds": args.rounds,
        "window": args.window,
        "medspacy_build_s": build_s,
        "mentions_per_report_medspacy": statistics.mean(
            len(medspacy_labeller.mentions(r)) for r in reports[:200]
        ),
    }
    for name, label in sides.items():
        median = statistics.median(times[name])
        results[name] = {
            "median_s": median,
            "times_s": times[name],
            "reports_per_s": len(reports) / median,
            "gold": agreement(label(public), gold, codes),
        }
    results["ratio_regex_over_medspacy"] = (
        results["regex"]["reports_per_s"] / results["medspacy"]["reports_per_s"]  # type: ignore[index]
    )
    results["mutual_cell_agreement_all_reports"] = mutual_agreement(
        sides["medspacy"](reports), sides["regex"](reports), codes
    )
    return results


# --- the development set, before and after ---------------------------------------------------

DEV_SET = REPO / "tests" / "data" / "medeval-labeller-dev.jsonl"
FROZEN = REPO / "tests" / "data" / "medeval-labeller-families-frozen.jsonl"
NUMBER_OF: dict[str, float | None] = {"positive": 1.0, "negative": 0.0, "unknown": -1.0, "absent": None}
VALUES = ("1.0", "0.0", "-1.0", "")
SHOWN = {"1.0": "1", "0.0": "0", "-1.0": "-1", "": "blank"}


def dev_items(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


WORKER = Path(__file__).resolve().parent / "_labeller_worker.py"


def run_worker(src: Path, args: argparse.Namespace) -> dict[str, object]:
    command = [
        sys.executable, str(WORKER), "--dev-set", str(args.dev_set),
        "--chexpert", str(args.chexpert), "--dev-repeat", str(args.dev_repeat), "--rounds", str(args.rounds),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"worker for {src} failed:\n{done.stderr}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def dev_agreement(
    items: list[dict[str, object]], labels: list[list[str]], codes: Sequence[str]
) -> dict[str, object]:
    """Cells, whole reports, per observation and gold -> predicted counts."""
    per_code = {c: 0 for c in codes}
    confusion = {f"{SHOWN[g]}->{SHOWN[p]}": 0 for g in VALUES for p in VALUES}
    exact = 0
    wrong: list[str] = []
    for item, row in zip(items, labels, strict=True):
        gold = item["labels"]
        assert isinstance(gold, dict)
        misses = []
        for code, predicted in zip(codes, row, strict=True):
            g = gold[code]
            expected = "" if g is None else f"{float(g):.1f}"
            confusion[f"{SHOWN[expected]}->{SHOWN[predicted]}"] += 1
            if predicted == expected:
                per_code[code] += 1
            else:
                misses.append(f"{code} {SHOWN[expected]}->{SHOWN[predicted]}")
        exact += not misses
        if misses:
            wrong.append(f"{item['id']}: {', '.join(misses)}")
    cells = len(items) * len(codes)
    right = sum(per_code.values())
    return {
        "reports": len(items), "cells": cells, "cells_right": right, "cell_agreement": right / cells,
        "reports_exact": exact, "report_agreement": exact / len(items),
        "per_observation": {c: n / len(items) for c, n in per_code.items()},
        "confusion": confusion, "wrong": wrong,
    }  # fmt: skip


def run_dev(args: argparse.Namespace) -> dict[str, object]:
    """Each side's worker --alternations times, in alternating order, so that both meet the same
    load; the rounds of all its runs are pooled and their median timed."""
    items = dev_items(args.dev_set)
    sides = {"after": REPO / "src"}
    if args.before is not None:
        sides = {"before": args.before / "src", **sides}
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in sides}
    for k in range(args.alternations):
        for name in list(sides) if k % 2 == 0 else list(reversed(sides)):
            runs[name].append(run_worker(sides[name], args))
    shown = args.dev_set.resolve()
    name = str(shown.relative_to(REPO)) if shown.is_relative_to(REPO) else str(shown)
    results: dict[str, object] = {"dev_set": name, "items": len(items)}
    for name, outs in runs.items():
        out = dict(outs[0])
        codes, labels = out.pop("codes"), out.pop("labels")
        assert isinstance(codes, list) and isinstance(labels, list)
        assert all(o["labels"] == labels for o in outs), f"{name}: labels differ between runs"
        times = [t for o in outs for t in o["times_s"]]  # type: ignore[attr-defined]
        out.update(times_s=times, median_s=statistics.median(times))
        out["reports_per_s"] = int(str(out["timed_reports"])) / statistics.median(times)
        out["agreement"] = dev_agreement(items, labels, codes)
        results[name] = out
    return results


def show_dev(results: dict[str, Any]) -> None:
    names = [n for n in ("before", "after") if n in results]
    sides: dict[str, Any] = {n: results[n] for n in names}
    first = sides[names[0]]
    agree = {n: sides[n]["agreement"] for n in names}
    print(
        f"{results['items']} dev-set reports ({results['dev_set']}); timed on {first['timed_reports']} "
        f"reports (the dev set repeated), median of {len(first['times_s'])} rounds"
    )
    print(f"{'':<28}" + "".join(f"{n:>13}" for n in names))
    rows = {
        "cells right": {n: f"{a['cells_right']}/{a['cells']}" for n, a in agree.items()},
        "cells right %": {n: f"{a['cell_agreement'] * 100:.2f}%" for n, a in agree.items()},
        "reports exact": {n: f"{a['reports_exact']}/{a['reports']}" for n, a in agree.items()},
        "reports exact %": {n: f"{a['report_agreement'] * 100:.1f}%" for n, a in agree.items()},
        "reports/s (median)": {n: f"{sides[n]['reports_per_s']:.0f}" for n in names},
    }
    for title, cells in rows.items():
        print(f"{title:<28}" + "".join(f"{cells[n]:>13}" for n in names))
    print("agreement per observation")
    for code in first["agreement"]["per_observation"]:
        print(f"  {code:<26}" + "".join(f"{agree[n]['per_observation'][code] * 100:>9.1f}%" for n in names))
    print("gold -> predicted, cells that disagree")
    keys = sorted(
        {k for n in names for k, v in agree[n]["confusion"].items() if v and len(set(k.split("->"))) == 2}
    )
    for key in keys:
        print(f"  {key:<26}" + "".join(f"{agree[n]['confusion'][key]:>10}" for n in names))
    for n in names:
        wrong = agree[n]["wrong"]
        print(f"{n}: {len(wrong)} reports not exact" + (":" if wrong else ""))
        for line in wrong:
            print(f"  {line}")


# --- the generated phrasing families -----------------------------------------------------------


def families_file(per_family: int, seed: int, folder: Path) -> Path:
    """The families' fixed sample written as a dev set (style: the family), for the workers."""
    sys.path.insert(0, str(REPO))
    from tests.labeller_families import sample

    path = folder / f"families-{per_family}-{seed}.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i, v in enumerate(sample(per_family=per_family, seed=seed)):
            labels = {code: NUMBER_OF[value] for code, value in v.expected.items()}
            row = {"id": f"{v.family}-{i}", "style": v.family, "report": v.report, "labels": labels}
            f.write(json.dumps(row) + "\n")
    return path


def per_family(results: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """Side -> family -> [variants exactly right, variants]."""
    items = dev_items(Path(results["dev_set_path"]))
    out: dict[str, dict[str, list[int]]] = {}
    for side in ("before", "after"):
        if side not in results:
            continue
        wrong = {line.split(":")[0] for line in results[side]["agreement"]["wrong"]}
        counts: dict[str, list[int]] = {}
        for item in items:
            n = counts.setdefault(str(item["style"]), [0, 0])
            n[0] += str(item["id"]) not in wrong
            n[1] += 1
        out[side] = counts
    return out


def show_families(results: dict[str, Any]) -> None:
    counts = results["families"]
    names = list(counts)
    print(f"generated phrasing families (tests/labeller_families.py), seed {results['seed']}")
    print(f"{'family':<22}" + "".join(f"{n:>14}" for n in names))
    for family in counts[names[-1]]:
        print(f"{family:<22}" + "".join(f"{'{}/{}'.format(*counts[n][family]):>14}" for n in names))
    totals = {n: [sum(c[i] for c in counts[n].values()) for i in (0, 1)] for n in names}
    print(f"{'all':<22}" + "".join(f"{'{}/{}'.format(*totals[n]):>14}" for n in names))


# --- the CheXpert labeler's public sample ---------------------------------------------------------


def run_samples(args: argparse.Namespace) -> dict[str, object]:
    """This labeller on the labeler's 4 sample reports, per observation against its own labels."""
    public = read_reports(args.chexpert / "sample_reports.csv")
    with (args.chexpert / "labeled_reports.csv").open(newline="", encoding="utf-8") as f:
        gold = list(csv.reader(f))[1:]
    labeller = Labeller("chest x-ray", chexpert=args.chexpert)
    labels = labeller.label(public)
    per_code = {
        code: sum(CHEXPERT_NUMBERS[lab[code]] == row[i + 1] for lab, row in zip(labels, gold, strict=True))
        for i, code in enumerate(labeller.codes)
    }
    return {"reports": len(public), "per_observation": per_code, **agreement(labels, gold, labeller.codes)}


def show_samples(results: dict[str, Any]) -> None:
    n = results["reports"]
    print(f"the CheXpert labeler's {n} sample reports vs its labeled_reports.csv, per observation")
    for code, right in results["per_observation"].items():
        print(f"  {code:<28}{right}/{n}")
    print(f"cells {results['cells_agree']}/{results['cells']}, reports exact {results['rows_exact']}/{n}")


def environment() -> dict[str, object]:
    versions = {p: metadata.version(p) for p in ("spacy", "medspacy", "numpy")}
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        **versions,
    }


def show(results: dict[str, object]) -> None:
    print(
        f"{results['reports']} reports ({results['public_reports']} public, "
        f"{results['synthetic_reports']} synthetic), {results['mean_words']:.1f} words each on average; "
        f"median of {results['rounds']} rounds"
    )
    print(f"medspaCy pipeline built in {results['medspacy_build_s']:.2f} s (untimed below)")
    print(f"{'labeller':<10} {'median s':>9} {'reports/s':>10} {'gold cells':>11} {'rows exact':>10}")
    for name in ("medspacy", "regex"):
        side = results[name]
        assert isinstance(side, dict)
        g = side["gold"]
        print(
            f"{name:<10} {side['median_s']:>9.3f} {side['reports_per_s']:>10.1f} "
            f"{g['cells_agree']:>5}/{g['cells']:<5} {g['rows_exact']:>7}/4"
        )
    print(f"regex / medspaCy reports/s: {results['ratio_regex_over_medspacy']:.2f}x")
    print(
        "medspaCy vs regex, cells agreeing over all reports: "
        f"{results['mutual_cell_agreement_all_reports']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chexpert", type=Path, default=CHEXPERT, help="the CheXpert labeler's folder")
    parser.add_argument("--repeat", type=int, default=25, help="times the 4 public reports are repeated")
    parser.add_argument("--synthetic", type=int, default=400, help="synthetic chest reports added")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--window", type=int, default=5, help="regex labeller: words looked back for a cue")
    parser.add_argument("--dev", action="store_true", help="measure on the development set instead")
    parser.add_argument("--frozen", action="store_true", help="measure on the frozen part (as --dev)")
    parser.add_argument("--families", action="store_true", help="count the generated families right")
    parser.add_argument("--per-family", type=int, default=200, help="families: variants drawn per family")
    parser.add_argument("--seed", type=int, default=0, help="families: the sample's seed")
    parser.add_argument("--samples", action="store_true", help="the labeler's 4 samples")
    parser.add_argument("--dev-set", type=Path, default=DEV_SET, help="the development set (JSONL)")
    parser.add_argument("--dev-repeat", type=int, default=4, help="times the dev set is repeated when timed")
    parser.add_argument("--before", type=Path, help="an older checkout to compare with (its src/ is used)")
    parser.add_argument("--alternations", type=int, default=4, help="dev: runs of each side, alternating")
    args = parser.parse_args()
    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.frozen:
        args.dev, args.dev_set = True, FROZEN
    if args.families:
        args.dev, args.dev_set = True, families_file(args.per_family, args.seed, out_dir)
    if args.samples:
        results = run_samples(args)
        show_samples(results)
        stem = "medeval_labeller-samples"
    else:
        results = run_dev(args) if args.dev else run(args)
        results["environment"] = environment()
        (show_dev if args.dev else show)(results)
        stem = "medeval_labeller-dev" if args.dev else "medeval_labeller"
    if args.families:
        results.update(dev_set_path=str(args.dev_set), seed=args.seed)
        results["families"] = per_family(results)
        show_families(results)
        stem = "medeval_labeller-families"
    if args.frozen:
        stem = "medeval_labeller-frozen"
    out = out_dir / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
