"""An MCP server over stdio for desktop and IDE agents that launch their MCP servers as commands: it serves the
agent tools of a *running* memoryproject, over its REST API (GET /api/v1/tools, POST /api/v1/tools/call).

    memoryproject-mcp --api-key mp_... --user-id alice [--url http://127.0.0.1:8000] [--agent-id desktop]
    python manage.py mcp_stdio ...   (the same)

Each option can come from the environment instead: MEMORYPROJECT_API_KEY, MEMORYPROJECT_USER_ID, MEMORYPROJECT_URL,
MEMORYPROJECT_AGENT_ID. Needs neither Django nor the database (it is a client of the server), so this module
imports nothing of the project.
"""

import argparse
import os
import sys
from dataclasses import dataclass

import anyio
import httpx2
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_SECONDS = 60.0  # a tool call embeds (and may ask the chat model to judge) on the server


@dataclass
class Bridge:
    """The tools of the server at `url`, for one end user."""

    url: str
    api_key: str
    user_id: str
    agent_id: str = ""

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            base_url=self.url.rstrip("/"),
            headers={"Authorization": f"Bearer {self.api_key}", "User-Agent": "memoryproject-mcp"},
            timeout=TIMEOUT_SECONDS,
        )

    async def list_tools(self, ctx, params) -> types.ListToolsResult:
        async with self.client() as http:
            try:
                response = await http.get("/api/v1/tools", params={"format": "anthropic"})
            except httpx2.HTTPError as exc:
                raise MCPError(types.INTERNAL_ERROR, self._unreachable(exc)) from None
        if response.status_code != 200:
            raise MCPError(types.INTERNAL_ERROR, _refusal(response))
        tools = response.json()["tools"]
        return types.ListToolsResult(
            tools=[
                types.Tool(name=tool["name"], description=tool["description"], input_schema=tool["input_schema"])
                for tool in tools
            ]
        )

    async def call_tool(self, ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        body = {"user_id": self.user_id, "name": params.name, "arguments": params.arguments or {}}
        if self.agent_id:
            body["agent_id"] = self.agent_id
        async with self.client() as http:
            try:
                response = await http.post("/api/v1/tools/call", json=body)
            except httpx2.HTTPError as exc:
                return _result(f"Error: {self._unreachable(exc)}", None, is_error=True)
        if response.status_code != 200:  # the key, the rate, the user id: nothing the model can fix, but it can say
            return _result(f"Error: {_refusal(response)}", None, is_error=True)
        result = response.json()
        return _result(result["content"], result["data"], is_error=result["is_error"])

    def _unreachable(self, exc: Exception) -> str:
        return f"The memory server at {self.url} cannot be reached ({type(exc).__name__}: {exc})."


def _refusal(response: httpx2.Response) -> str:
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:200]
    return f"The memory server answered {response.status_code}: {message}"


def _result(content: str, data, *, is_error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=content)], structured_content=data, is_error=is_error)


def bridge_server(bridge: Bridge) -> Server:
    return Server(
        "memoryproject",
        version="1",
        instructions=(
            "Long-term memory of the user you are talking to, and the organisation's knowledge base. Call "
            "memory_load at the start of a conversation, memory_search before answering anything about the user's "
            "past or preferences, memory_add when they tell you something durable."
        ),
        on_list_tools=bridge.list_tools,
        on_call_tool=bridge.call_tool,
    )


async def serve(bridge: Bridge) -> None:
    server = bridge_server(bridge)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options, with their defaults from the environment (shared with `manage.py mcp_stdio`)."""
    environ = os.environ
    parser.add_argument("--url", default=environ.get("MEMORYPROJECT_URL", DEFAULT_URL), help="The server's base URL.")
    parser.add_argument(
        "--api-key", default=environ.get("MEMORYPROJECT_API_KEY"), help="A tenant API key (MEMORYPROJECT_API_KEY)."
    )
    parser.add_argument(
        "--user-id", default=environ.get("MEMORYPROJECT_USER_ID"), help="The end user (MEMORYPROJECT_USER_ID)."
    )
    parser.add_argument(
        "--agent-id",
        default=environ.get("MEMORYPROJECT_AGENT_ID", ""),
        help="Narrow the tools to this agent's facts (MEMORYPROJECT_AGENT_ID).",
    )


def bridge_from(options, error) -> Bridge:
    for name, variable in (("api_key", "MEMORYPROJECT_API_KEY"), ("user_id", "MEMORYPROJECT_USER_ID")):
        if not getattr(options, name):
            error(f"--{name.replace('_', '-')} (or {variable}) is required")
    return Bridge(url=options.url, api_key=options.api_key, user_id=options.user_id, agent_id=options.agent_id)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memoryproject-mcp", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    bridge = bridge_from(parser.parse_args(argv), parser.error)
    try:
        anyio.run(serve, bridge)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
