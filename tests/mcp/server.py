"""A streamable-HTTP MCP server for agentd's MCP tests, built with the Python `mcp` SDK.

Every request must carry `Authorization: Bearer $MCP_TEST_TOKEN` (agentd sends it from an
`env:` header value). Tools: `whoami` (proves the call went through), `add_tool` (registers a
new tool at runtime and sends `notifications/tools/list_changed`), `fail` (an `isError`
result). Tools returning `str` answer with structured content `{"result": ...}` (the SDK's
default). It binds 127.0.0.1 on a free port and prints `PORT <n>` once it accepts connections.
"""

import os
import socket
import sys

import uvicorn
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.responses import JSONResponse

TOKEN = os.environ["MCP_TEST_TOKEN"]

server = MCPServer(name="py-test")

# MCPServer advertises `tools.listChanged: false` unless told otherwise; this server does send
# the notification, so it says so.
_lowlevel = server._lowlevel_server
_create_options = _lowlevel.create_initialization_options
_lowlevel.create_initialization_options = lambda notification_options=None, **kw: _create_options(
    notification_options or NotificationOptions(tools_changed=True), **kw
)


@server.tool(description="Says who answered and that the auth header was right.")
def whoami() -> str:
    return "py-test server, authorized"


@server.tool(description="Registers a tool named `name` that answers `I am <name>`.")
async def add_tool(name: str, ctx: Context) -> str:
    def answer() -> str:
        return f"I am {name}"

    server.add_tool(answer, name=name, description=f"Added at runtime: {name}")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(description="Always fails.")
def fail() -> str:
    raise ToolError("this tool always fails")


app = server.streamable_http_app()


async def authorized(scope, receive, send):
    if scope["type"] == "http":
        headers = dict(scope.get("headers") or [])
        if headers.get(b"authorization") != f"Bearer {TOKEN}".encode():
            response = JSONResponse({"error": "unauthorized"}, status_code=401)
            await response(scope, receive, send)
            return
    await app(scope, receive, send)


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(authorized, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
