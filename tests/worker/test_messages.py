"""Every message an agent sends carries its job's priority, as the broker orders it."""

from __future__ import annotations

import pytest

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.spec import AgentSpec
from covey.worker.messages import Route, Sent, agent_message, proceed_message, resume_message

SECRET = b"s" * 32


@pytest.mark.parametrize("redis_broker, level", [(True, 2), (False, 7)])
def test_a_child_a_resume_and_a_proceed_go_at_the_jobs_priority(redis_broker, level):
    parent = RunContext(job_id="j", agent_id="root", budget=Budget(max_depth=1), priority=7)
    child = parent.child("root-sub-1", Budget(max_depth=0), allow=None)
    route = Route("covey", redis_broker)
    sent = Sent(route, {}, countdown=2.0)
    messages = [
        agent_message(SECRET, child, AgentSpec(task="t"), route),
        resume_message(SECRET, "j", parent, 1, 1, None, sent),
        proceed_message(SECRET, "j", parent, 3, sent),
    ]
    assert [(m.options["queue"], m.options["priority"]) for m in messages] == [("covey", level)] * 3
    assert messages[2].now().options["priority"] == level  # a countdown dropped, the priority kept
