"""``clinieval automedeval``: the whole command tree, mounted here from one module per group.

AutoMedEval has more commands than any other benchmark (evaluating a judge, its knowledge base,
building its training data, training it), so they are split by group:

- ``sets.py``: ``convert``, ``review-items``, ``review-ratings`` (making a judge-evaluation set);
- ``judge.py``: ``judge``, ``analyze``, ``demo`` (judging a set and comparing with physicians);
- ``kb.py``: ``kb build | query``; ``build.py``: ``build ...`` with ``quality.py``'s
  ``build quality ...``; ``train.py``: ``train``;
- ``options.py``: the options and model wiring the groups share.

The benchmark's ``commands()`` returns :data:`app`.
"""

from __future__ import annotations

from clinieval.benchmarks.automedeval.cli.build import build_app
from clinieval.benchmarks.automedeval.cli.judge import analyze, demo, judge
from clinieval.benchmarks.automedeval.cli.kb import kb_app
from clinieval.benchmarks.automedeval.cli.sets import convert, review_items, review_ratings
from clinieval.benchmarks.automedeval.cli.train import train
from clinieval.cli_commands import with_option_groups
from clinieval.cli_options import command_group

app = command_group("AutoMedEval: judge a medical judge against physicians; build its training data.")
# Registered in the order `--help` has always listed them (commands first, then the groups).
for _name, _command in (
    ("train", train),
    ("convert", convert),
    ("judge", judge),
    ("analyze", analyze),
    ("demo", demo),
    ("review-items", review_items),
    ("review-ratings", review_ratings),
):
    app.command(_name)(with_option_groups(_command))
app.add_typer(kb_app, name="kb")
app.add_typer(build_app, name="build")

__all__ = ["app"]
