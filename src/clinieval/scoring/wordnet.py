"""WordNet for NLTK's METEOR, laid out from Debian's files so nothing is ever downloaded.

NLTK looks for WordNet under ``<nltk data dir>/corpora/wordnet/`` and normally fetches it with
``nltk.download``, which an offline machine cannot do. Debian ships the same Princeton WordNet
3.0 database (``wordnet-base``: data, index and exception files; ``wordnet-sense-index``:
``index.sense``) but not the ``lexnames`` file NLTK's reader opens first. This module copies the
Debian files into an NLTK data directory and writes ``lexnames`` from the published table of
WordNet's 45 lexicographer files.

    python -m clinieval.scoring.wordnet      # build (idempotent); `make install` runs it

The directory is ``$CLINIEVAL_NLTK_DATA`` if set, else ``~/.cache/clinieval/nltk_data``
(``$CLINIEVAL_HOME/nltk_data`` where that is set). The files are copies (about 35 MB), not
symlinks: NLTK refuses to open a corpus file whose real path lies outside the corpus root.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from clinieval.errors import UserError
from clinieval.fsutil import publish_dir
from clinieval.models.catalog import cache_dir

ENV_NLTK_DATA = "CLINIEVAL_NLTK_DATA"
DEBIAN_WORDNET = Path("/usr/share/wordnet")

# What NLTK's WordNetCorpusReader opens (its _FILES, less lexnames, which is generated here).
WORDNET_FILES: tuple[str, ...] = (
    "data.adj", "data.adv", "data.noun", "data.verb",
    "index.adj", "index.adv", "index.noun", "index.verb",
    "adj.exc", "adv.exc", "noun.exc", "verb.exc",
    "index.sense", "cntlist.rev",
)  # fmt: skip

# WordNet 3.0's lexicographer files: number, name. The syntactic category NLTK wants as the third
# column follows from the name's prefix (1 noun, 2 verb, 3 adjective, 4 adverb).
_LEXNAMES: tuple[str, ...] = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)  # fmt: skip
_SYNTACTIC_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}

_INSTALL_HINT = "run `apt-get install wordnet-base wordnet-sense-index`, then `make install`"


def lexnames_text() -> str:
    """The ``lexnames`` file: ``NN<TAB>name<TAB>category`` for each lexicographer file."""
    lines = []
    for number, name in enumerate(_LEXNAMES):
        category = _SYNTACTIC_CATEGORY[name.split(".", 1)[0]]
        lines.append(f"{number:02d}\t{name}\t{category}\n")
    return "".join(lines)


def nltk_data_dir() -> Path:
    """The NLTK data directory clinieval builds and reads (it holds ``corpora/wordnet``)."""
    override = os.environ.get(ENV_NLTK_DATA)
    return Path(override).expanduser() if override else cache_dir() / "nltk_data"


def wordnet_dir(data_dir: Path | None = None) -> Path:
    return (data_dir if data_dir is not None else nltk_data_dir()) / "corpora" / "wordnet"


def _check_source(source: Path) -> None:
    missing = [name for name in WORDNET_FILES if not (source / name).is_file()]
    if missing:
        raise UserError(f"WordNet files missing from {source} ({', '.join(missing)}): {_INSTALL_HINT}")


def _same_file(copy: Path, original: Path) -> bool:
    """A copy made by ``shutil.copy2`` keeps size and modification time; a changed source won't."""
    try:
        a, b = copy.stat(), original.stat()
    except FileNotFoundError:
        return False
    return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns


def _is_built(target: Path, source: Path) -> bool:
    """Whether ``target`` already holds exactly what a build would write (so a rebuild is a no-op)."""
    if not all(_same_file(target / name, source / name) for name in WORDNET_FILES):
        return False
    lexnames = target / "lexnames"
    return lexnames.is_file() and lexnames.read_text(encoding="utf-8") == lexnames_text()


def build_wordnet(data_dir: Path | None = None, source: Path = DEBIAN_WORDNET) -> Path:
    """Lay out WordNet for NLTK under ``data_dir`` (idempotent) and return ``data_dir``.

    A finished directory is left untouched; anything else (missing, partial, or pointing at other
    files) is rebuilt in a temporary folder and swapped in whole, so a reader never sees half a
    WordNet.
    """
    data_dir = data_dir if data_dir is not None else nltk_data_dir()
    source = source.resolve()
    _check_source(source)
    target = wordnet_dir(data_dir)
    if _is_built(target, source):
        return data_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".wordnet.", dir=target.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp's 0700 would hide the corpus from other users of a shared cache
        for name in WORDNET_FILES:
            shutil.copy2(source / name, tmp / name)
        (tmp / "lexnames").write_text(lexnames_text(), encoding="utf-8")
        (tmp / "README").write_text(
            f"WordNet 3.0 for NLTK: copies of {source} plus a generated lexnames file.\n"
            "Built by `python -m clinieval.scoring.wordnet`; safe to delete.\n",
            encoding="utf-8",
        )
        publish_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return data_dir


def ensure_wordnet() -> Path:
    """Build WordNet if needed and put its data directory first on ``nltk.data.path``.

    NLTK's reader also resolves ``corpora/wordnet`` through ``nltk.data.path`` while it loads
    (to map sense keys between versions), so prepending the directory is required, not just
    convenient. Returns the data directory.
    """
    import nltk.data

    data_dir = build_wordnet()
    entry = str(data_dir)
    if not nltk.data.path or nltk.data.path[0] != entry:
        if entry in nltk.data.path:
            nltk.data.path.remove(entry)
        nltk.data.path.insert(0, entry)
    return data_dir


def main(argv: list[str] | None = None) -> int:
    del argv  # no options: the location comes from the environment, like every other reader
    try:
        data_dir = build_wordnet()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"WordNet for NLTK ready in {wordnet_dir(data_dir)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
