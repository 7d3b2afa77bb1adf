"""The names covey's tasks travel under, and how they read in Flower and in a
worker's log.

``RUN_JOB`` is the wire contract other services send to; the others are covey's
own, sent worker to worker. A task reads as its job, agent, role and depth and the
first words of its task, never a whole prompt, a spec's secrets or a child's
results: Celery shows ``argsrepr``/``kwargsrepr`` in place of the real arguments
when a message carries them."""

from __future__ import annotations

RUN_JOB = "covey.run_job"  # a job's root agent; the job id is the task id
AGENT = "covey.agent"  # a sub-agent, sent by its parent's fan-out
RESUME = "covey.resume"  # the chord callback that resumes a waiting parent
PROCEED = "covey.proceed"  # an agent taken up again after its slice ran out

TASK_WORDS = 8  # enough of a task to tell siblings apart at a glance


def first_words(text: str, words: int = TASK_WORDS) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def agent(job_id: str, agent_id: str, role: str, depth: int, task: str) -> dict[str, str]:
    """The repr options of a task that runs one agent (``covey.run_job``, ``covey.agent``)."""
    return {
        "argsrepr": "()",
        "kwargsrepr": f"job={job_id} agent={agent_id} role={role} depth={depth} task={first_words(task)!r}",
    }


def resume(job_id: str, agent_id: str, spawn_round: int, children: int) -> dict[str, str]:
    """The repr options of the chord callback that resumes a waiting agent."""
    return {
        "argsrepr": f"[{children} child results]",
        "kwargsrepr": f"job={job_id} agent={agent_id} round={spawn_round}",
    }


def proceed(job_id: str, agent_id: str, step: int) -> dict[str, str]:
    """The repr options of the task that takes up an agent after its last task's slice."""
    return {"argsrepr": "()", "kwargsrepr": f"job={job_id} agent={agent_id} step={step}"}
