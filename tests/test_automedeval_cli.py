"""AutoMedEval's command package (``automedeval/cli/``): the whole command tree as
``clinieval automedeval`` mounts it, the endpoint options each model-reaching command shares,
and ``run_models``, which opens, checks and closes the models of a step."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from clinieval.benchmarks.automedeval.cli import app
from clinieval.benchmarks.automedeval.cli.options import run_models
from clinieval.errors import UserError

ENDPOINT_OPTIONS = [
    "n_ctx", "timeout", "retries", "concurrency", "allow_host", "ca_bundle", "no_proxy", "fingerprint",
    "executor", "ray_address", "ray_workers", "progress",
]  # fmt: skip


def _tree(command: Any, prefix: str = "") -> dict[str, Any]:
    """Every command and group below ``command`` by its path, in the order ``--help`` lists them."""
    found = {prefix.strip(): command}
    for name, sub in getattr(command, "commands", {}).items():
        found.update(_tree(sub, f"{prefix} {name}"))
    return found


def test_the_command_tree_is_the_one_the_docs_name() -> None:
    tree = _tree(typer.main.get_command(app))
    assert list(tree) == [
        "",
        "train", "convert", "judge", "analyze", "demo", "review-items", "review-ratings",
        "kb", "kb build", "kb query",
        "build", "build introspect", "build filter", "build generate", "build teach", "build export",
        "build import", "build curriculum",
        "build quality", "build quality train", "build quality apply",
    ]  # fmt: skip


@pytest.mark.parametrize("path", ["judge", "build generate", "build teach", "build introspect"])
def test_every_command_that_reaches_a_model_ends_with_the_endpoint_options(path: str) -> None:
    command = _tree(typer.main.get_command(app))[path]
    names = [p.name for p in command.params]
    assert names[-len(ENDPOINT_OPTIONS) :] == ENDPOINT_OPTIONS
    defaults = {p.name: p.default for p in command.params}
    assert (defaults["n_ctx"], defaults["timeout"], defaults["retries"]) == (4096, 600.0, 4)
    assert defaults["concurrency"] is None and defaults["progress"] is True


class Fake:
    """A model that records what was done to it."""

    def __init__(self, name: str, seen: list[str], *, broken: bool = False) -> None:
        self.name, self.seen, self.broken = name, seen, broken

    async def check(self) -> None:
        self.seen.append(f"check {self.name}")
        if self.broken:
            raise UserError(f"{self.name} is unreachable")

    async def aclose(self) -> None:
        self.seen.append(f"close {self.name}")


def test_run_models_checks_every_model_first_and_closes_them_all_after() -> None:
    seen: list[str] = []
    models: list[Any] = [Fake("a", seen), Fake("b", seen)]

    async def work() -> int:
        seen.append("work")
        return 7

    assert run_models(models, work) == 7
    assert seen == ["check a", "check b", "work", "close a", "close b"]


def test_run_models_closes_the_models_when_a_check_or_the_work_fails() -> None:
    seen: list[str] = []
    models: list[Any] = [Fake("a", seen), Fake("b", seen, broken=True)]

    async def work() -> int:
        seen.append("work")
        return 7

    with pytest.raises(UserError, match="b is unreachable"):
        run_models(models, work)
    assert seen == ["check a", "check b", "close a", "close b"]

    seen.clear()

    async def failing() -> int:
        raise RuntimeError("mid-step")

    with pytest.raises(RuntimeError, match="mid-step"):
        run_models([Fake("a", seen)], failing, check=False)
    assert seen == ["close a"]  # not checked: the step checks each model when its turn comes
