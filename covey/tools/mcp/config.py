"""The MCP servers file (``COVEY_MCP``): which servers a worker's agents may use.

::

    [servers.files]                 # stdio: the worker starts the process
    command = "python"
    args = ["-m", "my_mcp_server"]
    env = { LOG_LEVEL = "warning" }
    timeout = 30                    # seconds per call (default 30)
    include = ["read_*", "list_*"]  # its tools agents are offered (default all); exclude = [...] too
    approve = ["write_*"]           # its tools whose calls wait for a person's approval

    [servers.search]                # streamable HTTP
    url = "http://127.0.0.1:8931/mcp"
    headers = { Authorization = "MCP_TOKEN" }   # NAMES of variables holding the values

A header's value is the NAME of an environment variable, never the secret, so the
file can be committed and shown; the value is read when the session opens and is
never logged. A stdio server inherits only the SDK's short list of safe variables
(``PATH``, ``HOME``, ...) plus its ``env``.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from covey.budgets.budget import MAX_SECONDS
from covey.config.files import read_toml
from covey.errors import CoveyError
from covey.tools.tool import DEFAULT_TIMEOUT

# A server's name starts each of its tools' names (`files__read`), which must stay
# within OpenAI's function-name rule: the same characters, and room for a tool.
SERVER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,48}$")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class McpFileError(CoveyError, ValueError):
    """An MCP servers file that cannot be used; one line naming the file, the server and the field."""


class _Server(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=MAX_SECONDS, description="seconds per call")
    approve: list[str] = Field(
        default_factory=list,
        description="patterns (fnmatch) of the server's own tool names whose calls wait for a person's approval",
    )
    include: list[str] = Field(
        default_factory=lambda: ["*"],
        description="patterns (fnmatch) of the server's own tool names it serves agents: the rest are not offered",
    )
    exclude: list[str] = Field(default_factory=list, description="patterns of its tool names it does not serve")

    def serves(self, tool: str) -> bool:
        """Whether its tool ``tool`` (its own name) is served: included and not excluded."""
        return _any(tool, self.include) and not _any(tool, self.exclude)

    def approves(self, tool: str) -> bool:
        """Whether each call of its tool ``tool`` waits for a person's approval."""
        return _any(tool, self.approve)


class StdioServer(_Server):
    """A server the worker starts as a child process and talks to over its stdin and stdout."""

    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    def describe(self) -> str:
        return f"stdio: {' '.join([self.command, *self.args])}"


class HttpServer(_Server):
    """A server already running, reached over streamable HTTP."""

    url: HttpUrl
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, url: HttpUrl) -> HttpUrl:
        # The URL is logged and shown; a secret goes in a header, named by its variable.
        if url.username or url.password:
            raise PydanticCustomError(
                "url_credentials", "must not hold credentials; send them in headers, named by their variables"
            )
        return url

    @field_validator("headers")
    @classmethod
    def _values_name_variables(cls, headers: dict[str, str]) -> dict[str, str]:
        # The value is never echoed: a token pasted here by mistake must not reach a log.
        for header, variable in headers.items():
            if not _ENV_NAME.fullmatch(variable):
                raise PydanticCustomError(
                    "env_name",
                    "header {header}: must be the NAME of the environment variable holding its value, "
                    "never the value itself",
                    {"header": header},
                )
        return headers

    def describe(self) -> str:
        return f"streamable HTTP: {self.url}"


Server = StdioServer | HttpServer


def load(path: Path) -> dict[str, Server]:
    """The validated servers of an MCP servers file, by name; ``McpFileError`` names what is wrong."""
    raw = read_toml(path, "the MCP servers file (COVEY_MCP)", McpFileError)
    unknown = sorted(set(raw) - {"servers"})
    if unknown:
        raise McpFileError(f"{path}: unknown table {unknown[0]!r}; servers go in [servers.NAME] tables")
    tables = raw.get("servers", {})
    if not isinstance(tables, dict):
        raise McpFileError(f"{path}: servers: must be a table of [servers.NAME] tables")
    return {name: _server(path, name, table) for name, table in tables.items()}


def _server(path: Path, name: str, table: Any) -> Server:
    where = f"{path}: server {name!r}"
    if not SERVER_NAME.fullmatch(name):
        raise McpFileError(f"{where}: a name is 1 to 48 of a-z A-Z 0-9 _ - (it starts its tools' names)")
    if not isinstance(table, dict):
        raise McpFileError(f"{where}: must be a table")
    if ("command" in table) == ("url" in table):
        raise McpFileError(f"{where}: give either command (a stdio server) or url (a streamable HTTP server)")
    kind: type[Server] = StdioServer if "command" in table else HttpServer
    try:
        return kind.model_validate(table)
    except ValidationError as e:
        first = e.errors()[0]  # one line: the first field at fault
        field = ".".join(str(part) for part in first["loc"]) or "the table"
        raise McpFileError(f"{where}: {field}: {first['msg']}") from e


def _any(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
