"""Optional learned metrics: the not-available paths for real, input errors, and the adapters' glue.

COMET, BLEURT, UniEval and LENS are not installed here and no checkpoint exists offline, so the
"package missing" and "no checkpoint" results below are the real ones. To exercise each adapter's
call into its package (data layout, options, reading the scores back) the last tests put small
stand-in modules on ``sys.path`` that follow the packages' documented API; they check clinieval's
glue, not the metrics, and loading a real checkpoint remains untested here.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from clinieval.errors import UserError
from clinieval.scoring.learned import (
    NotAvailable,
    learned_metric,
    learned_metric_names,
)
from clinieval.scoring.text.base import MetricResult

PREDS = ["The patient has a fever.", "Started metoprolol."]
REFS = ["Patient is febrile.", "Metoprolol was started."]
SRCS = ["Note: temperature 39.1 C, cough.", "Plan: metoprolol 25 mg twice daily."]
PACKAGES = {"comet": ["comet"], "bleurt": ["bleurt_pytorch", "bleurt"], "lens": ["lens"]}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "checkpoint"
    path.mkdir()
    (path / "model.ckpt").write_bytes(b"not a real checkpoint")
    return path


def _inputs() -> dict[str, object]:
    return {"predictions": PREDS, "references": REFS, "sources": SRCS}


def test_names_and_unknown_metric() -> None:
    assert learned_metric_names() == ("comet", "bleurt", "unieval", "lens")
    with pytest.raises(UserError, match=r"^unknown learned metric 'bartscore'; choose from comet, bleurt"):
        learned_metric("bartscore")
    with pytest.raises(UserError, match=r"comet: unknown option\(s\) gpus; valid: batch_size"):
        learned_metric("comet", gpus=1)


@pytest.mark.parametrize("name", ["comet", "bleurt", "unieval", "lens"])
def test_no_checkpoint_is_not_available(name: str) -> None:
    metric = learned_metric(name)
    outcome = metric.compute(**_inputs())  # type: ignore[arg-type]
    assert isinstance(outcome, NotAvailable)
    assert outcome.metric == name
    assert outcome.reason.startswith("no checkpoint given; pass checkpoint=PATH")
    assert str(outcome).startswith(f"{name}: not available (no checkpoint given")
    assert "\n" not in str(outcome)


@pytest.mark.parametrize("name", ["comet", "bleurt", "unieval", "lens"])
def test_missing_checkpoint_path_is_a_user_error(name: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=rf"^{name}: checkpoint .*nowhere does not exist$"):
        learned_metric(name, checkpoint=str(tmp_path / "nowhere"))


@pytest.mark.parametrize("name", ["comet", "bleurt", "lens"])
def test_missing_package_is_not_available(name: str, checkpoint: Path) -> None:
    if any(_installed(m) for m in PACKAGES[name]):
        pytest.skip(f"{name}'s package is installed here; this test covers the missing-package path")
    outcome = learned_metric(name, checkpoint=str(checkpoint)).compute(**_inputs())  # type: ignore[arg-type]
    assert isinstance(outcome, NotAvailable)
    assert "is not installed" in outcome.reason
    assert learned_metric(name, checkpoint=str(checkpoint)).availability() == outcome


def test_unieval_without_code_checkout_is_not_available(checkpoint: Path) -> None:
    outcome = learned_metric("unieval", checkpoint=str(checkpoint)).compute(PREDS, REFS, SRCS)
    assert isinstance(outcome, NotAvailable)
    assert "pass repo=PATH" in outcome.reason


def test_input_errors(checkpoint: Path, tmp_path: Path) -> None:
    comet = learned_metric("comet", checkpoint=str(checkpoint))
    with pytest.raises(UserError, match="comet: needs the source texts"):
        comet.compute(PREDS, REFS)
    with pytest.raises(UserError, match="comet: 2 predictions but 1 sources"):
        comet.compute(PREDS, REFS, SRCS[:1])
    with pytest.raises(UserError, match="comet: 2 predictions but 3 references"):
        comet.compute(PREDS, [*REFS, "x"], SRCS)
    with pytest.raises(UserError, match="comet: takes exactly one reference"):
        comet.compute(PREDS, [REFS, REFS], SRCS)
    with pytest.raises(UserError, match="bleurt: needs references"):
        learned_metric("bleurt").compute(PREDS)
    with pytest.raises(UserError, match="unieval: relevance needs references"):
        learned_metric("unieval").compute(PREDS, sources=SRCS)
    with pytest.raises(UserError, match="unknown dimension"):
        learned_metric("unieval", dimensions=("wit",))
    with pytest.raises(UserError, match="is not a UniEval checkout"):
        learned_metric("unieval", repo=str(tmp_path))
    with pytest.raises(UserError, match="batch_size must be >= 1"):
        learned_metric("lens", batch_size=0)
    with pytest.raises(UserError, match="prediction 1 is NoneType"):
        learned_metric("lens").compute(["a", None], REFS, SRCS)  # type: ignore[list-item]


# --------------------------------------------------------------------------------------------
# Glue, against stand-ins that follow each package's documented API


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body), encoding="utf-8")


@pytest.fixture
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    names = (
        "comet",
        "bleurt",
        "bleurt.score",
        "lens",
        "metric",
        "metric.evaluator",
        "metric.scorer",
        "utils",
    )
    saved = {n: sys.modules.pop(n) for n in names if n in sys.modules}
    yield root
    for n in names:
        sys.modules.pop(n, None)
    sys.modules.update(saved)


def test_comet_glue(stand_ins: Path, checkpoint: Path) -> None:
    _write(
        stand_ins,
        {
            "comet/__init__.py": """
                __version__ = "9.9"
                CALLS = []
                class _Out:
                    def __init__(self, scores):
                        self.scores = scores
                        self.system_score = sum(scores) / len(scores)
                class _Model:
                    def predict(self, samples, batch_size=16, gpus=1, progress_bar=True):
                        CALLS.append((samples, batch_size, gpus))
                        return _Out([0.25 + 0.5 * ("ref" in s) for s in samples])
                def load_from_checkpoint(path):
                    CALLS.append(path)
                    return _Model()
            """
        },
    )
    metric = learned_metric("comet", checkpoint=str(checkpoint), batch_size=4)
    outcome = metric.compute(PREDS, REFS, SRCS)
    assert isinstance(outcome, dict)
    result = outcome["comet"]
    assert isinstance(result, MetricResult)
    assert result.values == (0.75, 0.75)
    assert result.corpus == 0.75
    assert result.metadata["version"] == "9.9"
    calls = sys.modules["comet"].CALLS
    assert calls[0] == str(checkpoint)
    assert calls[1] == (
        [{"src": s, "mt": p, "ref": r} for s, p, r in zip(SRCS, PREDS, REFS, strict=True)],
        4,
        0,
    )
    # Reference-free (QE) use: no "ref" key.
    qe = metric.compute(PREDS, sources=SRCS)
    assert isinstance(qe, dict)
    assert qe["comet"].values == (0.25, 0.25)


def test_checkpoint_that_fails_to_load_is_not_available(stand_ins: Path, checkpoint: Path) -> None:
    _write(
        stand_ins,
        {"comet/__init__.py": "def load_from_checkpoint(path):\n    raise OSError('bad file\\nmore')\n"},
    )
    outcome = learned_metric("comet", checkpoint=str(checkpoint)).compute(PREDS, REFS, SRCS)
    assert isinstance(outcome, NotAvailable)
    assert outcome.reason.endswith("failed: OSError: bad file")


def test_non_finite_model_output_is_an_error(stand_ins: Path, checkpoint: Path) -> None:
    _write(
        stand_ins,
        {
            "bleurt/__init__.py": "",
            "bleurt/score.py": """
                class BleurtScorer:
                    def __init__(self, checkpoint):
                        pass
                    def score(self, references, candidates, batch_size=16):
                        return [float("nan") for _ in candidates]
            """,
        },
    )
    if _installed("bleurt_pytorch"):
        pytest.skip("bleurt-pytorch is installed and would be preferred over the stand-in")
    with pytest.raises(RuntimeError, match="non-finite score for item 0"):
        learned_metric("bleurt", checkpoint=str(checkpoint)).compute(PREDS, REFS)


def test_bleurt_tensorflow_glue_takes_best_reference(stand_ins: Path, checkpoint: Path) -> None:
    if _installed("bleurt_pytorch"):
        pytest.skip("bleurt-pytorch is installed and would be preferred over the stand-in")
    _write(
        stand_ins,
        {
            "bleurt/__init__.py": "",
            "bleurt/score.py": """
                class BleurtScorer:
                    def __init__(self, checkpoint):
                        self.checkpoint = checkpoint
                    def score(self, references, candidates, batch_size=16):
                        pairs = zip(references, candidates)
                        return [len(set(r.split()) & set(c.split())) / 10 for r, c in pairs]
            """,
        },
    )
    refs = [["no overlap", "The patient has"], ["Started metoprolol."]]
    outcome = learned_metric("bleurt", checkpoint=str(checkpoint)).compute(PREDS, refs)
    assert isinstance(outcome, dict)
    assert outcome["bleurt"].values == (0.3, 0.2)


def test_lens_glue(stand_ins: Path, checkpoint: Path) -> None:
    _write(
        stand_ins,
        {
            "lens/__init__.py": """
                class LENS:
                    def __init__(self, path, rescale=False):
                        self.rescale = rescale
                    def score(self, complex, simplified, references, batch_size=16, gpus=1):
                        assert gpus == 0
                        return [10.0 * len(refs) + (50.0 if self.rescale else 0.0) for refs in references]
            """
        },
    )
    outcome = learned_metric("lens", checkpoint=str(checkpoint)).compute(PREDS, [REFS, [REFS[1]]], SRCS)
    assert isinstance(outcome, dict)
    assert outcome["lens"].values == (70.0, 60.0)
    assert outcome["lens"].scale == 100.0


def test_wrong_lens_package_is_not_available(stand_ins: Path, checkpoint: Path) -> None:
    _write(stand_ins, {"lens/__init__.py": "def summary(df):\n    return df\n"})
    outcome = learned_metric("lens", checkpoint=str(checkpoint)).compute(PREDS, REFS, SRCS)
    assert isinstance(outcome, NotAvailable)
    assert "not lens-metric" in outcome.reason


def test_unieval_glue(stand_ins: Path, checkpoint: Path, tmp_path: Path) -> None:
    repo = tmp_path / "UniEval"
    _write(
        repo,
        {
            "metric/__init__.py": "",
            "metric/scorer.py": """
                class UniEvaluator:
                    def __init__(self, model_name_or_path, max_length=1024, device="cuda:0", cache_dir=None):
                        self.path = model_name_or_path
            """,
            "metric/evaluator.py": """
                class SumEvaluator:
                    def __init__(self, *args, **kwargs):
                        raise AssertionError("would load MingZhong/unieval-sum from the hub")
                    def evaluate(self, data, dims=None, overall=True, print_result=False):
                        print("Evaluating ...")
                        rows = []
                        for i, item in enumerate(data):
                            row = {d: 0.1 * (i + 1) for d in dims}
                            if overall:
                                row["overall"] = sum(row.values()) / len(row)
                            rows.append(row)
                        return rows
            """,
            "utils.py": """
                def convert_to_json(output_list, src_list=None, ref_list=None):
                    return [{"system_output": o, "source": s, "reference": r}
                            for o, s, r in zip(output_list, src_list, ref_list)]
            """,
        },
    )
    metric = learned_metric("unieval", checkpoint=str(checkpoint), repo=str(repo), dimensions=("coherence",))
    outcome = metric.compute(PREDS, sources=SRCS)
    assert isinstance(outcome, dict)
    assert list(outcome) == ["unieval_coherence", "unieval_overall"]
    assert outcome["unieval_coherence"].values == (0.1, 0.2)
    ev = metric._loaded[0][0]
    assert ev.scorer.path == str(checkpoint)
