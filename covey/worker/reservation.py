"""What a model call of an agent reserves: its prompt's bound and the model's prices.

The bound is the smallest strict one that applies (``covey.models.tokens``): the
tokenizer the models file names, or the bytes, or the previous call's reported
prompt plus what was appended since. The call's ``PromptMark`` is taken before it
is sent, since a strategy may append to the same list of messages afterwards.

A model with fallbacks (the models file's ``fallbacks``) reserves for the dearest
answer of its chain: the largest of their prompts' bounds (a fallback's counted
whole, by its own tokenizer or the bytes) at the highest of their prices, and a
reply is charged at the price of the model that gave it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from covey.budgets.ledger import Pricing
from covey.budgets.prices import Price, dearest
from covey.models.catalog import Endpoint, UnservableModel
from covey.models.structured import asking
from covey.models.tokens import PromptMark, prompt_bound
from covey.orchestration.actions import CallModel
from covey.results import Usage
from covey.worker.agent_state import AgentState
from covey.worker.deps import Deps


@dataclass(frozen=True)
class Reservation:
    prompt: int  # the prompt's bound
    price: Price | None  # what is reserved at: the dearest of its chain's (None: no prices)
    sent: PromptMark  # this call's request, its prompt tokens filled in once reported
    model: str
    prices: Mapping[str, Price | None]  # each model of the chain's own, by name: what an answer is charged at

    @property
    def pricing(self) -> Pricing:
        return Pricing(model=self.model, price=self.price, prompt_tokens=self.prompt)

    def costed(self, usage: Usage, answered_by: str | None = None) -> Usage:
        """``usage`` with what it cost at the prices of the model that answered
        (``answered_by``, a fallback; the model asked when None); nothing without them."""
        price = self.prices[answered_by or self.model]
        if price is None:
            return usage
        cost = price.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
        return usage.model_copy(update={"cost_micros": cost})

    def reported(self, usage: Usage) -> PromptMark:
        """The mark the next call is bounded from, once this one reported ``usage``."""
        return self.sent.model_copy(update={"tokens": usage.prompt_tokens})


def reservation(deps: Deps, state: AgentState, action: CallModel, tools: list[dict[str, Any]]) -> Reservation:
    model = state.spec.model
    try:
        chain = deps.llm.catalog.chain(model)
    except UnservableModel:  # the call fails saying so, charged nothing: bound it by its bytes
        prompt, sent = prompt_bound(action.messages, tools, action.schema, None, state.prompt_mark)
        return Reservation(prompt=prompt, price=None, sent=sent, model=model, prices={model: None})
    (_, endpoint), others = chain[0], chain[1:]
    prompt, sent = _bound(deps, endpoint, action, tools, state.prompt_mark)
    prompt = max([prompt, *(_bound(deps, e, action, tools, None)[0] for _, e in others)])
    prices = [e.price for _, e in chain]
    price = None if endpoint.price is None else dearest([p for p in prices if p is not None])
    return Reservation(prompt, price, sent, model, prices={name: e.price for name, e in chain})


def _bound(
    deps: Deps, endpoint: Endpoint, action: CallModel, tools: list[dict[str, Any]], last: PromptMark | None
) -> tuple[int, PromptMark]:
    """The prompt's bound as ``endpoint`` is sent it, in the structured mode this worker
    speaks to it now (a refusal may have taught another than the models file's);
    ``last``: the mark of the call before, which that endpoint answered."""
    messages, schema = action.messages, action.schema
    structured = deps.llm.dialects.of(endpoint).structured
    if schema is not None and structured != "json_schema":
        # Bounded as sent: the schema rides in a message or a tool, with words around it.
        messages, tools, _ = asking(structured, schema, action.schema_name, messages, tools)
        schema = None
    return prompt_bound(messages, tools, schema, endpoint.tokenizer, last)
