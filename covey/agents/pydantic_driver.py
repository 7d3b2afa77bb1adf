"""Run a pydantic-ai agent once, to its end or to where it parks (``covey.agents.session``).

Its model is pydantic-ai's own OpenAI chat model, so what covey sends is what
pydantic-ai would send a Chat Completions endpoint (its messages, its tools'
schemas and its output tool or schema) and its reply is read by pydantic-ai's own
code: covey answers the model's HTTP requests itself, from the journal, or parks
the run at the first request past it.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits

from covey.agents import loops, session
from covey.agents.session import Done, Raised, Request, Session, digest

BASE_URL = "http://covey.invalid/v1"  # never reached: the transport answers every request
MODEL = "covey"  # the name pydantic-ai sends; which model answers is the job's


class Answered(httpx2.AsyncBaseTransport):
    """The OpenAI client's transport: each chat completion answered through the session."""

    def __init__(self, journal: Session, run_by_covey: frozenset[str]) -> None:
        self._journal, self._runs = journal, run_by_covey

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(await request.aread())
        messages, functions = body["messages"], list(body.get("tools") or [])
        answer = body.get("response_format") or {}
        named = answer.get("json_schema") or {}
        schema = named.get("schema") if answer.get("type") == "json_schema" else None
        names = [f["function"]["name"] for f in functions]
        asked = Request(
            messages,
            functions,
            schema,
            [n for n in names if n in self._runs],
            [],
            digest(messages, functions, schema),
            schema_name=named.get("name") or "final_output",
        )
        reply = await self._journal.reply_to(asked)
        return httpx2.Response(200, json=completion(reply), request=request)


def completion(reply: dict[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` body carrying covey's reply (its usage is covey's ledger's)."""
    calls = [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
        for c in reply.get("tool_calls") or []
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {
        "id": "covey",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [choice],
        "usage": usage,
    }


def run(
    agent: Agent[Any, Any], task: str, journal: Session, max_turns: int, offered: list[dict[str, Any]]
) -> Done | Raised | None:
    """Run ``agent`` on ``task`` over ``journal``, with covey's tools ``offered`` (function
    schemas) beside its own: its end, or None when it parked."""
    from covey.agents import pydantic_tools

    own = pydantic_tools.names(agent)
    added = pydantic_tools.covey_tools([f for f in offered if f["function"]["name"] not in own])
    runs = own | {t.name for t in added.tools.values()}
    return loops.run(lambda: _run(agent, task, journal, runs, max_turns, added))


async def _run(
    agent: Agent[Any, Any],
    task: str,
    journal: Session,
    runs: frozenset[str],
    max_turns: int,
    added: FunctionToolset[Any],
) -> Done | Raised | None:
    client = AsyncOpenAI(
        api_key="covey",
        base_url=BASE_URL,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=Answered(journal, runs)),
    )
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
    try:
        ended = await session.until_parked(
            journal,
            agent.run(task, model=model, usage_limits=UsageLimits(request_limit=max_turns), toolsets=[added]),
        )
    finally:
        await client.close()
    return Done(ended.output) if not isinstance(ended, Raised | None) else ended
