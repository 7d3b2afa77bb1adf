"""The ``[sim:...]`` directives that script the simulated model, and its token billing.

Pure functions only. ``covey.models.sim.handler`` decides its reply from a parsed
``Directives``. Prompt tokens are billed over ``covey.models.tokens.prompt_text``,
the text the worker estimates over, at four characters a token (a completion too),
under the worker's estimate of one token per UTF-8 byte. ``[sim:bill bytes]`` bills
one token per byte instead, the most a byte-level tokenizer can, to show the
estimate holds for dense text; ``[sim:bill over]`` bills the prompt at two tokens a
byte, more than any tokenizer could, as a provider over-reporting usage would.
An image costs ``IMAGE_TOKENS_BILLED``, OpenAI's price of one in low detail; with
``[sim:bill bytes]`` the worker's whole bound for it, with ``over`` twice that.

Directives live in the task text (the first ``user`` message):

- ``[sim:fail 429|500|401|timeout|bad_args|unknown_tool|bad_json]`` on the agent's first call
  (``bad_json``: valid JSON content that matches no schema with required properties,
  on the first call and on every structured call after it, so asking again never mends
  it; ``[sim:fail bad_json once]``: on the first ask of every structured call (one
  without an assistant turn yet) and never on a plain one, so asked again it is right;
  ``401``: an auth error whose message echoes the request's key, as OpenAI's does
  ("Incorrect API key provided: ..."), as ``[sim:echo STYLE]`` says: ``plain``,
  ``upper``, split in two by ``newline``, ``crlf``, ``space``, ``tab``, ``quoted``
  (two quoted halves) or ``escaped`` (JSON's ``\\n`` between them));
  with ``part=I`` (``[sim:fail 500 part=2]``) only in the child whose task ends
  ``(part I of W)``, so one sibling of a spawn fails and the others do not
- ``[sim:latency MS]`` sleep before every reply
- ``[sim:loop]`` call ``calculator`` forever
- ``[sim:spawn width=W depth=D]`` spawn W children, each spawning to depth D-1
- ``[sim:rounds N]`` with a spawn directive: spawn N successive waves, then answer the
  leaves of all of them; the children's tasks drop it, so only this agent repeats
- ``[sim:tokens N]`` bill every completion as exactly N tokens
- ``[sim:uncapped]`` ignore the request's reply cap, as a server that reads neither of
  its names does: the whole reply is sent and billed
- ``[sim:bill bytes|over]`` bill one token per UTF-8 byte (``over``: the prompt at two)
- ``[sim:delegate TASK]`` hand TASK to one sub-agent with ``delegate``, answer its output
- ``[sim:write PATH]`` write the task's plain text to PATH with ``write_file``,
  answer what the tool said
- ``[sim:answer TEXT]`` finish with TEXT
- ``[sim:recall]`` finish with the last answer of the conversation before the task (a
  session's), or ``nothing to recall``
- ``[sim:call NAME {"arg": ...}]`` call tool NAME with those JSON arguments (``{}`` when
  none are given; they cannot hold a ``]``), then answer what the tool said; a request
  that does not offer NAME is an HTTP 400 naming it
- ``[sim:then NAME {"arg": ...}]`` (any number, in order) with a call directive: once
  the call is answered, make each of these calls in turn, each by the agent first offered
  its tool (a handoff's target makes those its triage agent was not offered), then answer
  what the last said
- ``[sim:parallel N]`` with a call directive: make that call N times in one reply, as a
  model asking for several tools at once does
- ``What is A op B?`` anywhere in the text: use ``calculator``, answer its result
  (``result`` holds it computed directly, for answers given without tools)
- ``[sim:plan ...]``, ``[sim:debate ...]``, ``[sim:lats ...]``, ``[sim:orchestrate ...]``:
  kept as text for the strategy scripts of ``covey.models.sim.scripted``
"""

from __future__ import annotations

import json
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any

from covey import parts
from covey.models.tokens import IMAGE_TOKENS, byte_tokens, prompt_text

IMAGE_TOKENS_BILLED = 85

BILL_MODES = frozenset({"bytes", "over"})
FAIL_KINDS = frozenset({"429", "500", "401", "timeout", "bad_args", "unknown_tool", "bad_json"})
ECHO_STYLES = frozenset({"plain", "upper", "newline", "crlf", "space", "tab", "quoted", "escaped"})

_DIRECTIVE = re.compile(r"\[sim:([A-Za-z_]+)(?:\s+([^\]]*))?\]")
_SPAWN_ARGS = re.compile(r"width=(\d+)\s+depth=(\d+)")
_CALL_ARGS = re.compile(r"([a-zA-Z0-9_-]{1,64})(?:\s+(.*))?", re.DOTALL)
_FAIL_ARGS = re.compile(r"(\S+)(?:\s+(once))?(?:\s+part=(\d+))?")
_PART = re.compile(r"\(part (\d+) of \d+\)")
_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_ARITHMETIC = re.compile(r"What is\s+(-?\d+(?:\.\d+)?)\s*([-+*/])\s*(-?\d+(?:\.\d+)?)\s*\?", re.IGNORECASE)


# Directives read by the strategy scripts of ``covey.models.sim.scripted``: their
# arguments are kept as text in ``Directives.scripted`` for the script to parse.
SCRIPTED = frozenset({"plan", "debate", "lats", "orchestrate"})


class DirectiveError(ValueError):
    """A ``[sim:...]`` directive that is unknown or has malformed arguments."""


@dataclass(frozen=True)
class Spawn:
    width: int
    depth: int


@dataclass(frozen=True)
class Call:
    """A ``[sim:call NAME ARGS]``: the tool and its arguments, as JSON text."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Directives:
    """What the task text asks of the sim; ``plain`` is the text with directives removed."""

    plain: str = ""
    fail: str | None = None
    fail_once: bool = False  # ``[sim:fail bad_json once]``: the first call alone
    echo: str = "plain"  # how a 401 echoes the credential: a style of ECHO_STYLES
    latency_ms: int = 0
    loop: bool = False
    uncapped: bool = False
    recall: bool = False
    spawn: Spawn | None = None
    rounds: int = 1
    tokens: int | None = None
    bill: str | None = None  # a mode of BILL_MODES; None: four characters a token
    answer: str | None = None
    write: str | None = None
    delegate: str | None = None
    call: Call | None = None
    then: tuple[Call, ...] = ()  # calls made in turn after ``call``
    parallel: int = 1  # copies of the call in one reply
    expression: str | None = None  # "A op B" from a "What is A op B?" question
    result: int | float | None = None  # its value, whole ones as ints like the calculator's; None on x/0
    scripted: dict[str, str] = field(default_factory=dict)  # name -> arguments, for names in SCRIPTED


def prompt_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, bill: str | None = None) -> int:
    """Prompt tokens the sim reports: one per 4 chars of ``prompt_text``, rounded up;
    one per byte with ``bill="bytes"``, two with ``bill="over"``."""
    text, images = prompt_text(messages, tools), len(parts.images(messages))
    if bill is None:
        return math.ceil(len(text) / 4) + images * IMAGE_TOKENS_BILLED
    return (byte_tokens(text) + images * IMAGE_TOKENS) * (2 if bill == "over" else 1)


def text_tokens(text: str, bill: str | None = None) -> int:
    """Completion tokens for a produced text: one per 4 chars, rounded up, or one per
    byte with a ``bill`` mode; at least 1."""
    return max(1, math.ceil(len(text) / 4) if bill is None else byte_tokens(text))


def chars_within(text: str, tokens: int, bill: str | None = None) -> int:
    """How many characters of ``text`` fit in ``tokens`` completion tokens as billed."""
    if bill is None:
        return tokens * 4
    return len(text.encode("utf-8", "surrogatepass")[:tokens].decode("utf-8", "ignore"))


def parse(task: str) -> Directives:
    """Read every directive of ``task``; the first of each kind wins.

    Raises ``DirectiveError`` naming the directive when one is unknown or malformed,
    so a typo in a scripted task fails loudly instead of silently changing the run.
    """
    found: dict[str, Any] = {}
    scripted: dict[str, str] = {}
    for match in _DIRECTIVE.finditer(task):
        name, arg = match.group(1), (match.group(2) or "").strip()
        if name in SCRIPTED:
            scripted.setdefault(name, arg)
            continue
        value = _parse_one(name, arg, match.group(0))
        if name == "then":
            found["then"] = (*found.get("then", ()), value)
            continue
        found.setdefault(name, value)
    if "then" in found and "call" not in found:
        raise DirectiveError("[sim:then ...]: needs a [sim:call NAME] to follow")
    if "rounds" in found and "spawn" not in found:
        raise DirectiveError(f"[sim:rounds {found['rounds']}]: needs a [sim:spawn width=W depth=D] to repeat")
    found["latency_ms"] = found.pop("latency", 0)
    fail = found.pop("fail", None)
    if fail is not None:
        kind, once, part = fail
        parts = _PART.findall(task)
        found["fail"] = kind if part is None or (parts and int(parts[-1]) == part) else None
        found["fail_once"] = once
    arithmetic = _ARITHMETIC.search(task)
    return Directives(
        plain=_remove(task, _DIRECTIVE.finditer(task)),
        expression=f"{arithmetic[1]} {arithmetic[2]} {arithmetic[3]}" if arithmetic else None,
        result=_compute(arithmetic[1], arithmetic[2], arithmetic[3]) if arithmetic else None,
        scripted=scripted,
        **found,
    )


def _compute(left: str, op: str, right: str) -> int | float | None:
    """``left op right`` as the worker's calculator answers it (integral results as ints),
    so an answer given without the tool reads the same; ``None`` on division by zero."""
    a, b = (float(n) if "." in n else int(n) for n in (left, right))
    try:
        value = _OPERATORS[op](a, b)
    except ZeroDivisionError:
        return None
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _parse_one(name: str, arg: str, raw: str) -> Any:
    if name == "fail":
        fail = _FAIL_ARGS.fullmatch(arg)
        if fail is None or fail[1] not in FAIL_KINDS:
            raise DirectiveError(f"{raw}: expected a kind of {', '.join(sorted(FAIL_KINDS))}, then part=I or nothing")
        if fail[2] and fail[1] != "bad_json":
            raise DirectiveError(f"{raw}: only bad_json takes once (every other kind fails the first call alone)")
        return fail[1], bool(fail[2]), int(fail[3]) if fail[3] else None
    if name in ("loop", "uncapped", "recall"):
        return True
    if name == "answer":
        return arg
    if name == "bill":
        if arg not in BILL_MODES:
            raise DirectiveError(f"{raw}: expected a mode of {', '.join(sorted(BILL_MODES))}")
        return arg
    if name == "echo":
        if arg not in ECHO_STYLES:
            raise DirectiveError(f"{raw}: expected a style of {', '.join(sorted(ECHO_STYLES))}")
        return arg
    if name in ("write", "delegate"):
        if not arg:
            raise DirectiveError(f"{raw}: expected a {'path' if name == 'write' else 'task'}")
        return arg
    if name in ("call", "then"):
        return _call(arg, raw)
    if name in ("latency", "tokens", "rounds", "parallel"):
        positive = name != "latency"
        if not arg.isdigit() or (positive and int(arg) < 1):
            raise DirectiveError(f"{raw}: expected a {'positive ' if positive else ''}whole number")
        return int(arg)
    if name == "spawn":
        spawn = _SPAWN_ARGS.fullmatch(arg)
        if spawn is None or int(spawn[1]) < 1 or int(spawn[2]) < 1:
            raise DirectiveError(f"{raw}: expected width=W depth=D with W, D >= 1")
        return Spawn(width=int(spawn[1]), depth=int(spawn[2]))
    raise DirectiveError(f"{raw}: unknown sim directive {name!r}")


def echoed(credential: str, style: str) -> str:
    """``credential`` as a provider's error may echo it, in ``style`` (``ECHO_STYLES``)."""
    if style == "upper":
        return credential.upper()
    half = len(credential) // 2
    head, tail = credential[:half], credential[half:]
    joined = {"newline": "\n", "crlf": "\r\n", "space": " ", "tab": "\t", "escaped": "\\n"}
    if style in joined:
        return head + joined[style] + tail
    return f'"{head}" "{tail}"' if style == "quoted" else credential


def _call(arg: str, raw: str) -> Call:
    found = _CALL_ARGS.fullmatch(arg)
    if found is None:
        raise DirectiveError(f"{raw}: expected a tool name, then its arguments as a JSON object or nothing")
    try:
        args = json.loads(found[2] or "{}")
    except ValueError as e:
        raise DirectiveError(f"{raw}: the arguments are not JSON: {e}") from None
    if not isinstance(args, dict):
        raise DirectiveError(f"{raw}: the arguments must be a JSON object")
    return Call(found[1], json.dumps(args))


def child_tasks(task: str, spawn_round: int = 1) -> list[str]:
    """The tasks a ``[sim:spawn width=W depth=D]`` agent gives its W children.

    Each is the parent's text with the spawn directive lowered to depth D-1 (removed
    at 0), any rounds directive removed (only the agent given it repeats), every other
    directive kept, `` (round R)`` appended from the second round on so waves differ,
    and `` (part i of W)`` so siblings differ.
    """
    task = _remove(task, (m for m in _DIRECTIVE.finditer(task) if m.group(1) == "rounds"))
    match = next(m for m in _DIRECTIVE.finditer(task) if m.group(1) == "spawn")
    spawn = _parse_one("spawn", (match.group(2) or "").strip(), match.group(0))
    if spawn.depth > 1:
        lowered = f"[sim:spawn width={spawn.width} depth={spawn.depth - 1}]"
        base = task[: match.start()] + lowered + task[match.end() :]
    else:
        base = _remove(task, [match])
    base = base.strip() + (f" (round {spawn_round})" if spawn_round > 1 else "")
    return [f"{base} (part {i} of {spawn.width})" for i in range(1, spawn.width + 1)]


def _remove(text: str, matches: Any) -> str:
    """``text`` without the matched spans, joining the pieces around each with one space."""
    for match in reversed(list(matches)):
        left, right = text[: match.start()].rstrip(), text[match.end() :].lstrip()
        text = f"{left} {right}" if left and right else left + right
    return text.strip()
