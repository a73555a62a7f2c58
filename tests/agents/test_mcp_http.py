"""The MCP server at /mcp, driven by the official SDK's own client over streamable HTTP, on a live server: the WSGI
way in (pytest-django's live server, as gunicorn's default gthread worker) and the ASGI one (uvicorn on
memoryproject.asgi, as the uvicorn worker). The handshake-era protocol (what desktop clients speak today) and the
2026 one the SDK's client negotiates by itself."""

import asyncio
import contextlib
import gc
import json
import socket
import threading
import time

import httpx2
import pytest
import uvicorn
from django.core.cache import caches
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from facts.models import Fact
from tests.factories import make_fact, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_NAMES = {
    "memory_add", "memory_update", "memory_delete", "memory_search", "memory_load", "memory_clear", "kb_search",
}  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def asgi_server(django_db_blocker):
    """uvicorn serving memoryproject.asgi:application (with its lifespan) in a thread of this process."""
    from memoryproject.asgi import application

    port = free_port()
    config = uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="on", log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    gc.collect()  # the database connections of its worker threads, which have ended, are closed with them


@pytest.fixture(params=["wsgi", "asgi"])
def base_url(request, live_server):
    return live_server.url if request.param == "wsgi" else request.getfixturevalue("asgi_server")


@pytest.fixture
def key(db):
    return make_tenant("acme")


def run(coroutine):
    return asyncio.run(coroutine)


@contextlib.asynccontextmanager
async def mcp_client(base_url: str, key: str | None, *, user: str | None = "alice", mode: str = "legacy", **headers):
    """The SDK's client on /mcp with these headers (its HTTP client closed after: a kept-alive connection would keep
    a live-server thread, and its database connection, alive)."""
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if user is not None:
        headers["X-User-Id"] = user
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{base_url}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


async def call(client, name, arguments=None):
    result = await client.call_tool(name, arguments or {})
    return result


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_sdk_client_initialises_lists_adds_searches_loads_and_deletes(base_url, key, mode):
    tenant, api_key = key

    async def scenario():
        async with mcp_client(base_url, api_key, mode=mode) as client:
            listed = await client.list_tools()
            added = await call(client, "memory_add", {"content": "Prefers PostgreSQL for new projects", "pinned": True})
            found = await call(client, "memory_search", {"query": "which database?"})
            loaded = await call(client, "memory_load", {"limit": 5})
            fact_id = added.structured_content["fact"]["id"]
            deleted = await call(client, "memory_delete", {"fact_id": fact_id})
            after = await call(client, "memory_search", {"query": "which database?"})
            return client.protocol_version, client.server_info, listed, added, found, loaded, deleted, after

    version, server_info, listed, added, found, loaded, deleted, after = run(scenario())

    assert version == {"legacy": "2025-11-25", "auto": "2026-07-28"}[mode]  # the handshake era, and the modern one
    assert server_info.name == "memoryproject"
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == TOOL_NAMES
    assert tools["memory_add"].input_schema["required"] == ["content"]  # the user comes from X-User-Id
    assert "user_id" not in tools["memory_add"].input_schema["properties"]
    assert added.is_error is False
    fact_id = added.structured_content["fact"]["id"]
    assert added.content[0].text == f"Saved as fact {fact_id}."
    assert [hit["id"] for hit in found.structured_content["results"]] == [fact_id]
    assert f"[fact {fact_id}, pinned] Prefers PostgreSQL for new projects" in found.content[0].text
    assert [fact["id"] for fact in loaded.structured_content["facts"]] == [fact_id]
    assert deleted.content[0].text == f"Deleted fact {fact_id}."
    assert after.structured_content["results"] == []
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_a_bad_call_is_a_tool_error_the_model_can_read(base_url, key):
    _, api_key = key

    async def scenario():
        async with mcp_client(base_url, api_key) as client:
            return (
                await call(client, "memory_search", {"query": "tea", "limit": 500}),
                await call(client, "memory_forget", {}),
                await call(client, "memory_delete", {"fact_id": 123456789}),
            )

    too_many, unknown, missing = run(scenario())

    assert too_many.is_error is True
    assert "limit: 500 is greater than the maximum of 50" in too_many.content[0].text
    assert unknown.is_error is True
    assert "Unknown tool 'memory_forget'" in unknown.content[0].text
    assert missing.content[0].text == "Error: Fact 123456789 not found for this user."


@pytest.mark.parametrize("presented", ["missing", "wrong", "malformed"])
def test_a_missing_or_wrong_key_is_refused_with_the_apis_401_before_mcp(base_url, key, presented):
    headers = {
        "missing": {},
        "wrong": {"Authorization": "Bearer mp_not-a-key"},
        "malformed": {"Authorization": "Bearer two words"},
    }[presented]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }

    response = httpx2.post(
        f"{base_url}/mcp",
        json=initialize,
        headers={**headers, "Accept": "application/json, text/event-stream", "X-User-Id": "alice"},
        timeout=30,
    )

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="api"'
    assert response.json()["error"]["code"] in ("not_authenticated", "authentication_failed")


def test_the_sdk_client_with_a_wrong_key_gets_nothing(base_url, key):
    async def scenario():
        async with mcp_client(base_url, "mp_not-a-key") as client:
            return await client.list_tools()

    with pytest.raises(BaseExceptionGroup) as raised:
        run(scenario())

    [error] = leaves(raised.value)
    assert isinstance(error, MCPError)
    assert "error response" in str(error)  # the 401 above, as the SDK reports it


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def test_failed_authentications_are_counted_like_the_apis(base_url, key, settings, throttle_clock):
    caches["default"].clear()  # (the counts of the other server's run, from the same address)
    settings.AUTH_FAILURE_THROTTLE_RATE = "3/min"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": "Bearer mp_wrong"}

    statuses = [httpx2.post(f"{base_url}/mcp", json=body, headers=headers, timeout=30).status_code for _ in range(4)]
    good = httpx2.post(
        f"{base_url}/mcp", json=body, headers={**headers, "Authorization": f"Bearer {key[1]}"}, timeout=30
    )

    assert statuses == [401, 401, 401, 429]
    assert good.status_code == 200  # a valid key is served whatever its address's failures, as on the API


def test_another_tenants_facts_are_never_visible_nor_reachable(base_url, key):
    tenant, api_key = key
    other, _ = make_tenant("globex")
    theirs = make_fact(tenant=other, user_id="alice", content="Prefers MySQL", pinned=True)

    async def scenario():
        async with mcp_client(base_url, api_key) as client:
            return (
                await call(client, "memory_search", {"query": "prefers MySQL"}),
                await call(client, "memory_load"),
                await call(client, "memory_update", {"fact_id": theirs.pk, "content": "Prefers SQLite"}),
                await call(client, "memory_delete", {"fact_id": theirs.pk}),
                await call(client, "memory_clear", {"confirm": True}),
            )

    search, load, update, delete, clear = run(scenario())

    assert search.structured_content["results"] == []
    assert load.structured_content["facts"] == []
    assert update.content[0].text == delete.content[0].text == f"Error: Fact {theirs.pk} not found for this user."
    assert clear.content[0].text == "There was nothing to delete."
    assert Fact.objects.get(pk=theirs.pk).content == "Prefers MySQL"


def test_without_a_user_header_each_call_names_its_user(base_url, key):
    tenant, api_key = key

    async def scenario():
        async with mcp_client(base_url, api_key, user=None) as client:
            return (
                await client.list_tools(),
                await call(client, "memory_add", {"user_id": "bob", "content": "Plays the cello"}),
                await call(client, "memory_load"),
            )

    listed, added, nobody = run(scenario())

    schema = {tool.name: tool for tool in listed.tools}["memory_add"].input_schema
    assert schema["required"] == ["user_id", "content"]
    assert added.is_error is False
    assert Fact.objects.get(pk=added.structured_content["fact"]["id"]).user_id == "bob"
    assert nobody.is_error is True
    assert "No user: send the X-User-Id header, or give user_id in the arguments." in nobody.content[0].text


def test_a_user_argument_cannot_leave_the_user_of_the_header(base_url, key):
    tenant, api_key = key
    make_fact(tenant=tenant, user_id="bob", content="Plays the cello")

    async def scenario():
        async with mcp_client(base_url, api_key, user="alice") as client:
            return (
                await call(client, "memory_search", {"user_id": "bob", "query": "cello"}),
                await call(client, "memory_add", {"user_id": "alice", "content": "Plays the piano"}),
            )

    elsewhere, same = run(scenario())

    assert elsewhere.is_error is True
    assert "user_id 'bob' is not the user of this connection (X-User-Id)" in elsewhere.content[0].text
    assert same.is_error is False
    assert Fact.objects.get(pk=same.structured_content["fact"]["id"]).user_id == "alice"


def test_get_is_405_there_is_no_server_stream(base_url, key):
    response = httpx2.get(
        f"{base_url}/mcp", headers={"Authorization": f"Bearer {key[1]}", "Accept": "text/event-stream"}, timeout=30
    )

    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert json.loads(response.content)["error"]["code"] == "method_not_allowed"
