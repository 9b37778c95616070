"""The win-rate matrix breaks model names only between words (issue 38: "smol" was shown "sm/ol")."""

from __future__ import annotations

import re
from html import unescape

import pytest

from clinieval.report.heatmap import heatmap_svg


def _lines(svg: str) -> list[str]:
    return [unescape(t) for t in re.findall(r"<tspan[^>]*>([^<]*)</tspan>", svg)]


@pytest.mark.parametrize(
    "models",
    [
        ["smol", "gemma"],
        ["smollm2-135m-instruct", "gemma-3-270m"],
        ["Llama 3.1 8B Instruct", "Qwen 2.5 7B", "smol"],
    ],
)
def test_column_and_row_labels_keep_words_whole(models: list[str]) -> None:
    n = len(models)
    h2h = {"models": models, "rates": [[None if i == j else 0.5 for j in range(n)] for i in range(n)],
           "battles": [[0 if i == j else 2 for j in range(n)] for i in range(n)]}  # fmt: skip
    svg = heatmap_svg("win rates", h2h)
    words = {w for m in models for w in m.split()}
    shown = [w for line in _lines(svg) for w in line.split()]
    label_words = [w for w in shown if not re.fullmatch(r"[\d.%]+|wins?|losses?", w)]
    assert all(w in words for w in label_words if any(w in m for m in models)), label_words
    for m in models:
        assert svg.count(f"<title>{m}</title>") >= 2  # the whole name on hover, row and column
