"""The MCP servers file: what it accepts, and the one line that refuses a bad one."""

from __future__ import annotations

from pathlib import Path

import pytest

from covey.config.settings import Settings
from covey.tools.mcp.config import HttpServer, McpFileError, StdioServer, load

GOOD = """
[servers.files]
command = "python"
args = ["-m", "my_mcp_server"]
env = { LOG_LEVEL = "warning" }
timeout = 12.5

[servers.search]
url = "http://127.0.0.1:8931/mcp"
headers = { Authorization = "MCP_TOKEN" }
"""


def servers_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mcp.toml"
    path.write_text(text)
    return path


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(McpFileError) as caught:
        load(servers_file(tmp_path, text))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_issue_example_reads_as_one_stdio_and_one_http_server(tmp_path):
    servers = load(servers_file(tmp_path, GOOD))
    assert servers["files"] == StdioServer(
        command="python", args=["-m", "my_mcp_server"], env={"LOG_LEVEL": "warning"}, timeout=12.5
    )
    search = servers["search"]
    assert isinstance(search, HttpServer)
    assert (str(search.url), search.headers, search.timeout) == (
        "http://127.0.0.1:8931/mcp",
        {"Authorization": "MCP_TOKEN"},
        30.0,
    )


def test_an_empty_file_has_no_servers(tmp_path):
    assert load(servers_file(tmp_path, "")) == {}


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('command = "python"\ntimeout = 0', "server 'files': timeout: Input should be greater than 0"),
        ('command = "python"\ntimeout = "soon"', "server 'files': timeout:"),
        ('command = ""', "server 'files': command:"),
        ('command = "python"\nargs = "-m x"', "server 'files': args:"),
        ('command = "python"\nenv = { LEVEL = 3 }', "server 'files': env.LEVEL:"),
        ('command = "python"\ncwd = "/tmp"', "server 'files': cwd: Extra inputs are not permitted"),
        ('url = "not a url"', "server 'files': url:"),
        ('url = "http://me:pw@h/mcp"', "server 'files': url: must not hold credentials"),
        ('url = "http://h/mcp"\nheaders = { Authorization = "Bearer abc123" }', "server 'files': headers:"),
        ('args = ["x"]', "server 'files': give either command (a stdio server) or url"),
        ('command = "python"\nurl = "http://h/mcp"', "server 'files': give either command"),
    ],
)
def test_a_bad_server_is_refused_in_one_line_naming_server_and_field(tmp_path, table, named):
    message = refusal(tmp_path, f"[servers.files]\n{table}\n")
    assert message.startswith(f"{tmp_path / 'mcp.toml'}: ")
    assert named in message


def test_a_header_value_pasted_as_a_secret_is_never_echoed(tmp_path):
    message = refusal(tmp_path, '[servers.s]\nurl = "http://h/mcp"\nheaders = { Authorization = "Bearer abc123" }\n')
    assert "abc123" not in message
    assert "header Authorization: must be the NAME of the environment variable" in message


def test_a_server_name_must_fit_in_a_tool_name(tmp_path):
    assert "server 'my files': a name is 1 to 48 of" in refusal(tmp_path, '[servers."my files"]\ncommand = "x"\n')
    assert f"server {'s' * 49!r}: a name" in refusal(tmp_path, f'[servers.{"s" * 49}]\ncommand = "x"\n')


def test_a_file_that_is_not_a_servers_file_says_what_it_is(tmp_path):
    assert "not valid TOML" in refusal(tmp_path, "[servers.files\n")
    assert "unknown table 'server'" in refusal(tmp_path, '[server.files]\ncommand = "x"\n')
    assert "servers: must be a table" in refusal(tmp_path, 'servers = "files"\n')
    assert "server 'files': must be a table" in refusal(tmp_path, 'servers = { files = "x" }\n')
    with pytest.raises(McpFileError, match="cannot read the MCP servers file"):
        load(tmp_path / "missing.toml")


def test_a_servers_file_too_large_or_not_utf8_is_one_line_naming_the_bound_or_the_byte(tmp_path):
    with pytest.raises(McpFileError, match=r"^/dev/zero: larger than 1 MiB, the most covey reads of it$"):
        load(Path("/dev/zero"))
    path = tmp_path / "servers.toml"
    path.write_bytes(b'[servers.files]\ncommand = "np\xe9x"\n')  # Latin-1, not UTF-8
    with pytest.raises(McpFileError, match=rf"^{path}: not UTF-8 text: byte 0xe9 at offset 29$"):
        load(path)


def test_covey_mcp_names_the_file(monkeypatch, tmp_path):
    path = servers_file(tmp_path, GOOD)
    monkeypatch.setenv("COVEY_MCP", str(path))
    assert Settings().mcp == path
    monkeypatch.delenv("COVEY_MCP")
    assert Settings().mcp is None
