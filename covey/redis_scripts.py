"""Several Lua script calls in one round trip, loading any script Redis lacks.

A step's writes that go together (its running record and its slot take, a poll's
claim marks, a spawn's openings) cost one round trip instead of one each. They go
by EVALSHA in a plain pipeline: a pipeline of redis-py ``Script`` objects first
asks SCRIPT EXISTS, a round trip more. A Redis that restarted or failed over has
no scripts, and one that workers of another covey version use has their scripts
and not this one's: the first call it refused is loaded and run again, in order
with every call after it, the calls before it having run (all of them, when a
WAIT must cover their writes: a rerun may go on another connection of the pool).
A later call may read what an earlier one writes (a result stored only if the
final record before it was written), so one that ran without it runs again
after it. Every caller's scripts are safe to run again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from importlib.resources import files
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError

LOADS = 3  # a Redis that loses its scripts again between a load and the run, that often, is not there


class Reply(IntEnum):
    """What a covey script's reply begins with: one number means one thing in every
    script. A script is loaded with these as Lua constants (``source``) and returns
    them by name; its header says which it returns and what follows each."""

    OK = 1  # done as asked: granted, opened, counted, charged, held, written, saved
    REFUSED = 0  # a cap refuses it, or a scope at its running cap queues it: a reason follows
    ALREADY = 2  # done before, by an earlier run: a settled reservation, a final node
    MISSING = -1  # a row it must read or charge is gone (never opened, or wiped): nothing written
    CANCELLED = -2  # the job was cancelled
    PARENT_CANCELLED = -3  # an agent of the chain was cancelled by its parent
    WINDOW_FULL = 3  # a scope's window of this minute is full: ask again next minute
    NO_PRICES = 4  # a row has a cost cap and the model has no prices
    MISMATCH = 5  # it names another chain or scopes than its reservation's: a caller's bug
    ELSEWHERE = 6  # another run of the agent's step holds its slot
    MOVED_ON = 7  # another run of the step went on: the message taken up is no longer expected
    WOKEN = 8  # saved, and what it saved is due at once (a waiting agent's resume)
    HELD_UP = 9  # short only of what calls in flight hold: ask again once they settle


# The replies as Lua locals, put before every script that returns them.
LUA_REPLIES = f"local {', '.join(r.name for r in Reply)} = {', '.join(str(r.value) for r in Reply)}\n"
_EVENTS = (files("covey") / "lua" / "events.lua").read_text(encoding="utf-8")


def source(package: str, name: str, *libs: str, events: bool = False) -> str:
    """The Lua of ``package``'s ``lua/<name>``, after the reply constants, then with
    ``events`` the writing of a job's events (``lua/events.lua``), then ``libs``."""
    lua = (files(package) / "lua" / name).read_text(encoding="utf-8")
    return LUA_REPLIES + (_EVENTS if events else "") + "".join(libs) + lua


def events_tail(stream: str, ttl: int, events: Sequence[str]) -> tuple[list[str], list[str | int]]:
    """The KEYS and ARGV that end a script written with ``events``: ``stream`` (the
    job's event stream, kept ``ttl`` seconds past its last event) and ``events``,
    each a JSON object or '' for none."""
    if not events:
        return [], [0]
    return [stream], [ttl, *events, len(events)]


@dataclass(frozen=True)
class ScriptCall:
    script: Script
    keys: Sequence[str | bytes]
    args: Sequence[Any]

    def __call__(self) -> Any:
        """Its reply, run alone (redis-py's Script loads itself where Redis lacks it)."""
        return self.script(keys=self.keys, args=self.args)


def run(client: redis.Redis, calls: Sequence[ScriptCall], wait_replicas: int = 0, wait_ms: int = 0) -> list[Any]:
    """Each call's reply, in order, from one round trip; with ``wait_replicas``, a
    WAIT for that many replicas (at most ``wait_ms``) ends it and its count is the
    last reply. A script's own error is raised."""
    replies: list[Any] = [None] * len(calls)
    todo = list(range(len(calls)))
    for loads in range(LOADS + 1):
        with client.pipeline(transaction=False) as pipe:
            for i in todo:
                call = calls[i]
                pipe.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
            if wait_replicas:
                pipe.execute_command("WAIT", wait_replicas, wait_ms)
            answers = pipe.execute(raise_on_error=False)
        confirmed = answers.pop() if wait_replicas else None
        refused = []
        for i, answer in zip(todo, answers):
            if isinstance(answer, NoScriptError):
                refused.append(i)
            elif isinstance(answer, Exception):
                raise answer
            replies[i] = answer
        if not refused:
            return [*replies, confirmed] if wait_replicas else replies
        if loads == LOADS:
            raise NoScriptError(f"Redis lost its scripts {LOADS} times while they ran")
        for script in {calls[i].script.sha: calls[i].script for i in refused}.values():
            client.script_load(script.script)
        todo = list(range(len(calls))) if wait_replicas else list(range(refused[0], len(calls)))
    raise AssertionError("unreachable")
