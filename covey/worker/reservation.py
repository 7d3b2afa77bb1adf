"""What a model call of an agent reserves: its prompt's bound and the model's prices.

The bound is the smallest strict one that applies (``covey.models.tokens``): the
tokenizer the models file names, or the bytes, or the previous call's reported
prompt plus what was appended since. The call's ``PromptMark`` is taken before it
is sent, since a strategy may append to the same list of messages afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from covey.budgets.ledger import Pricing
from covey.budgets.prices import Price
from covey.models.catalog import UnservableModel
from covey.models.structured import asking
from covey.models.tokens import PromptMark, prompt_bound
from covey.orchestration.actions import CallModel
from covey.results import Usage
from covey.worker.agent_state import AgentState
from covey.worker.deps import Deps


@dataclass(frozen=True)
class Reservation:
    prompt: int  # the prompt's bound
    price: Price | None  # None: the model has no prices
    sent: PromptMark  # this call's request, its prompt tokens filled in once reported
    model: str

    @property
    def pricing(self) -> Pricing:
        return Pricing(model=self.model, price=self.price, prompt_tokens=self.prompt)

    def costed(self, usage: Usage) -> Usage:
        """``usage`` with what it cost at the model's prices (nothing without them)."""
        if self.price is None:
            return usage
        cost = self.price.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
        return usage.model_copy(update={"cost_micros": cost})

    def reported(self, usage: Usage) -> PromptMark:
        """The mark the next call is bounded from, once this one reported ``usage``."""
        return self.sent.model_copy(update={"tokens": usage.prompt_tokens})


def reservation(deps: Deps, state: AgentState, action: CallModel, tools: list[dict[str, Any]]) -> Reservation:
    model = state.spec.model
    try:
        endpoint = deps.llm.catalog.endpoint(model)
    except UnservableModel:  # the call fails saying so, charged nothing: bound it by its bytes
        endpoint = None
    tokenizer = endpoint.tokenizer if endpoint else None
    messages, schema = action.messages, action.schema
    if schema is not None and endpoint is not None and endpoint.structured != "json_schema":
        # Bounded as sent: the schema rides in a message or a tool, with words around it.
        messages, tools, _ = asking(endpoint.structured, schema, action.schema_name, messages, tools)
        schema = None
    prompt, sent = prompt_bound(messages, tools, schema, tokenizer, state.prompt_mark)
    return Reservation(prompt=prompt, price=endpoint.price if endpoint else None, sent=sent, model=model)
