"""MCP servers' tools for the worker: the servers file (``COVEY_MCP``), a session per
server per process through the official ``mcp`` client, and their tools as ``Tool``s.

The worker calls ``mcp_tools(path)`` once at start and registers what it returns.
"""

from covey.tools.mcp.config import McpFileError
from covey.tools.mcp.servers import mcp_tools
from covey.tools.mcp.session import McpToolFailed, McpUnavailable

__all__ = ["McpFileError", "McpToolFailed", "McpUnavailable", "mcp_tools"]
