"""Scorers, statistics, serialisation and the cache, against hand-computed values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from clinieval.analysis.uncertainty import bootstrap_ci
from clinieval.errors import UserError
from clinieval.records.cache import RequestCache, request_key
from clinieval.records.sample_record import SampleRecord
from clinieval.records.summary import summarize
from clinieval.scoring.scorers import ChoiceExtraction, ChoiceLoglik, extract_choice
from clinieval.types import ErrorKind, LoglikOutput, Message, ModelOutput, Sample, Score, TokenLogprob

CHOICES = ("yes", "no", "maybe")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes.", "yes"),
        ("The answer is: maybe, but no data", "maybe"),
        ("No, it does not. Answer: yes", "yes"),
        ("nobody knows; I'd say no", "no"),
        ("Maybe", "maybe"),
        ("It is unclear.", None),
        ("yesterday", None),
        ("No. Actually, yes: the trial shows fewer events.", "yes"),  # a stated revision (was "no")
        ("Maybe. On reflection: no, the effect was not significant.", "no"),  # (was "maybe")
        ("Yes. No.", None),  # an unexplained conflict
    ],
)
def test_extract_choice(text: str, expected: str | None) -> None:
    assert extract_choice(text, CHOICES) == expected


def record(
    output: ModelOutput | None = None, loglik: LoglikOutput | None = None, sid: str = "a", target: str = "no"
) -> SampleRecord:
    sample = Sample(id=sid, input="q", choices=CHOICES, target=target)
    return SampleRecord(
        sample=sample, repeat=0, messages=[Message("user", "q")], output=output, loglik=loglik
    )


def test_choice_scorers_and_failures_are_not_wrong_answers() -> None:
    assert ChoiceExtraction().score(record(ModelOutput(text="No."))).value == 1.0
    unparsed = ChoiceExtraction().score(record(ModelOutput(text="??")))
    assert unparsed.value == 0.0 and unparsed.metadata["unparsed"]
    failed = ChoiceExtraction().score(record(ModelOutput.failure(ErrorKind.CONTENT_FILTER, "filtered")))
    assert failed.value is None and failed.metadata["error_kind"] == ErrorKind.CONTENT_FILTER
    ll = LoglikOutput(logliks=[-3.0, -1.0, -6.0], token_counts=[1, 1, 2])
    s = ChoiceLoglik().score(record(loglik=ll))
    assert s.answer == "no" and s.value == 1.0
    p = math.exp(-1) / (math.exp(-3) + math.exp(-1) + math.exp(-6))
    assert s.metadata["p_answer"] == pytest.approx(p)
    # Per-character normalisation flips the choice: raw best is "no" (-2), but per character
    # "maybe" -4/5 = -0.8 beats "no" -2/2 = -1.0 and "yes" -3/3 = -1.0.
    flip = LoglikOutput(logliks=[-3.0, -2.0, -4.0])
    assert ChoiceLoglik().score(record(loglik=flip)).answer == "no"
    assert ChoiceLoglik(normalize=True).score(record(loglik=flip)).answer == "maybe"


def test_bootstrap_ci_brackets_the_mean_and_matches_numpy() -> None:
    values = [1.0] * 30 + [0.0] * 10
    lo, hi = bootstrap_ci(values, resamples=4000, seed=1)
    assert lo < 0.75 < hi
    # Analytic normal approximation: sd of the mean = sqrt(p(1-p)/n) = 0.0685 -> +-0.134.
    assert hi - lo == pytest.approx(2 * 1.96 * math.sqrt(0.75 * 0.25 / 40), abs=0.03)
    assert bootstrap_ci([0.5, 0.5]) == (0.5, 0.5)
    with pytest.raises(UserError, match="empty"):
        bootstrap_ci([])


def test_summary_shows_both_views_and_counts_errors_by_kind() -> None:
    recs = [
        record(ModelOutput(text="no"), sid="a"),
        record(ModelOutput(text="yes"), sid="b"),
        record(ModelOutput(text="no"), sid="c"),
        record(ModelOutput.failure(ErrorKind.CONTENT_FILTER, "x"), sid="d"),
    ]
    for r in recs:
        r.scores = {"choice_extract": ChoiceExtraction().score(r)}
    [s] = summarize(recs, ["choice_extract"])
    assert (s.samples, s.scored) == (4, 3)
    assert s.mean == pytest.approx(2 / 3)
    assert s.mean_failures_as_wrong == pytest.approx(2 / 4)
    assert s.errors == {"content_filter": 1}


def test_repeats_are_averaged_per_sample_before_the_ci() -> None:
    recs = []
    for rep, text in enumerate(["no", "yes", "no", "no"]):
        r = record(ModelOutput(text=text), sid="a")
        r.repeat = rep
        r.scores = {"x": ChoiceExtraction().score(r)}
        recs.append(r)
    [s] = summarize(recs, ["x"])
    assert s.mean == 0.75 and s.ci_low == s.ci_high == 0.75  # one sample: no spread to resample


def test_records_round_trip() -> None:
    r = record(
        ModelOutput(text="no", prompt_tokens=3, logprobs=[TokenLogprob("no", -0.1)]),
        LoglikOutput(logliks=[-1.0, -2.0, -3.0], token_counts=[1, 1, 1]),
    )
    r.scores = {"s": Score(0.5, "no", "why", {"k": 1})}
    back = SampleRecord.from_dict(r.to_dict())
    assert back.to_dict() == r.to_dict()
    failed = ModelOutput.failure(ErrorKind.TIMEOUT, "slow")
    assert ModelOutput.from_dict(failed.to_dict()).error_kind is ErrorKind.TIMEOUT


def test_cache_keys_and_persistence(tmp_path: Path) -> None:
    model = {"backend": "x"}
    k0 = request_key("generate", model, {"t": 0}, "prompt", 0)
    assert k0 == request_key("generate", {"backend": "x"}, {"t": 0}, "prompt", 0)
    assert k0 != request_key("generate", model, {"t": 0}, "prompt", 1)  # repeats are distinct
    assert k0 != request_key("generate", model, {"t": 0.5}, "prompt", 0)
    assert k0 != request_key("generate", model, {"t": 0}, "prompt ", 0)
    cache = RequestCache(tmp_path / "c.sqlite")
    cache.put(k0, "generate", {"text": "é"})
    cache.close()
    again = RequestCache(tmp_path / "c.sqlite")
    assert again.get(k0) == {"text": "é"} and again.get("missing") is None
    assert (again.hits, again.misses, len(again)) == (1, 1, 1)
    assert again._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _key_as_written_before(kind: str, model: object, settings: object, prompt: object, repeat: int) -> str:
    """request_key as it was before orjson wrote the prompt: caches from then must still match."""
    import hashlib
    import json

    canonical = json.dumps(
        {"kind": kind, "model": model, "settings": settings, "prompt": prompt, "repeat": repeat},
        sort_keys=True, ensure_ascii=False, separators=(",", ":"),
    )  # fmt: skip
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    "prompt",
    [
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": 'Dose?\n\t"5 mg" \\ é 漢 \u2028 \x00 \x7f 🫀'},
        ],
        "Answer: yes",
        [{"content": "x", "role": "user", "name": "dr"}],
        [],
        {"odd": [1, 2.5, 1e-07, None, True]},  # 1e-07: json spells it so, orjson 1e-7
        [{"role": "user", "content": "x", "weight": 0.5, "n": 2**70, "big": 1e300, "nan": float("nan")}],
        ("a", "tuple"),  # not JSON's own type: json writes a list
    ],
)
def test_request_keys_are_the_same_as_before_the_faster_canonical_form(prompt: object) -> None:
    """The cache keys on disk must keep matching: every value orjson writes must be the bytes
    json wrote, and anything else must still go through json."""
    model = {"backend": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m", "n": 1e-07}
    settings = {"temperature": 0.7, "max_tokens": 16, "stop": ["\n\n"], "top_p": 1.0, "seed": 0, "m": -0.0}
    assert request_key("generate", model, settings, prompt, 3) == _key_as_written_before(
        "generate", model, settings, prompt, 3
    )


def test_floats_orjson_writes_for_request_keys_are_spelled_as_json_spells_them() -> None:
    import json
    import random
    import struct

    import orjson

    from clinieval.records.cache import _same_in_orjson

    rng = random.Random(17)
    floats = [rng.random() * 10 ** rng.uniform(-4, 15) for _ in range(100_000)]
    floats += [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(100_000)]
    floats += [0.0, -0.0, 1e-4, 1e15, 9.999999999999999e14, 1e-07, 1e16, 0.1 + 0.2]
    taken = [x for x in floats if _same_in_orjson(x)]
    assert len(taken) > 100_000 and 1e-07 not in taken and 1e16 not in taken
    assert [orjson.dumps(x) for x in taken] == [json.dumps(x).encode() for x in taken]
