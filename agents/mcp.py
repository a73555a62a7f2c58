"""The MCP server: the agent tools (agents.tools, the one registry) over the Model Context Protocol's streamable
HTTP transport at /mcp, on the product's own web server, authenticated by the API keys.

Stateless, with JSON responses: each POST stands alone (gunicorn's worker processes share no memory, so no session
could live in one of them), and nothing streams (a GET, the server-to-client stream, answers 405 as the spec allows
for a server that offers none). Two ways in, one server:

- ASGI (the uvicorn worker): memoryproject.asgi sends /mcp to `mcp_asgi_app`, whose session manager runs for the
  process's life in the ASGI lifespan; the tools' ORM calls run in a worker thread.
- WSGI (the default gthread worker, runserver, the tests' live server): the Django view `mcp_view` runs the same
  ASGI app for one request in an event loop of its own (asgiref's async_to_sync), and the tools' ORM calls come
  back to the request's own thread, on the request's own database connection.

The end user is the X-User-Id header, or a `user_id` argument when no header names one (the tools then list it as
a required argument). With a header, an argument naming someone else is refused: a deployment that pins the user
cannot be steered to another one by the model.
"""

import json
import logging
from dataclasses import dataclass

import anyio
import mcp_types as types
from asgiref.sync import async_to_sync, sync_to_async
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from rest_framework import exceptions

from core.api_errors import error_body
from core.request_context import tenant_id_set
from tenancy.authentication import ApiClient, ApiKeyAuthentication, failed_authentication_count
from tenancy.throttling import ApiKeyBurstThrottle, ApiKeyRateThrottle

from .tools import TOOLS, ToolResult, tool_call

logger = logging.getLogger(__name__)

PATH = "/mcp"
USER_HEADER = "X-User-Id"
AGENT_HEADER = "X-Agent-Id"
_SCOPE_KEY = "memoryproject.mcp"  # where the authenticated caller travels in the ASGI scope
INSTRUCTIONS = (
    "Long-term memory of the user you are talking to, and the organisation's knowledge base. Call memory_load at "
    "the start of a conversation, memory_search before answering anything about the user's past or preferences, "
    "memory_add when they tell you something durable; kb_search for how things are done here."
)
USER_ARGUMENT = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "description": "The id of the end user whose memory this is.",
}


@dataclass(frozen=True)
class McpCaller:
    """Who is calling, from the request's headers, once its key is known."""

    client: ApiClient
    user_id: str | None  # X-User-Id, or None: each call names its user
    agent_id: str
    in_request_thread: bool  # WSGI: the ORM runs in the request's thread (see the module's docstring)


# --- the MCP server ------------------------------------------------------------------------------------------------


def _caller(ctx) -> McpCaller | None:
    request = getattr(ctx, "request", None)
    return request.scope.get(_SCOPE_KEY) if request is not None else None


def mcp_tools(*, with_user_argument: bool) -> list[types.Tool]:
    """The registry's tools as MCP tools; without a user header, each takes the user as a required argument."""
    tools = []
    for tool in TOOLS.values():
        schema = tool.parameters
        if with_user_argument:
            schema = {
                **schema,
                "properties": {"user_id": USER_ARGUMENT, **schema["properties"]},
                "required": ["user_id", *schema["required"]],
            }
        tools.append(types.Tool(name=tool.name, description=tool.description, input_schema=schema))
    return tools


async def _list_tools(ctx, params) -> types.ListToolsResult:
    caller = _caller(ctx)
    return types.ListToolsResult(tools=mcp_tools(with_user_argument=caller is None or caller.user_id is None))


async def _call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    caller = _caller(ctx)
    arguments = dict(params.arguments or {})
    if caller is None:  # (only an HTTP request through mcp_asgi_app carries one)
        return _mcp_result(_refused("This server needs an authenticated HTTP request."))
    user_id = arguments.pop("user_id", None)
    if caller.user_id is not None:
        if user_id is not None and user_id != caller.user_id:
            return _mcp_result(_refused(f"user_id {user_id!r} is not the user of this connection ({USER_HEADER})."))
        user_id = caller.user_id
    if user_id is None:
        return _mcp_result(_refused(f"No user: send the {USER_HEADER} header, or give user_id in the arguments."))
    if not isinstance(user_id, str):
        return _mcp_result(_refused("user_id: must be a string."))
    run = sync_to_async(_tool_call_in_thread, thread_sensitive=caller.in_request_thread)
    return _mcp_result(await run(caller, user_id, params.name, arguments))


def _tool_call_in_thread(caller: McpCaller, user_id: str, name: str, arguments: dict) -> ToolResult:
    # As Django does around a request: a connection that broke or outlived CONN_MAX_AGE is dropped before and after.
    close_old_connections()
    try:
        tenant_id_set(caller.client.tenant.pk)
        return tool_call(
            tenant=caller.client.tenant,
            user_id=user_id,
            name=name,
            arguments=arguments,
            agent_id=caller.agent_id,
            actor=caller.client.actor,
            scopes=caller.client.api_key.scopes,
        )
    finally:
        close_old_connections()


def _refused(message: str) -> ToolResult:
    return ToolResult(content=f"Error: {message}", data=None, is_error=True)


def _mcp_result(result: ToolResult) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=result.content)], structured_content=result.data, is_error=result.is_error
    )


def _input_schema(name: str) -> dict | None:
    """For the SDK's checks of Mcp-Param-* headers, without listing: the widest form of the tool's arguments."""
    return next((tool.input_schema for tool in mcp_tools(with_user_argument=True) if tool.name == name), None)


mcp_server = Server(
    "memoryproject",
    version="1",
    instructions=INSTRUCTIONS,
    on_list_tools=_list_tools,
    on_call_tool=_call_tool,
    get_tool_input_schema=_input_schema,
)


def mcp_session_manager() -> StreamableHTTPSessionManager:
    return StreamableHTTPSessionManager(mcp_server, stateless=True, json_response=True)


# --- authentication (before anything reaches MCP) -----------------------------------------------------------------


def mcp_authenticate(request: HttpRequest) -> ApiClient:
    """The API's own checks on a request to /mcp: its key (a wrong or missing one counted per address by
    AuthFailureThrottle), then the key's rates. Raises the DRF exception the API would answer with."""
    found = ApiKeyAuthentication().authenticate(request)
    if found is None:  # as HasApiKey does for the API
        failed_authentication_count(request)
        raise exceptions.NotAuthenticated()
    client = found[0]
    request.user = client  # what the key throttles read
    for throttle in (ApiKeyBurstThrottle(), ApiKeyRateThrottle()):
        if not throttle.allow_request(request, None):
            raise exceptions.Throttled(throttle.wait())
    return client


def _refusal(exc: exceptions.APIException) -> tuple[int, dict, dict[str, str]]:
    """(status, body, headers) of the API's answer to `exc`, in its one error shape."""
    headers = {}
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        headers["WWW-Authenticate"] = ApiKeyAuthentication().authenticate_header(None)
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        headers["Retry-After"] = str(max(1, round(exc.wait)))
    return exc.status_code, error_body(str(exc.get_codes()), str(exc.detail)), headers


def _caller_of(request: HttpRequest, *, in_request_thread: bool) -> McpCaller:
    return McpCaller(
        client=mcp_authenticate(request),
        user_id=request.headers.get(USER_HEADER) or None,
        agent_id=request.headers.get(AGENT_HEADER, ""),
        in_request_thread=in_request_thread,
    )


def _authenticate_scope(scope) -> McpCaller | tuple[int, dict, dict[str, str]]:
    """In a worker thread: the caller of an ASGI request, or the refusal to answer with."""
    close_old_connections()
    try:
        return _caller_of(_django_request(scope), in_request_thread=False)
    except exceptions.APIException as exc:
        return _refusal(exc)
    finally:
        close_old_connections()


def _django_request(scope) -> HttpRequest:
    """The little of an HttpRequest that authentication and throttling read: headers and the client's address."""
    request = HttpRequest()
    request.method = scope["method"]
    request.path = scope["path"]
    for raw_name, raw_value in scope["headers"]:
        name, value = raw_name.decode("latin-1").upper().replace("-", "_"), raw_value.decode("latin-1")
        key = name if name in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{name}"
        request.META[key] = f"{request.META[key]},{value}" if key in request.META else value
    request.META["REMOTE_ADDR"] = (scope.get("client") or ("", 0))[0]
    return request


# --- the ASGI app -----------------------------------------------------------------------------------------------------


class McpAsgiApp:
    """/mcp as an ASGI app: authentication first (401 and 429 in the API's shape), then the session manager."""

    def __init__(self):
        self.manager: StreamableHTTPSessionManager | None = None  # the lifespan's, while it runs

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] == "GET":  # no server-to-client stream in stateless mode
            await _send_json(send, 405, error_body("method_not_allowed", "Use POST."), {"Allow": "POST"})
            return
        caller = await sync_to_async(_authenticate_scope, thread_sensitive=False)(scope)
        if not isinstance(caller, McpCaller):
            status, body, headers = caller
            await _send_json(send, status, body, headers)
            return
        scope = {**scope, _SCOPE_KEY: caller}
        if self.manager is None:  # an ASGI server run without the lifespan
            await _served_alone(scope, receive, send)
        else:
            await self.manager.handle_request(scope, receive, send)

    async def _lifespan(self, receive, send) -> None:
        """The session manager runs as long as the server (the SDK's task group for its requests)."""
        message = await receive()
        assert message["type"] == "lifespan.startup"
        manager = mcp_session_manager()
        async with manager.run():
            self.manager = manager
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
            self.manager = None
        await send({"type": "lifespan.shutdown.complete"})


async def _served_alone(scope, receive, send) -> None:
    """One request, with a session manager of its own (on this request's event loop, whichever that is)."""
    manager = mcp_session_manager()
    async with manager.run():
        await manager.handle_request(scope, receive, send)


async def _send_json(send, status: int, body: dict, headers: dict[str, str]) -> None:
    encoded = json.dumps(body).encode()
    response_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(encoded)).encode())]
    response_headers += [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": encoded})


mcp_asgi_app = McpAsgiApp()


# --- the WSGI way in: a Django view ---------------------------------------------------------------------------------

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


@csrf_exempt
def mcp_view(request: HttpRequest) -> HttpResponse:
    """/mcp under WSGI: authenticated here, then the ASGI app for this one request (its answer is one JSON body)."""
    if request.method == "GET":
        response = JsonResponse(error_body("method_not_allowed", "Use POST."), status=405)
        response["Allow"] = "POST"
        return response
    try:
        caller = _caller_of(request, in_request_thread=True)
    except exceptions.APIException as exc:
        status, body, headers = _refusal(exc)
        response = JsonResponse(body, status=status)
        for name, value in headers.items():
            response[name] = value
        return response
    status, headers, body = async_to_sync(_asgi_once)(_scope_of(request, caller), request.body)
    response = HttpResponse(body, status=status)
    for name, value in headers:
        if name.lower() not in _HOP_BY_HOP:
            response[name] = value
    return response


def _scope_of(request: HttpRequest, caller: McpCaller) -> dict:
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "root_path": "",
        "headers": headers,
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": (request.get_host().rsplit(":", 1)[0], int(request.get_port())),
        _SCOPE_KEY: caller,
    }


async def _asgi_once(scope: dict, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    """Serve one authenticated request whose body is all read: its whole answer, once it has ended."""
    status, headers, chunks = 500, [], []
    answered = anyio.Event()
    delivered = False

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client waits for the answer: it is "gone" only once that is sent
        return {"type": "http.disconnect"}

    async def send(message):
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in message["headers"]]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    await _served_alone(scope, receive, send)
    answered.set()
    return status, headers, b"".join(chunks)
