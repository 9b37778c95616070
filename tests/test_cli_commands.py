"""The shared command builder (clinieval.cli_commands): option groups spread into their options
with each command's defaults and help, gathered back into one instance per call; the judging
loop's exit codes; and the benchmark commands that declare their options through it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from clinieval.cli_commands import (
    ArmOptions,
    Endpoints,
    JudgeOptions,
    JudgeSampling,
    OptionGroup,
    command,
    judge_runs,
    with_option_groups,
)
from clinieval.cli_options import command_group
from clinieval.errors import EXIT_FAILED_ITEMS, UserError
from clinieval.judge.run import JudgeResult, JudgeSummary

runner = CliRunner()


def _app_with(function: object, name: str = "go") -> typer.Typer:
    app = command_group("test")
    command(app, name)(function)  # type: ignore[type-var]
    # a second command keeps typer from folding the group into its only command
    app.command("other")(lambda: None)
    return app


def _options(app: typer.Typer, name: str = "go") -> dict[str, object]:
    group = typer.main.get_command(app)
    found = group.commands[name]  # type: ignore[attr-defined]
    return {p.name: p for p in found.params}


def test_a_group_spreads_into_its_options_with_the_commands_defaults() -> None:
    seen: list[ArmOptions] = []

    def go(
        model: Annotated[str, typer.Option()],
        arms: ArmOptions = ArmOptions(n_ctx=8192, timeout=30.0),
        strict: Annotated[bool, typer.Option()] = False,
    ) -> None:
        seen.append(arms)

    app = _app_with(go)
    options = _options(app)
    assert list(options) == [
        "model", "n_ctx", "timeout", "retries", "concurrency", "allow_host", "ca_bundle", "no_proxy",
        "fingerprint", "executor", "ray_address", "ray_workers", "overwrite", "progress", "strict",
    ]  # fmt: skip
    assert options["n_ctx"].default == 8192 and options["timeout"].default == 30.0  # type: ignore[attr-defined]
    assert options["retries"].default == 4  # type: ignore[attr-defined]  # the group's own default
    done = runner.invoke(
        app, ["go", "--model", "m", "--concurrency", "3", "--allow-host", "h", "--no-progress"]
    )
    assert done.exit_code == 0, done.output
    [arms] = seen
    assert arms == ArmOptions(n_ctx=8192, timeout=30.0, concurrency=3, allow_host=["h"], progress=False)
    backend = arms.backend()
    assert (backend.n_ctx, backend.timeout_s, backend.concurrency, backend.allow_hosts) == (
        8192,
        30.0,
        3,
        ("h",),
    )


def test_the_help_shows_each_option_by_its_own_name_and_help() -> None:
    def go(arms: ArmOptions = ArmOptions()) -> None:
        """Do it."""

    done = runner.invoke(_app_with(go), ["go", "--help"], terminal_width=200)
    assert done.exit_code == 0
    for option, text in [
        ("--n-ctx", "context window of an embedded model"),
        ("--timeout", "seconds per HTTP request"),
        ("--retries", "retries on 429/5xx/connection errors"),
        ("--concurrency", "requests in flight"),
        ("--allow-host", "allow a non-loopback endpoint host (repeatable)"),
        ("--overwrite / --no-overwrite", "discard different runs at the arms' folders"),
        ("--progress / --no-progress", "show progress bars"),
    ]:
        [line] = [x for x in done.output.splitlines() if x.strip().startswith(option)]
        assert text in line
    assert "Do it." in done.output


@dataclass(frozen=True)
class LongNotes(ArmOptions):
    n_ctx: Annotated[int, typer.Option(help="context window (Level 2 needs 8k)")] = 8192


def test_a_subclass_that_redeclares_a_field_changes_its_help_in_place() -> None:
    def go(arms: LongNotes = LongNotes()) -> None:
        assert isinstance(arms, LongNotes)

    app = _app_with(go)
    options = _options(app)
    assert list(options)[:2] == ["n_ctx", "timeout"]
    assert options["n_ctx"].help == "context window (Level 2 needs 8k)"  # type: ignore[attr-defined]
    assert runner.invoke(app, ["go"]).exit_code == 0


def test_judge_options_speak_of_the_judge_and_refuse_a_bad_fraction_first() -> None:
    ran: list[JudgeOptions] = []

    def go(judging: JudgeOptions = JudgeOptions()) -> None:
        ran.append(judging)

    app = _app_with(go)
    options = _options(app)
    assert list(options) == [
        "judge_temperature", "limit", "n_ctx", "timeout", "retries", "concurrency", "allow_host",
        "ca_bundle", "no_proxy", "fingerprint", "executor", "ray_address", "ray_workers", "progress",
        "allow_failures",
    ]  # fmt: skip
    assert options["n_ctx"].help == "context window of an embedded judge"  # type: ignore[attr-defined]
    done = runner.invoke(app, ["go", "--allow-failures", "lots"])
    assert isinstance(done.exception, UserError) and "--allow-failures" in str(done.exception)
    assert not ran  # refused before the command's body
    assert JudgeOptions(allow_failures="0.25").allowed() == 0.25
    call = JudgeOptions(n_ctx=2048, concurrency=2, limit=7, progress=False).call()
    assert (call["backend"].n_ctx, call["concurrency"], call["limit"], call["progress"]) == (
        2048,
        2,
        7,
        False,
    )


def test_a_python_caller_gets_the_function_itself() -> None:
    def go(endpoints: Endpoints = Endpoints()) -> None:
        """Doc."""

    assert command(command_group("x"))(go) is go
    wrapped = with_option_groups(go)
    assert wrapped.__name__ == "go" and wrapped.__doc__ == "Doc."


def test_an_option_declared_twice_is_refused_when_the_command_is_declared() -> None:
    def go(progress: Annotated[bool, typer.Option()] = True, arms: ArmOptions = ArmOptions()) -> None:
        pass

    with pytest.raises(TypeError, match="'progress' declared twice"):
        with_option_groups(go)


def test_a_group_default_of_another_type_is_refused() -> None:
    def go(arms: ArmOptions = Endpoints()) -> None:  # type: ignore[assignment]
        pass

    with pytest.raises(TypeError, match="must be a ArmOptions"):
        with_option_groups(go)


def test_every_group_field_has_a_default() -> None:
    for group in (Endpoints, ArmOptions, JudgeSampling, JudgeOptions):
        assert issubclass(group, OptionGroup)
        group()  # constructible from defaults alone: a command may leave the group out


def test_executor_options_refuse_ray_settings_without_ray() -> None:
    from clinieval.engine.distributed import WorkerJob

    with pytest.raises(UserError, match="--ray-workers needs --executor ray"):
        Endpoints(ray_workers=2)
    with pytest.raises(UserError, match="--ray-address needs --executor ray"):
        JudgeOptions(ray_address="10.0.0.1:6379")  # a subclass checks them too
    with pytest.raises(UserError, match="--executor 'spark' is unknown; choose from local, ray"):
        ArmOptions(executor="spark")
    job = WorkerJob.__new__(WorkerJob)
    with Endpoints().open_executor(job) as chosen:
        assert chosen is None  # local: the runner's own executor


def test_under_ray_the_backend_names_ray_and_the_workers_keep_concurrency_each() -> None:
    from clinieval.models.ray_model import RayChoice, RayModel
    from clinieval.models.spec import parse_model_spec

    ray = Endpoints(concurrency=3, executor="ray", ray_address="10.0.0.1:6379", ray_workers=2)
    assert ray.backend().executor == RayChoice("10.0.0.1:6379", 2)
    assert ray.local_backend().executor is None  # `clinieval run`: its workers take whole items
    assert ray.backend().concurrency == 3 and ray.in_flight() is None  # the model sums its workers'
    assert Endpoints(concurrency=3).in_flight() == 3 and Endpoints().backend().executor is None
    model = parse_model_spec("openai:http://127.0.0.1:9/v1,http://127.0.0.1:10/v1@m", ray.backend())
    assert isinstance(model, RayModel) and model.name == "m"
    with pytest.raises(UserError, match="expected URL@model-name"):  # refused before Ray starts
        parse_model_spec("openai:http://127.0.0.1:9/v1", ray.backend())


SPEC_OPTIONS = {"--model", "--judge", "--teacher", "--generator"}
"""Options that take a model spec: a command with one sends model requests (``--reviewer`` names
a person)."""
NOT_SPECS = {
    "analyze": "--model names a table column",
    "automedeval train": "--model is a Hugging Face folder to fine-tune, not a model to ask",
}


def _leaf_commands(group: object, path: tuple[str, ...] = ()) -> list[tuple[str, object]]:
    children = getattr(group, "commands", None)
    if children is None:
        return [(" ".join(path), group)]
    return [leaf for name, child in children.items() for leaf in _leaf_commands(child, (*path, name))]


def test_every_command_that_asks_a_model_takes_the_executor_and_concurrency_options() -> None:
    """Walks the real command tree: each command with a model-spec option has --executor,
    --ray-address, --ray-workers and --concurrency (before issue 28 only `run` had --executor)."""
    from clinieval.cli import app

    asking, lacking = [], []
    for name, leaf in _leaf_commands(typer.main.get_command(app)):
        flags = {flag for p in leaf.params for flag in getattr(p, "opts", ())}  # type: ignore[attr-defined]
        if not flags & SPEC_OPTIONS or name in NOT_SPECS:
            continue
        asking.append(name)
        wanted = {"--executor", "--ray-address", "--ray-workers", "--concurrency"}
        lacking += [f"{name}: {flag}" for flag in sorted(wanted - flags)]
    assert not lacking, lacking
    assert {"run", "judge", "medalign run", "medeval run", "automedeval judge"} <= set(asking)
    assert {"medalign demo", "ehrnoteqa demo", "medeval demo", "automedeval demo"} <= set(asking)
    assert len(asking) >= 15


def _result(tmp_path: Path, failed: int) -> JudgeResult:
    names = [f.name for f in dataclasses.fields(JudgeSummary) if f.default is dataclasses.MISSING]
    values: dict[str, object] = dict.fromkeys(names, 0)
    values.update(
        rubric="r", fields=[], judge="j", judge_identity={}, generation={}, answer_failures={},
        judge_calls=10, judge_errors={"timeout": failed} if failed else {}, elapsed_s=0.0,
    )  # fmt: skip
    summary = JudgeSummary(**values)  # type: ignore[arg-type]
    return JudgeResult({}, summary, tmp_path / "scores.jsonl", tmp_path / "summary.json")


def _runs(tmp_path: Path, n: int) -> Path:
    for i in range(n):
        (tmp_path / "arms" / f"arm{i}").mkdir(parents=True)
        (tmp_path / "arms" / f"arm{i}" / "manifest.json").write_text("{}")
    return tmp_path / "arms"


def test_judge_runs_judges_each_run_in_a_folder_and_exits_3_on_failed_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _runs(tmp_path, 2)
    judged: list[str] = []

    async def judge(path: Path) -> JudgeResult:
        judged.append(path.name)
        return _result(tmp_path, failed=1 if path.name == "arm1" else 0)

    with pytest.raises(typer.Exit) as stopped:
        judge_runs([folder], JudgeOptions(), judge)
    assert stopped.value.exit_code == EXIT_FAILED_ITEMS
    assert judged == ["arm0", "arm1"]
    out, err = capsys.readouterr()
    assert out.count("answers scored") == 2 and "1 of 20 judge calls failed" in err
    judge_runs([folder], JudgeOptions(allow_failures="0.1"), judge)  # 1 of 20 is within a tenth
    assert "warning: 1 of 20 judge calls failed" in capsys.readouterr().err
    with pytest.raises(UserError, match="not a run directory"):
        judge_runs([tmp_path / "nothing"], JudgeOptions(), judge)


BENCHMARK_COMMANDS = [
    ("medalign", "run"),
    ("medalign", "judge"),
    ("ehrnoteqa", "run"),
    ("ehrnoteqa", "judge"),
    ("ehrnoteqa", "build", "generate"),
    ("medeval", "run"),
    ("judge",),
    ("run",),
]


@pytest.mark.parametrize("path", BENCHMARK_COMMANDS, ids=" ".join)
def test_the_commands_keep_their_endpoint_options_and_defaults(path: tuple[str, ...]) -> None:
    from clinieval.cli import app

    found = typer.main.get_command(app)
    for part in path:
        found = found.commands[part]  # type: ignore[attr-defined]
    options = {p.name: p for p in found.params}
    for name in ("n_ctx", "timeout", "retries", "concurrency", "allow_host", "progress"):
        assert name in options, name
    defaults = {name: options[name].default for name in ("n_ctx", "timeout", "retries")}
    expected = {
        ("medalign", "run"): (4096, 600.0),
        ("medalign", "judge"): (4096, 600.0),
        ("ehrnoteqa", "run"): (8192, 600.0),
        ("ehrnoteqa", "judge"): (8192, 600.0),
        ("ehrnoteqa", "build", "generate"): (8192, 600.0),
        ("medeval", "run"): (4096, 600.0),
        ("judge",): (4096, 600.0),
        ("run",): (4096, 120.0),
    }[path]
    assert (defaults["n_ctx"], defaults["timeout"], defaults["retries"]) == (*expected, 4)
