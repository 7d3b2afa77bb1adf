"""MCP servers' tools for the worker: the servers file (``COVEY_MCP``), a session per
server per process through the official ``mcp`` client, and their tools as ``Tool``s.

A worker process calls ``mcp_tools(settings.mcp, late=registry.add,
changed=registry.renew)`` once at start and registers what it returns, what it
hands ``late`` of a server that comes up later, and what it hands ``changed`` of a
server whose tools changed; ``McpServers`` is the same with a handle to close the
sessions at exit.
"""

from covey.tools.mcp.config import McpFileError
from covey.tools.mcp.servers import McpServers, mcp_tools
from covey.tools.mcp.session import McpToolFailed, McpUnavailable

__all__ = ["McpFileError", "McpServers", "McpToolFailed", "McpUnavailable", "mcp_tools"]
