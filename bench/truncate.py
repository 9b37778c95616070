"""How fast is token-exact truncation of a very long record (MedAlign's longest EHR is ~496k tokens)?

Builds a synthetic MedAlign-style XML record of about 500,000 SmolLM2 tokens (visits, days,
measurements, conditions, drugs, notes with varying values), then keeps its newest 32,000 tokens
three ways, for each budget tokenizer, in the same process:

  clinieval   clinieval.context.fit.keep_recent: tokenise once (blocks on threads), slice the ids,
              decode the kept slice, map it to an offset of the original text, re-encode only the
              kept text to verify
  stock-once  the same algorithm through the libraries' stock calls (llama-cpp-python's
              Llama.tokenize / Llama.detokenize, tiktoken's single-threaded encode_ordinary)
  naive       binary search over the cut's character offset, re-tokenising the whole candidate
              suffix at every step (clinieval's encoder, so only the algorithm differs)
  per-line    tokenise line by line from the end and keep whole lines while the sum fits (not
              token-exact: a sum of line counts is not the count of their concatenation)

Every kept text is checked to re-tokenise within the budget. Prints a table of median seconds.

    .venv/bin/python bench/truncate.py --tokens 500000 --budget 32000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from clinieval.context.fit import keep_recent
from clinieval.context.tokenizers import LlamaCppTokenizer, TiktokenTokenizer, Tokenizer, tokenizer_from_spec

SPECS = ("llamacpp:smollm2-135m-instruct", "tiktoken:cl100k_base")

LABS = [
    ("LOINC/8462-4", "Diastolic blood pressure", "mm[Hg]", 50, 110),
    ("LOINC/8480-6", "Systolic blood pressure", "mm[Hg]", 90, 180),
    ("LOINC/8867-4", "Heart rate", "/min", 45, 130),
    ("LOINC/2345-7", "Glucose [Mass/volume] in Serum or Plasma", "mg/dL", 60, 300),
    ("LOINC/2160-0", "Creatinine [Mass/volume] in Serum or Plasma", "mg/dL", 1, 4),
    ("LOINC/718-7", "Hemoglobin [Mass/volume] in Blood", "g/dL", 7, 17),
]
CONDITIONS = [
    "[ICD10CM/I63.5] Cerebral infarction due to unspecified occlusion or stenosis of cerebral arteries",
    "[ICD10CM/E11.9] Type 2 diabetes mellitus without complications",
    "[ICD10CM/I10] Essential (primary) hypertension",
    "[ICD10CM/N18.3] Chronic kidney disease, stage 3 (moderate)",
]
DRUGS = [
    "[RxNorm/197361] amlodipine 5 MG Oral Tablet",
    "[RxNorm/860975] metformin hydrochloride 500 MG Oral Tablet",
    "[RxNorm/308136] atorvastatin 40 MG Oral Tablet",
]
NOTE = (
    "Patient seen in follow-up. Reports {s} episodes of dizziness since last visit, no chest pain, "
    "no focal weakness. Exam: alert, oriented, BP {bp}, strength 5/5 bilaterally. Plan: continue "
    "current regimen, repeat labs in {w} weeks, return precautions reviewed."
)


def synthetic_record(target_tokens: int, tok: Tokenizer, seed: int = 0) -> str:
    rng = random.Random(seed)
    out = ["<record>"]
    visit = 0
    approx = 0
    while approx < target_tokens:
        visit += 1
        day = f"{(visit % 12) + 1:02d}/{(visit % 28) + 1:02d}/{2000 + visit // 300}"
        lines = [f'<visit type="Office Visit" start="{day} 09:00">', f'<day start="{day} 09:00">']
        for i in range(rng.randint(4, 12)):
            t = f"{day} {9 + i // 6:02d}:{(i * 7) % 60:02d} AM"
            kind = rng.random()
            if kind < 0.55:
                code, name, unit, lo, hi = rng.choice(LABS)
                lines += [
                    f'<measurement start="{t}">',
                    f"<code>[{code}] {name} {rng.randint(lo, hi)} {unit}</code>",
                    "</measurement>",
                ]
            elif kind < 0.75:
                lines += [f'<condition_occurrence start="{t}">', f"<code>{rng.choice(CONDITIONS)}</code>"]
                lines.append("</condition_occurrence>")
            elif kind < 0.92:
                lines += [
                    f'<drug_exposure start="{t}">',
                    f"<code>{rng.choice(DRUGS)}</code>",
                    "</drug_exposure>",
                ]
            else:
                text = NOTE.format(
                    s=rng.randint(0, 5), bp=f"{rng.randint(100, 170)}/{rng.randint(60, 100)}", w=4
                )
                lines += [f'<note type="progress note" start="{t}">', text, "</note>"]
        lines += ["</day>", "</visit>"]
        block = "\n".join(lines) + "\n"
        out.append(block)
        if visit % 200 == 0 or approx == 0:
            approx = tok.count("".join(out))
        else:
            approx += len(block) // 3
    return "".join(out) + "</record>\n"


def naive(text: str, tok: Tokenizer, budget: int) -> str:
    """Binary search on the cut's character offset, re-tokenising the whole suffix each step."""
    lo, hi = 0, len(text)  # text[hi:] fits; find the smallest such offset
    while lo < hi:
        mid = (lo + hi) // 2
        if tok.count(text[mid:]) <= budget:
            hi = mid
        else:
            lo = mid + 1
    return text[lo:]


def per_line(text: str, tok: Tokenizer, budget: int) -> str:
    """Whole lines from the end while the sum of their separate counts fits."""
    lines = text.splitlines(keepends=True)
    total, i = 0, len(lines)
    while i > 0:
        n = tok.count(lines[i - 1])
        if total + n > budget:
            break
        total += n
        i -= 1
    return "".join(lines[i:])


def stock_once(text: str, tok: Tokenizer, budget: int) -> str:
    """Tokenise once and slice, through the libraries' stock Python calls."""
    if isinstance(tok, LlamaCppTokenizer):
        llm: Any = tok._llm
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        k = budget
        while True:
            piece = bytes(llm.detokenize(ids[len(ids) - k :])).decode("utf-8", "replace")
            if text.endswith(piece):
                kept = text[len(text) - len(piece) :]
                n = len(llm.tokenize(kept.encode("utf-8"), add_bos=False, special=False))
                if n <= budget:
                    return kept
                k -= n - budget
            else:
                k -= 1
    assert isinstance(tok, TiktokenTokenizer)
    enc: Any = tok._enc
    ids = enc.encode_ordinary(text)
    k = budget
    while True:
        piece = enc.decode(ids[len(ids) - k :], errors="replace")
        if text.endswith(piece):
            kept = text[len(text) - len(piece) :]
            n = len(enc.encode_ordinary(kept))
            if n <= budget:
                return kept
            k -= n - budget
        else:
            k -= 1


def timed(fn: Callable[[], str], rounds: int) -> tuple[float, str]:
    times, out = [], ""
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=500_000, help="record length in SmolLM2 tokens")
    ap.add_argument("--budget", type=int, default=32_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--naive-rounds", type=int, default=1)
    args = ap.parse_args()

    smol = tokenizer_from_spec(SPECS[0])
    text = synthetic_record(args.tokens, smol)
    print(
        f"record: {len(text):,} characters; {platform.machine()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}"
    )
    rows = []
    for spec in SPECS:
        tok = tokenizer_from_spec(spec)
        n = tok.count(text)
        methods: list[tuple[str, Callable[[], str], int]] = [
            ("clinieval", lambda tok=tok: keep_recent(text, tok, args.budget)[0], args.rounds),
            ("stock-once", lambda tok=tok: stock_once(text, tok, args.budget), args.rounds),
            ("naive", lambda tok=tok: naive(text, tok, args.budget), args.naive_rounds),
            ("per-line", lambda tok=tok: per_line(text, tok, args.budget), args.naive_rounds),
        ]
        for name, fn, rounds in methods:
            secs, kept = timed(fn, rounds)
            kept_n = tok.count(kept)
            assert kept_n <= args.budget and text.endswith(kept), (spec, name, kept_n)
            rows.append((spec, n, name, secs, kept_n))
    print()
    print(f"| tokenizer | record tokens | method | seconds (median) | kept tokens (budget {args.budget:,}) |")
    print("|---|---:|---|---:|---:|")
    for spec, n, name, secs, kept_n in rows:
        print(f"| {spec} | {n:,} | {name} | {secs:.3f} | {kept_n:,} |")


if __name__ == "__main__":
    main()
