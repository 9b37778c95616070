"""Fit a run to the server it talks to, before anything is written.

What the server said about itself (:mod:`clinieval.models.server`) decides two things a newcomer
cannot be expected to know:

- **scorers**: a log-likelihood scorer on a server whose prompt log-probabilities are shifted or
  missing gives wrong numbers or none. Among a task's *default* scorers it is left out, with a
  note; asked for by name, it is refused with the reason and what to use instead.
- **requests in flight**: more requests than the server has slots only wait in its queue, where
  their wait counts against ``--timeout``. The default is lowered to the slots, with a note; a
  ``--concurrency`` the user typed is kept, with a warning.

A model answered on Ray workers (``--executor ray``, :class:`~clinieval.models.ray_model.RayModel`)
is fitted for scorers (every node's server must serve log-likelihoods) but not for requests in
flight: each node's server may have its own slots, and a worker's model keeps ``--concurrency``
(default 16) in flight; docs/distributed.md says to set it.
"""

from __future__ import annotations

import logging

from clinieval.errors import UserError
from clinieval.models.base import Model
from clinieval.models.openai_http import OpenAIModel
from clinieval.models.pool import EndpointPool
from clinieval.models.ray_model import RayModel
from clinieval.models.server import ServerInfo
from clinieval.task import Task
from clinieval.types import JSON

log = logging.getLogger(__name__)


def server_info(model: Model) -> ServerInfo | None:
    """What the model's server said about itself (None for an embedded model, or before check)."""
    if isinstance(model, OpenAIModel | EndpointPool | RayModel):
        return model.server_info
    return None


def proxies_used(model: Model) -> list[JSON]:
    """The proxies the model's requests go through, one per proxied endpoint (empty: all direct),
    for the run's manifest: who else could see the traffic is part of the run's record. A model
    on Ray workers reads each node's own environment there, so it is not known here."""
    if isinstance(model, OpenAIModel):
        endpoints = [model]
    elif isinstance(model, EndpointPool):
        endpoints = model.endpoint_models
    else:
        return []
    return [r for m in endpoints if (r := m.proxy_record) is not None]


async def fit_scorers(task: Task, model: Model, *, defaults: bool) -> list[str]:
    """Leave out (defaults) or refuse (asked for) log-likelihood scorers the server cannot serve.

    Returns the notes to show. ``defaults`` says the task's scorers are its own defaults rather
    than ones the user named with ``--scorer``.
    """
    if not task.needs_loglikelihood or not isinstance(model, OpenAIModel | EndpointPool | RayModel):
        return []
    ok, why = await model.serves_loglikelihood()
    if ok:
        return []
    loglik = [s.name for s in task.scorers if s.needs == "loglikelihood"]
    rest = [s for s in task.scorers if s.needs != "loglikelihood"]
    named = ", ".join(loglik)
    if not defaults:
        raise UserError(
            f"--scorer {named} needs prompt log-probabilities, but {why}. Use a scorer that reads the "
            "generated answer (--scorer choice_extract for multiple choice), serve the model with vLLM, "
            "or run the GGUF embedded (-m llamacpp:FILE.gguf); if the server is one that returns them "
            "correctly, say so with --server-kind vllm"
        )
    if not rest:
        raise UserError(
            f"task {task.name} is scored by {named} alone, which needs prompt log-probabilities, but {why}. "
            "Serve the model with vLLM or run the GGUF embedded (-m llamacpp:FILE.gguf)"
        )
    task.scorers = rest
    kept = ", ".join(s.name for s in rest)
    return [f"note: {named} left out of the default scorers: {why}; scoring with {kept}"]


def fit_concurrency(model: Model, *, typed: int | None) -> list[str]:
    """Requests in flight no higher than the server's slots, unless the user typed a number."""
    info = None if isinstance(model, RayModel) else server_info(model)
    if info is None or info.slots is None or model.max_concurrency <= info.slots:
        return []
    if typed is not None:
        return [
            f"warning: --concurrency {typed} but the {info.describe()} works on {info.slots} request(s) "
            "at once; the rest wait in its queue, where the wait counts against --timeout"
        ]
    before = model.max_concurrency
    if isinstance(model, OpenAIModel):
        model.limit_concurrency(info.slots)
    elif isinstance(model, EndpointPool):
        model.limit_to_slots()
    return [
        f"note: the {info.describe()} works on {info.slots} request(s) at once (from {info.evidence}); "
        f"{model.max_concurrency} in flight instead of {before}"
    ]


async def fit_to_server(
    task: Task, model: Model, *, default_scorers: bool, typed_concurrency: int | None
) -> list[str]:
    """Both fits, logged as warnings (the CLI shows warnings on stderr) and returned."""
    notes = [
        *await fit_scorers(task, model, defaults=default_scorers),
        *fit_concurrency(model, typed=typed_concurrency),
    ]
    for note in notes:
        log.warning("%s", note)
    return notes
