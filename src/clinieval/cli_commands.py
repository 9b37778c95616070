"""One way for a command to declare the options it shares with other commands, and the judging
loop every ``judge`` command runs.

Every benchmark's ``run`` and ``judge``, the dataset builders and ``clinieval run``/``judge`` reach
a model the same way (``--n-ctx``, ``--timeout``, ``--retries``, ``--concurrency``,
``--allow-host``, ``--executor``), and the arm runners and judges add the same few options on top. Typer reads
options from a function's flat parameter list, so without help each command spelt the block out
again. Here a block is an :class:`OptionGroup`: a frozen dataclass whose fields are typer options
(the ``Annotated`` aliases of :mod:`clinieval.cli_options`). A command names a group as one
parameter, registers with :func:`command` instead of ``app.command``, and receives one instance::

    @command(app)
    def run(model: ArmModels, arms: ArmOptions = ArmOptions(n_ctx=8192)) -> None:
        settings = arms.apply_to(MyArmSettings(...), limit=None)  # backend, overwrite, progress, ...

The command line still shows ``--n-ctx``, ``--timeout``, ... under their own names, in the group's
field order, at the group's place. The default instance sets this command's defaults; a subclass
that redeclares a field changes its help (a dataclass keeps the field where the base put it);
a subclass that adds fields extends the group.

This module sits below the benchmarks (beside :mod:`clinieval.cli_options`) and imports only lower
layers: execution and judging are imported inside the functions that use them, so ``--help``
stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict, TypeVar

import typer

from clinieval.cli_options import (
    AllowHost,
    AllowJudgeFailures,
    CaBundle,
    Concurrency,
    FingerprintOption,
    JudgeLimit,
    JudgeTemperature,
    NCtx,
    NoProxy,
    OverwriteArms,
    Retries,
    ShowProgress,
    Timeout,
    echo_judged,
    exit_if_judge_failed,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from clinieval.engine.distributed import WorkerJob
    from clinieval.engine.runner import Executor
    from clinieval.engine.session import ArmSettings
    from clinieval.judge.rubric import Rubric
    from clinieval.judge.run import JudgeResult
    from clinieval.models.ray_model import RayChoice
    from clinieval.models.spec import BackendOptions
    from clinieval.types import GenerationConfig

CommandFunction = TypeVar("CommandFunction", bound=Callable[..., None])
Settings = TypeVar("Settings", bound="ArmSettings")
JudgeOne = Callable[[Path], Coroutine[Any, Any, "JudgeResult"]]
"""Judges one run folder: what :func:`judge_runs` calls for each run it finds."""


class OptionGroup:
    """Base of a frozen dataclass whose fields are command-line options.

    Each field is annotated with a typer ``Annotated`` alias and has a default; a command parameter
    annotated with the group stands for all of them (see :func:`command`). Subclass with
    ``@dataclass(frozen=True)``.
    """


ExecutorName = Annotated[
    str,
    typer.Option(
        help="where model requests are answered: local (this process) or ray (Ray workers, one per node; "
        "`clinieval run` sends them whole items; docs/distributed.md)"
    ),
]
RayAddress = Annotated[
    str | None,
    typer.Option(help="with --executor ray: the cluster to join, HEAD:6379 (default: a local Ray)"),
]
RayWorkers = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="with --executor ray: how many workers (default: one per node); --concurrency applies to each",
    ),
]


@dataclass(frozen=True)
class Endpoints(OptionGroup):
    """How a command reaches a model: an embedded model's context window, an HTTP server's
    timeout, retries, requests in flight, allowed non-loopback hosts, trusted CAs and proxy use,
    and who asks (this process, or Ray workers on every node). A malformed executor choice is
    refused when the command starts, before any model is opened."""

    n_ctx: NCtx = 4096
    timeout: Timeout = 600.0
    retries: Retries = 4
    concurrency: Concurrency = None
    allow_host: AllowHost = None
    ca_bundle: CaBundle = None
    no_proxy: NoProxy = False
    fingerprint: FingerprintOption = None
    executor: ExecutorName = "local"
    ray_address: RayAddress = None
    ray_workers: RayWorkers = None

    def __post_init__(self) -> None:
        self.ray()

    def ray(self) -> RayChoice | None:
        """``--executor ray`` with its address and workers; None for ``local``."""
        from clinieval.models.ray_model import ray_choice

        return ray_choice(self.executor, self.ray_address, self.ray_workers)

    def backend(self, server_kind: str | None = None) -> BackendOptions:
        """The options every model spec is opened with (``--server-kind``, where a command has it);
        under ``--executor ray`` they open a model answered on Ray workers."""
        return dataclasses.replace(self.local_backend(server_kind), executor=self.ray())

    def local_backend(self, server_kind: str | None = None) -> BackendOptions:
        """The options without the executor: what ``clinieval run``, whose Ray workers take whole
        items, opens its model with."""
        from clinieval.models.spec import BackendOptions

        return BackendOptions.from_cli(
            self.n_ctx,
            self.timeout,
            self.retries,
            self.concurrency,
            self.allow_host,
            server_kind,
            ca_bundle=self.ca_bundle,
            no_proxy=self.no_proxy,
            fingerprint=self.fingerprint,
        )

    def in_flight(self) -> int | None:
        """Requests a command keeps in flight: ``--concurrency``; under Ray None, for the model's
        own ceiling: each worker keeps ``--concurrency`` in flight and the model sums them."""
        return None if self.ray() is not None else self.concurrency

    def open_executor(self, job: WorkerJob) -> AbstractContextManager[Executor | None]:
        """``clinieval run``'s item executor, started for ``job`` (workers rebuild the task and
        model from it); None stands for the runner's own, in this process."""
        from clinieval.engine.distributed import open_executor

        return open_executor(self.ray(), job)


@dataclass(frozen=True)
class ArmOptions(Endpoints):
    """A benchmark's ``run``: the endpoint options, then replacing stale arms and progress bars."""

    overwrite: OverwriteArms = False
    progress: ShowProgress = True

    def apply_to(self, settings: Settings, limit: int | None) -> Settings:
        """A benchmark's arm settings with this command's backend, requests in flight, overwrite
        and progress, and ``limit`` (each benchmark says in its own words what it limits)."""
        return dataclasses.replace(
            settings,
            backend=self.backend(),
            limit=limit,
            concurrency=self.in_flight(),
            overwrite=self.overwrite,
            progress=self.progress,
        )


@dataclass(frozen=True)
class JudgeSampling(OptionGroup):
    """How a judge samples, and how many answers of each arm it reads."""

    judge_temperature: JudgeTemperature = 0.0
    limit: JudgeLimit = None


class JudgeCall(TypedDict):
    """The keyword arguments every judging function (``judge_folder``, a benchmark's own) takes
    from a judge command's options."""

    backend: BackendOptions
    concurrency: int | None
    limit: int | None
    progress: bool


@dataclass(frozen=True)
class JudgeOptions(Endpoints, JudgeSampling):
    """A ``judge`` command: the judge's sampling and limit, its endpoint options, progress bars
    and the share of failed judge calls accepted, in that order (a dataclass puts the fields of
    its last base first). A malformed ``--allow-failures`` is refused when the command starts,
    before any judge is opened."""

    n_ctx: Annotated[int, typer.Option(help="context window of an embedded judge")] = 4096
    progress: ShowProgress = True
    allow_failures: AllowJudgeFailures = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.allowed()

    def allowed(self) -> float | None:
        """``--allow-failures`` read: None (no failure accepted), or the share accepted."""
        from clinieval.records.failures import parse_allowed

        return parse_allowed(self.allow_failures)

    def call(self) -> JudgeCall:
        """What each judging call is given: the backend, requests in flight, limit, progress."""
        return JudgeCall(
            backend=self.backend(), concurrency=self.in_flight(), limit=self.limit, progress=self.progress
        )


def command(app: typer.Typer, name: str | None = None) -> Callable[[CommandFunction], CommandFunction]:
    """Register the decorated function as ``app``'s command ``name`` (default: the function's name),
    with each :class:`OptionGroup` parameter spread into its options. The function itself is
    returned unchanged, so Python callers pass group instances."""

    def register(function: CommandFunction) -> CommandFunction:
        app.command(name)(with_option_groups(function))
        return function

    return register


def with_option_groups(function: Callable[..., None]) -> Callable[..., None]:
    """``function`` as typer should see it: every parameter annotated with an :class:`OptionGroup`
    replaced by the group's fields, whose values are gathered back into one instance per call."""
    hints = typing.get_type_hints(function, include_extras=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[type[OptionGroup], list[str]]] = {}
    for parameter in inspect.signature(function).parameters.values():
        hint = hints.get(parameter.name, parameter.annotation)
        if not _is_group(hint):
            parameters.append(_keyword(parameter.name, hint, parameter.default))
            continue
        spread = _group_parameters(hint, parameter.default)
        groups[parameter.name] = (hint, [p.name for p in spread])
        parameters += spread
    _refuse_repeated_names(function, parameters)

    @functools.wraps(function)
    def gathered(**values: Any) -> None:
        for name, (group, fields) in groups.items():
            values[name] = group(**{f: values.pop(f) for f in fields})
        function(**values)

    gathered.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    gathered.__annotations__ = {p.name: p.annotation for p in parameters}
    return gathered


def _is_group(hint: object) -> typing.TypeGuard[type[OptionGroup]]:
    return isinstance(hint, type) and issubclass(hint, OptionGroup) and dataclasses.is_dataclass(hint)


def _group_parameters(group: type[OptionGroup], default: object) -> list[inspect.Parameter]:
    """The group's fields as keyword parameters, defaulting to ``default``'s values (or the
    group's own defaults where the command gave none)."""
    instance = group() if default is inspect.Parameter.empty else default
    if not isinstance(instance, group):
        raise TypeError(f"the default of a {group.__name__} parameter must be a {group.__name__}")
    hints = typing.get_type_hints(group, include_extras=True)
    return [
        _keyword(f.name, hints[f.name], getattr(instance, f.name))
        for f in dataclasses.fields(group)  # type: ignore[arg-type]
        if f.init
    ]


def _keyword(name: str, annotation: object, default: object) -> inspect.Parameter:
    # keyword-only: typer passes every value by name, and a required option may follow a group
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


def _refuse_repeated_names(function: Callable[..., None], parameters: list[inspect.Parameter]) -> None:
    names = [p.name for p in parameters]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise TypeError(f"{function.__qualname__}: option {repeated[0]!r} declared twice (a group has it)")


def judge_runs(
    runs: Sequence[Path], options: JudgeOptions, judge: JudgeOne, *, shrink: str | None = None
) -> None:
    """Judge every run folder among ``runs`` (a folder of run folders stands for them all) in
    turn, print one line per run and its failures with their fixes, then exit 3
    (``errors.EXIT_FAILED_ITEMS``) when judge calls failed beyond ``--allow-failures``. ``shrink``
    names the option that shortens the rubric's prompt (``--snippets``), where there is one."""
    import asyncio

    from clinieval.records.runs import find_run_dirs

    allowed = options.allowed()
    results: list[JudgeResult] = []
    for path in find_run_dirs(list(runs)):
        result = asyncio.run(judge(path))
        echo_judged(path, result, shrink=shrink)
        results.append(result)
    exit_if_judge_failed(results, allowed)


def rubric_judge(
    spec: str, rubric: Rubric, options: JudgeOptions, *, repeats: int, generation: GenerationConfig
) -> JudgeOne:
    """Judging one run folder with ``rubric`` by the judge ``spec`` names, for :func:`judge_runs`."""

    async def judge(path: Path) -> JudgeResult:
        from clinieval.judge.run import judge_folder
        from clinieval.records.runs import RunDir

        run = RunDir.open(path)
        return await judge_folder(run, spec, rubric, repeats=repeats, generation=generation, **options.call())

    return judge
