"""The shared first steps of the scorers (AnswerScorer, LoglikScorer): what every scorer of a
generated answer or of log-likelihoods inherits, checked on the real scorers that use them."""

from __future__ import annotations

import pytest

from clinieval.benchmarks.ehrnoteqa.scoring import LetterExtraction, OptionLoglik
from clinieval.errors import UserError
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.keyfacts import KeyFacts, KeyFactsF1
from clinieval.scoring.scorers import Answered, ChoiceExtraction, ChoiceLoglik, ExactMatch
from clinieval.types import LoglikOutput, ModelOutput, Sample

SAMPLE = Sample(id="s1", input="q", choices=("yes", "no"), target="yes", metadata={"answer": "A"})
ANSWER_SCORERS = [Answered(), ChoiceExtraction(), ExactMatch(), LetterExtraction()]
LOGLIK_SCORERS = [ChoiceLoglik(), OptionLoglik("letter")]


def _record(
    output: ModelOutput | None = None, loglik: LoglikOutput | None = None, sample: Sample = SAMPLE
) -> SampleRecord:
    return SampleRecord(sample=sample, repeat=0, messages=[], output=output, loglik=loglik)


@pytest.mark.parametrize("scorer", ANSWER_SCORERS, ids=lambda s: s.name)
def test_a_failed_call_is_unscored_with_its_kind(scorer: Answered) -> None:
    score = scorer.score(_record(ModelOutput.failure("timeout", "took too long")))
    assert score.value is None
    assert score.metadata == {"error_kind": "timeout"}
    assert score.explanation == "took too long"


@pytest.mark.parametrize("scorer", ANSWER_SCORERS, ids=lambda s: s.name)
def test_a_run_without_generation_is_a_user_error(scorer: Answered) -> None:
    with pytest.raises(UserError, match=rf"^scorer {scorer.name}: the run holds no generated text"):
        scorer.score(_record())


def test_a_successful_answer_reaches_score_text() -> None:
    assert Answered().score(_record(ModelOutput(text="fever"))).value == 1.0
    assert Answered().score(_record(ModelOutput(text="  "))).value == 0.0
    assert ExactMatch().score(_record(ModelOutput(text="Yes."))).value == 1.0


@pytest.mark.parametrize("scorer", [KeyFacts(), KeyFactsF1()], ids=lambda s: s.name)
def test_key_facts_refuse_a_set_without_keys_even_on_a_failed_call(scorer: KeyFacts) -> None:
    failed = _record(ModelOutput.failure("timeout", "x"), sample=Sample(id="k", input="q"))
    with pytest.raises(UserError, match="has no answer_keys"):
        scorer.score(failed)
    keyed = Sample(id="k", input="q", metadata={"answer_keys": ["fever"]})
    assert scorer.score(_record(ModelOutput.failure("timeout", "x"), sample=keyed)).value is None
    assert scorer.score(_record(ModelOutput(text="fever"), sample=keyed)).value == 1.0


@pytest.mark.parametrize(
    ("scorer", "fix"),
    [
        (ChoiceLoglik(), "run it with a log-likelihood scorer"),
        (OptionLoglik("letter"), "run it without --no-loglik"),
    ],
    ids=["choice_loglik", "loglik_letter"],
)
def test_loglik_scorers_share_their_first_step(scorer: ChoiceLoglik, fix: str) -> None:
    with pytest.raises(UserError) as e:
        scorer.score(_record())
    assert str(e.value) == f"scorer {scorer.name}: the run holds no log-likelihoods; {fix}"
    failed = scorer.score(_record(loglik=LoglikOutput(error_kind="server_error", error_message="500")))
    assert (failed.value, failed.metadata, failed.explanation) == (
        None,
        {"error_kind": "server_error"},
        "500",
    )


def test_successful_logliks_reach_score_logliks() -> None:
    assert ChoiceLoglik().score(_record(loglik=LoglikOutput(logliks=[-1.0, -2.0]))).value == 1.0
    four = LoglikOutput(logliks=[-3.0, -1.0, -1.0, -3.0])  # letters A, B then texts yes, no
    assert OptionLoglik("letter").score(_record(loglik=four)).answer == "B"
    assert OptionLoglik("text").score(_record(loglik=four)).answer == "A"
