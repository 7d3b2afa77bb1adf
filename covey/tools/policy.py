"""One tool call under the rules every tool obeys: a timeout and an output cap.

``run`` takes arguments already checked (``covey.tools.arguments``). A tool runs in
a thread of its own so its timeout holds whatever it does: a sync tool stuck in a
call it never returns from is left behind (a daemon thread, which Python cannot
kill) and the agent goes on with ``ToolTimeout``. Output past the tool's
``max_output`` bytes is cut, with a note the model reads saying how much was cut.
"""

from __future__ import annotations

import threading
from typing import Any

from covey.parts import File, Image
from covey.tools.tool import Output, Tool, ToolContext


class ToolTimeout(TimeoutError):
    """The tool did not return within its timeout."""


def run(tool: Tool, args: dict[str, Any], ctx: ToolContext, seconds_left: float | None = None) -> Output:
    """The tool's text, cut to its ``max_output``, or the ``Image`` or ``File`` it
    returned (each within its own cap); raises what the tool raised, or
    ``ToolTimeout`` past its timeout or the ``seconds_left`` before the agent's deadline."""
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["text"] = tool.run(args, ctx)
        except Exception as e:
            outcome["error"] = e
        except BaseException as e:  # a tool's sys.exit() must not end the worker's thread
            outcome["error"] = RuntimeError(f"the tool raised {type(e).__name__}: {e}")

    thread = threading.Thread(target=call, name=f"covey-tool-{tool.name}", daemon=True)
    deadline_first = seconds_left is not None and seconds_left < tool.timeout
    thread.start()
    thread.join(seconds_left if deadline_first else tool.timeout)
    if thread.is_alive():
        if deadline_first:
            raise ToolTimeout(f"tool {tool.name!r} did not return in the {seconds_left:.3g}s left before a deadline")
        raise ToolTimeout(f"tool {tool.name!r} did not return within its timeout of {tool.timeout:g}s")
    if "error" in outcome:
        raise outcome["error"]
    text = outcome["text"]
    if isinstance(text, Image | File):
        return text
    if not isinstance(text, str):
        raise TypeError(f"tool {tool.name!r} returned {type(text).__name__}, not text, an Image or a File")
    return capped(text, tool.max_output)


def capped(text: str, max_output: int, bound: str = "max_output={}") -> str:
    """``text`` if it fits in ``max_output`` UTF-8 bytes, else its first bytes that fit
    (whole characters) and a note of what was cut, naming the ``bound`` that cut it
    (formatted with ``max_output``): the tool's own, or a transcript's preview."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_output:
        return text
    kept = data[:max_output].decode("utf-8", "ignore")
    why = bound.format(max_output)
    return f"{kept}\n[output cut: {len(data) - max_output} of {len(data)} bytes not shown ({why})]"
