"""The base of covey's tasks: a step that hands on to another task just ends.

An agent step that fans out (or pauses after a slice) replaces itself with the
task that goes on with it (``Task.replace``). Celery ends a replaced task by raising
``Ignore``, and for every ``Ignore`` its tracer builds two ``ExceptionInfo`` objects,
copying each frame's code positions and formatting the traceback: that was a
tenth of a worker's CPU per agent. Here the replaced step returns instead.
``replace`` has already moved everything the request carried onto the
replacement (its task id, chord, links, chain), so the step's own end must do
nothing with them: no result stored (the replacement stores one under the same
id), no chord counted (the replacement counts), no callback sent (the replacement
sends them).
"""

from __future__ import annotations

from typing import Any

from celery import Task

HANDED_ON = "handed on to its replacement"


class HandingOn(Task):
    def on_replace(self, sig: Any) -> str:
        if self.request.is_eager:  # run inline: Celery's own way returns its result
            return super().on_replace(sig)
        sig.delay()
        request = self.request
        request.ignore_result = True
        request.chord = None
        request.callbacks = request.chain = None
        return HANDED_ON
