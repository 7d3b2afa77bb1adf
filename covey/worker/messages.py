"""The messages a step sends: a child's ``covey.agent``, a waiting agent's
``covey.resume`` and a paused agent's ``covey.proceed``.

Each is recorded in its job's outbox before it is sent (``covey.store.outbox``)
and signed for the task id it carries (``covey.worker.signing``), over what the
task that takes it up will trust. A resume and a proceed go under their agent's
own task id, so a job's root task id stays its job id to the end; a child's id
is derived from its agent id, so a message made again is the same message.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from covey import wire
from covey.config import priorities
from covey.context import RunContext
from covey.spec import AgentSpec
from covey.store.outbox import Message
from covey.worker import signing, telemetry


@dataclass(frozen=True)
class Route:
    """Where a job's messages go: the ``queue`` the job was sent to, at the job's
    priority as the broker orders it (kombu's Redis, or RabbitMQ: ``covey.config.priorities``)."""

    queue: str
    redis_broker: bool

    def options(self, ctx: RunContext) -> dict[str, Any]:
        return {"queue": self.queue, "priority": priorities.on_broker(ctx.priority, self.redis_broker)}


@dataclass(frozen=True)
class Sent:
    """How a step's own next message goes: on the job's ``route``, taking over the
    options its sender linked to the task (``carried``), after ``countdown`` seconds."""

    route: Route
    carried: dict[str, Any]
    countdown: float | None = None


def agent_message(secret: bytes, ctx: RunContext, spec: AgentSpec, route: Route) -> Message:
    """A child's ``covey.agent`` message: its job and agent ids, labelled for Flower
    with its role, depth and task. What it runs is what its parent opened it with,
    on its ledger row (``AgentTerms.spec``): nothing the message carries is trusted
    beyond the ids its signature covers.

    Its result is not kept under its task id: the parent reads the child's tree
    node, and a kept result would cost Redis most of a kilobyte per agent for
    ``COVEY_JOB_TTL``."""
    payload = agent_payload(ctx.job_id, ctx.agent_id)
    task_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"covey:{ctx.job_id}/{ctx.agent_id}"))
    options = {
        "ignore_result": True,
        **route.options(ctx),
        **wire.agent(ctx.job_id, ctx.agent_id, spec.role, ctx.depth, spec.task),
        **telemetry.headers(ctx),
    }
    return Message(wire.AGENT, task_id, {**payload, "sig": signing.sign(secret, task_id, payload)}, options)


def agent_payload(job_id: str, agent_id: str) -> dict[str, Any]:
    return {"job_id": job_id, "agent_id": agent_id}


def resume_payload(job_id: str, agent_id: str, spawn_round: int, step: int | None = None) -> dict[str, Any]:
    payload = {"job_id": job_id, "agent_id": agent_id, "spawn_round": spawn_round}
    return payload if step is None else {**payload, "step": step}


def proceed_payload(job_id: str, agent_id: str, step: int) -> dict[str, Any]:
    return {"job_id": job_id, "agent_id": agent_id, "step": step, "task": "proceed"}


def resume_message(
    secret: bytes, task_id: str, ctx: RunContext, spawn_round: int, children: int, step: int | None, sent: Sent
) -> Message:
    """The resume of a waiting agent: the root's stores the job's result. One of a
    ``join="each"`` names the step it resumes (``step``): such an agent waits many
    times in one round."""
    payload = resume_payload(ctx.job_id, ctx.agent_id, spawn_round, step)
    labels = wire.resume(ctx.job_id, ctx.agent_id, spawn_round, children, step)
    return _own(wire.RESUME, secret, task_id, ctx, payload, payload, labels, sent)


def proceed_message(secret: bytes, task_id: str, ctx: RunContext, step: int, sent: Sent) -> Message:
    """The task that takes a paused agent up again; a waiting agent's is sent
    ``sent.countdown`` seconds ahead (a re-send waits it out again)."""
    kwargs = {"job_id": ctx.job_id, "agent_id": ctx.agent_id, "step": step}
    payload = proceed_payload(ctx.job_id, ctx.agent_id, step)
    return _own(wire.PROCEED, secret, task_id, ctx, kwargs, payload, wire.proceed(ctx.job_id, ctx.agent_id, step), sent)


def _own(
    name: str,
    secret: bytes,
    task_id: str,
    ctx: RunContext,
    kwargs: dict[str, Any],
    payload: dict[str, Any],
    labels: dict[str, str],
    sent: Sent,
) -> Message:
    """A message of the agent's own, under its task id, signed over ``payload``."""
    options: dict[str, Any] = {
        "ignore_result": ctx.depth > 0,
        **sent.route.options(ctx),
        **labels,
        **telemetry.headers(ctx),
    }
    if sent.countdown:
        options["countdown"] = round(sent.countdown, 3)
    sig = signing.sign(secret, task_id, payload)
    return Message(name, task_id, {**kwargs, "sig": sig}, {**options, **sent.carried})
