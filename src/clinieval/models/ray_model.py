"""A model whose requests are answered on Ray actors: ``--executor ray`` on every command.

``clinieval run --executor ray`` sends whole *items* to Ray workers (clinieval.engine.distributed). The
other commands that ask a model (benchmark arms, every judge, the dataset builders) have no item
recipe a worker could rebuild, but they all ask through the :class:`~clinieval.models.base.Model`
protocol; so under ``--executor ray`` they get a :class:`RayModel`, which forwards each request to
an actor that built the same model spec on its own node. Why it is shaped this way:

* Each actor builds the spec *on its node* (``openai:http://127.0.0.1:8000/v1@m`` is each node's
  own server; an embedded model loads where it runs), with the backend options minus the
  executor, so nothing recurses.
* The driver checks that every actor built the same model identity, and ``identity`` *is* that
  inner identity: cache keys equal a local run's, so a pass resumes across executors.
* Only the driver writes (run folders, caches): an actor returns answers, never stores them.
* A request goes to the least busy live actor; an actor that dies is dropped with a warning naming
  its node and the request is asked of another; with none left the answer is a transient
  ``backend`` failure, recorded and asked again by the next run, as a dead server's would be.

This module also holds what the two Ray users share (importing Ray, starting or joining it, the
nodes and actors placed on them, the wording of errors), so there is one copy: the item-level
executor in :mod:`clinieval.engine.distributed` imports it from here. ``ray`` itself is imported only
when a Ray executor is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clinieval.errors import UserError, one_of
from clinieval.types import JSON, ErrorKind, GenerationConfig, LoglikOutput, Message, ModelOutput

if TYPE_CHECKING:
    from clinieval.models.base import Model
    from clinieval.models.server import ServerInfo

log = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")
"""What ``--executor`` may name."""
INSTALL_HINT = "install the ray extra: pip install 'clinieval[ray]'"
LOCAL_CPUS = 2
"""CPUs a Ray started by clinieval advertises. Workers reserve none (they wait on a model server or
run an embedded model with its own threads); this only sizes Ray's own pool of idle processes."""
SETUP_TIMEOUT_S = 600.0
"""How long workers may take to build their model (an embedded model loads here)."""
RAY_LOGS = "/tmp/ray/session_latest/logs"
AUTH_HINT = "A cluster with token authentication needs RAY_AUTH_MODE=token and its token here too"


@dataclass(frozen=True, slots=True)
class RayChoice:
    """``--executor ray`` with its ``--ray-address`` (None: start a local Ray) and ``--ray-workers``
    (None: one per node). Part of :class:`~clinieval.models.spec.BackendOptions`, so it is frozen
    and pickles."""

    address: str | None = None
    workers: int | None = None


def ray_choice(executor: str, address: str | None, workers: int | None) -> RayChoice | None:
    """``--executor``, ``--ray-address`` and ``--ray-workers`` read: None for a local run. The Ray
    options without ``--executor ray`` are a mistake worth one line, not a silent local run."""
    chosen = one_of(executor, EXECUTORS, "--executor")
    if chosen == "ray":
        return RayChoice(address=address or None, workers=workers)
    given = [flag for flag, value in (("--ray-address", address), ("--ray-workers", workers)) if value]
    if given:
        raise UserError(f"{' and '.join(given)} {'needs' if len(given) == 1 else 'need'} --executor ray")
    return None


def import_ray() -> Any:
    """The ``ray`` module, or one UserError saying how to install it. Ray never reports usage
    from a run clinieval starts (an offline tool has no business phoning home)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise UserError(f"--executor ray needs Ray, which is not installed; {INSTALL_HINT}") from None
    return ray


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0].rstrip(".") if text else type(error).__name__


@dataclass(frozen=True, slots=True)
class WorkerFailure:
    """Why a worker could not do what it was asked: a UserError's message, or a crash's."""

    message: str
    user_error: bool


def failure_of(error: Exception, doing: str) -> WorkerFailure:
    """A worker's exception as a value: a UserError's message as is; anything else with its type,
    and its traceback in the worker's log (Ray keeps it on that node)."""
    if isinstance(error, UserError):
        return WorkerFailure(str(error), user_error=True)
    log.exception("clinieval worker failed while %s", doing)
    return WorkerFailure(f"{type(error).__name__}: {error}", user_error=False)


def setup_failed(node: str, failure: WorkerFailure, what: str) -> UserError:
    """A worker's failed setup as the one line the user sees."""
    if failure.user_error:
        return UserError(f"on Ray node {node}: {failure.message}")
    return UserError(
        f"a Ray worker on {node} failed to build {what} ({failure.message}); "
        f"its traceback is in {RAY_LOGS} on that node"
    )


@dataclass(frozen=True, slots=True)
class Placed:
    """One actor and the node it runs on (named in errors)."""

    actor: Any
    node: str


_connections = 0
"""Open :class:`RayCluster` connections in this process: a command may open several Ray models
(a judge and a teacher), and ``ray.init`` is once per process."""
_started_here = False


class RayCluster:
    """A connection to Ray (joined at ``address``, or a local Ray started for this command and
    stopped with it) and the actors placed on its nodes."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self.ray: Any = import_ray()
        self.placed: list[Placed] = []
        self._connected = False

    def connect(self) -> None:
        global _connections, _started_here
        ray = self.ray
        if _connections == 0 and not ray.is_initialized():
            _init(ray, self.address)
            _started_here = True
        _connections += 1
        self._connected = True

    def disconnect(self) -> None:
        """Close and stop our actors, then leave Ray: a Ray we started stops with its last user,
        a cluster we joined keeps running."""
        global _connections, _started_here
        if not self._connected:
            return
        ray = self.ray
        with contextlib.suppress(Exception):
            ray.get([p.actor.close.remote() for p in self.placed], timeout=10)
        for placed in self.placed:
            with contextlib.suppress(Exception):
                ray.kill(placed.actor, no_restart=True)
        self.placed = []
        self._connected = False
        _connections -= 1
        if _connections == 0 and _started_here:
            ray.shutdown()
            _started_here = False

    def nodes(self) -> list[tuple[str, str]]:
        """(node id, address) of every live node with CPUs: a node started with ``--num-cpus 0``
        (a head without a model server) gets no worker."""
        nodes = [
            (str(n["NodeID"]), str(n["NodeManagerAddress"]))
            for n in self.ray.nodes()
            if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0
        ]
        if not nodes:
            raise UserError("the Ray cluster has no live node with CPUs to run workers on")
        return sorted(nodes, key=lambda n: n[1])

    def place(self, actor_type: type, workers: int | None, *args: Any) -> int:
        """Start ``workers`` actors of ``actor_type`` (default: one per node), spread over the nodes
        in turn, each pinned to its node; return how many nodes there are."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = self.nodes()
        actor_class = self.ray.remote(actor_type)
        for i in range(workers or len(nodes)):
            node_id, address = nodes[i % len(nodes)]
            actor = actor_class.options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
            ).remote(*args)
            self.placed.append(Placed(actor, address))
        return len(nodes)

    def setups(self, what: str) -> list[Any]:
        """Every placed actor's ``setup()`` answer, in order."""
        ray = self.ray
        try:
            return list(ray.get([p.actor.setup.remote() for p in self.placed], timeout=SETUP_TIMEOUT_S))
        except ray.exceptions.GetTimeoutError:
            raise UserError(f"the Ray workers did not build {what} within {SETUP_TIMEOUT_S:.0f}s") from None
        except ray.exceptions.RayError as e:
            raise UserError(f"a Ray worker could not start: {first_line(e)}; see {RAY_LOGS}") from None


PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
)
DEAD_PROXY = "http://127.0.0.1:9"
"""A proxy address on loopback where nothing listens (the discard port): a request sent to it is
refused at once, on this machine."""
SAVED_PROXIES = "CLINIEVAL_RAY_PROXIES"
"""Where the proxy variables of the command that started a local Ray wait for its workers."""


@contextlib.contextmanager
def sealed_proxies() -> Any:
    """While a local Ray starts, every proxy variable names :data:`DEAD_PROXY` and ``NO_PROXY``
    only loopback, and the command's own values are kept in :data:`SAVED_PROXIES`.

    Why: Ray's head looks up its cloud provider on every start, usage statistics off or not
    (``usage_lib.get_cloud_from_metadata_requests``: 169.254.169.254 and metadata.google.internal,
    through ``HTTP_PROXY`` if one is set), from processes that keep the environment they were
    started with. Through the dead proxy those requests are refused on this machine; Ray's own
    connections are to loopback and go direct. The workers, started later from the same
    environment, take the command's proxies back when they import this module
    (:func:`restore_proxies`), so a model behind an allowed proxy is reached as without Ray."""
    saved = {name: os.environ.get(name) for name in PROXY_VARIABLES}
    for name in PROXY_VARIABLES:
        os.environ[name] = "localhost,127.0.0.1,::1" if name.lower() == "no_proxy" else DEAD_PROXY
    os.environ[SAVED_PROXIES] = json.dumps(saved)
    try:
        yield
    finally:
        del os.environ[SAVED_PROXIES]
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def restore_proxies() -> None:
    """In a Ray worker started by :func:`sealed_proxies`: the command's proxy variables again."""
    saved = os.environ.pop(SAVED_PROXIES, None)
    if saved is None:
        return
    for name, value in json.loads(saved).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


restore_proxies()  # a worker process imports this module before it builds its actor


def _init(ray: Any, address: str | None) -> None:
    # workers' output (a crash's traceback) is forwarded here; Ray's own chatter is not
    common = {"logging_level": logging.WARNING, "log_to_driver": True}
    try:
        if address is None:
            with sealed_proxies():  # Ray's cloud-metadata probes are refused on this machine
                ray.init(
                    address="local",
                    num_cpus=LOCAL_CPUS,
                    include_dashboard=False,
                    _node_ip_address="127.0.0.1",
                    **common,
                )
        else:
            ray.init(address=address, **common)
    except Exception as e:
        where = "start a local Ray" if address is None else f"connect to Ray at {address}"
        hint = "" if address is None else f"; is `ray start --head` running there? {AUTH_HINT}"
        raise UserError(f"cannot {where}: {type(e).__name__}: {first_line(e)}{hint}") from None


# --- the actor ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelReady:
    """What an actor built, for the driver to compare and to answer from."""

    identity: JSON
    max_concurrency: int
    context_length: int | None
    server_info: ServerInfo | None


class ModelWorker:
    """The Ray actor: builds the model from its spec on its own node, then answers requests.

    Its methods are coroutines, so Ray runs it as an async actor: the requests in flight on it
    share one event loop and one model, as a local command's coroutines do."""

    def __init__(self, build: Callable[[], Model]) -> None:
        self._build = build
        self._model: Model | None = None

    async def setup(self) -> ModelReady | WorkerFailure:
        try:
            model = self._model = self._build()
            await model.check()
            info = getattr(model, "server_info", None)
            return ModelReady(
                model.identity, model.max_concurrency, getattr(model, "context_length", None), info
            )
        except Exception as e:
            return failure_of(e, "building the model")

    def _built(self) -> Model:
        assert self._model is not None, "setup() first"
        return self._model

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        return await self._built().generate(messages, config)

    async def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> LoglikOutput:
        return await self._built().loglikelihood(prompt, continuations)

    async def tokenize(self, text: str) -> list[int]:
        return await self._built().tokenize(text)

    async def count_tokens(self, text: str) -> int:
        return await self._built().count_tokens(text)

    async def render(self, messages: Sequence[Message]) -> str:
        return self._built().render(messages)

    async def serves_loglikelihood(self) -> tuple[bool, str]:
        model = self._built()
        ask = getattr(model, "serves_loglikelihood", None)
        if ask is None:  # an embedded model computes its own log-likelihoods
            return True, ""
        ok, why = await ask()
        return bool(ok), str(why)

    async def close(self) -> None:
        if self._model is not None:
            await self._model.aclose()


# --- the driver's side ----------------------------------------------------------------------------


class RayModel:
    """A model asked on Ray actors (see the module docstring): each actor calls ``build`` on its
    node (a picklable function: :func:`clinieval.models.spec.parse_model_spec` with the spec and
    the options minus the executor) and answers with what it built.

    :meth:`check` connects to Ray (or starts a local one), starts the actors and checks them; until
    then the model has no identity. :meth:`aclose` stops the actors and a Ray it started.
    """

    def __init__(self, name: str, build: Callable[[], Model], choice: RayChoice) -> None:
        self.choice = choice
        self._build = build
        self._name = name
        self._cluster: RayCluster | None = None
        self._ready: list[ModelReady] = []
        self._live: list[int] = []
        self._busy: list[int] = []
        self._nodes: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def identity(self) -> JSON:
        if not self._ready:
            raise RuntimeError("RayModel.identity before check()")
        return self._ready[0].identity

    @property
    def max_concurrency(self) -> int:
        return sum(self._ready[i].max_concurrency for i in self._live) if self._ready else 1

    @property
    def context_length(self) -> int | None:
        """The smallest context size any node's server reported (None: none did)."""
        sizes = [r.context_length for r in self._ready if r.context_length is not None]
        return min(sizes) if sizes else None

    @property
    def server_info(self) -> ServerInfo | None:
        """What the first node's server said about itself (recorded in a run's manifest)."""
        return next((r.server_info for r in self._ready if r.server_info is not None), None)

    @property
    def nodes(self) -> list[str]:
        """The node of each worker, in order (kept after :meth:`aclose`, for the run's summary)."""
        return list(self._nodes)

    async def check(self) -> None:
        if self._cluster is not None:
            return
        cluster = RayCluster(self.choice.address)
        cluster.connect()  # in this thread: ray.init installs its handlers where it is called
        self._cluster = cluster
        try:
            n_nodes = await asyncio.to_thread(cluster.place, ModelWorker, self.choice.workers, self._build)
            answers = await asyncio.to_thread(cluster.setups, "the model")
            for placed, answer in zip(cluster.placed, answers, strict=True):
                self._ready.append(self._check_one(placed, answer))
        except BaseException:
            self._ready = []
            await self.aclose()
            raise
        self._nodes = [p.node for p in cluster.placed]
        self._live = list(range(len(self._ready)))
        self._busy = [0] * len(self._ready)
        log.info("%s on %d Ray workers on %d nodes", self._name, len(self._ready), n_nodes)

    def _check_one(self, placed: Placed, answer: ModelReady | WorkerFailure) -> ModelReady:
        if isinstance(answer, WorkerFailure):
            raise setup_failed(placed.node, answer, "the model")
        if self._ready and answer.identity != self._ready[0].identity:
            first_node = self._cluster.placed[0].node if self._cluster else "the first node"
            raise UserError(
                f"the Ray worker on {placed.node} built the model as {answer.identity}, the one on "
                f"{first_node} as {self._ready[0].identity}; install the same model files and "
                "clinieval version on every node"
            )
        return answer

    async def _ask(self, method: str, *args: Any) -> Any:
        """Ask the least busy live actor; an actor that died is dropped and the next one asked.
        Raises :class:`WorkerGone` when none is left."""
        cluster = self._cluster
        if cluster is None:
            raise RuntimeError("RayModel used before check()")
        while self._live:
            i = min(self._live, key=lambda k: self._busy[k])
            placed = cluster.placed[i]
            self._busy[i] += 1
            try:
                return await getattr(placed.actor, method).remote(*args)
            except cluster.ray.exceptions.RayActorError as e:
                if i in self._live:
                    self._live.remove(i)
                    log.warning(
                        "the Ray worker on %s died (%s); asking the others", placed.node, first_line(e)
                    )
            except cluster.ray.exceptions.RayTaskError as e:
                # the model raised on the worker: a UserError is the user's one line, with the node
                if isinstance(e.cause, UserError):
                    raise UserError(f"on Ray node {placed.node}: {e.cause}") from None
                raise
            finally:
                self._busy[i] -= 1
        raise WorkerGone(
            f"every Ray worker of {self._name} died ({', '.join(self.nodes)}); everything finished "
            f"before it is written: run the same command again to resume (Ray's logs: {RAY_LOGS})"
        )

    def render(self, messages: Sequence[Message]) -> str:
        """The text the model sees, rendered by a worker (an embedded model's chat template is on
        its node); blocks this thread for one round trip."""
        cluster = self._cluster
        if cluster is None:
            raise RuntimeError("RayModel used before check()")
        i = self._live[0] if self._live else 0
        return str(cluster.ray.get(cluster.placed[i].actor.render.remote(list(messages))))

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        try:
            output: ModelOutput = await self._ask("generate", list(messages), config)
        except WorkerGone as e:
            return ModelOutput.failure(ErrorKind.BACKEND, str(e))
        return output

    async def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> LoglikOutput:
        try:
            output: LoglikOutput = await self._ask("loglikelihood", prompt, list(continuations))
        except WorkerGone as e:
            return LoglikOutput(error_kind=ErrorKind.BACKEND, error_message=str(e))
        return output

    async def tokenize(self, text: str) -> list[int]:
        return list(await self._ask("tokenize", text))

    async def count_tokens(self, text: str) -> int:
        return int(await self._ask("count_tokens", text))

    async def serves_loglikelihood(self) -> tuple[bool, str]:
        """True only if every node's server can be trusted with log-likelihoods."""
        cluster = self._cluster
        if cluster is None:
            raise RuntimeError("RayModel used before check()")
        for i in self._live:
            ok, why = await cluster.placed[i].actor.serves_loglikelihood.remote()
            if not ok:
                return False, f"{why} (on Ray node {cluster.placed[i].node})"
        return True, ""

    async def aclose(self) -> None:
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            await asyncio.to_thread(cluster.disconnect)


class WorkerGone(UserError):
    """Every Ray worker of a model died: one line naming the nodes and what to do."""
