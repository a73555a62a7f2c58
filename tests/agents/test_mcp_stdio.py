"""The stdio MCP server (what desktop agents launch as a command), started by the SDK's own stdio client as a
subprocess against a live server: `python -m agents.mcp_stdio` (what the memoryproject-mcp console script runs)
and `manage.py mcp_stdio`."""

import asyncio
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.conf import settings
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

import agents.mcp_stdio
from facts.models import Fact
from tests.factories import make_fact, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(settings.BASE_DIR)


def stdio_server(live_server, key: str, *, how: str = "module", user: str = "alice") -> StdioServerParameters:
    if how == "environment":  # the options from the environment, as a desktop agent's config may give them
        return StdioServerParameters(
            command=sys.executable,
            args=["-m", "agents.mcp_stdio"],
            env={"MEMORYPROJECT_API_KEY": key, "MEMORYPROJECT_USER_ID": user, "MEMORYPROJECT_URL": live_server.url},
            cwd=ROOT,
        )
    options = ["--api-key", key, "--user-id", user, "--url", live_server.url]
    if how == "manage.py":
        return StdioServerParameters(
            command=sys.executable,
            args=["manage.py", "mcp_stdio", *options],
            env={"DJANGO_ENV": "development"},
            cwd=ROOT,
        )
    return StdioServerParameters(command=sys.executable, args=["-m", "agents.mcp_stdio", *options], cwd=ROOT)


@pytest.fixture
def tenant_key(db):
    return make_tenant("acme")


@pytest.mark.parametrize("how", ["module", "manage.py", "environment"])
def test_a_desktop_agent_lists_adds_searches_loads_and_deletes_over_stdio(live_server, tenant_key, how):
    tenant, key = tenant_key

    async def scenario():
        async with Client(stdio_server(live_server, key, how=how), mode="legacy") as client:
            listed = await client.list_tools()
            added = await client.call_tool("memory_add", {"content": "Prefers dark mode", "category": "preference"})
            fact_id = added.structured_content["fact"]["id"]
            found = await client.call_tool("memory_search", {"query": "dark mode"})
            loaded = await client.call_tool("memory_load", {})
            deleted = await client.call_tool("memory_delete", {"fact_id": fact_id})
            return client.server_info, listed, added, found, loaded, deleted

    server_info, listed, added, found, loaded, deleted = asyncio.run(scenario())

    assert server_info.name == "memoryproject"
    assert {tool.name for tool in listed.tools} == {
        "memory_add", "memory_update", "memory_delete", "memory_search", "memory_load", "memory_clear", "kb_search",
    }  # fmt: skip
    fact_id = added.structured_content["fact"]["id"]
    assert added.content[0].text == f"Saved as fact {fact_id}."
    assert [hit["id"] for hit in found.structured_content["results"]] == [fact_id]
    assert [fact["id"] for fact in loaded.structured_content["facts"]] == [fact_id]
    assert deleted.is_error is False
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_a_bad_call_over_stdio_is_a_tool_error(live_server, tenant_key):
    async def scenario():
        async with Client(stdio_server(live_server, tenant_key[1]), mode="legacy") as client:
            return await client.call_tool("memory_add", {"content": "x", "confidence": 7})

    result = asyncio.run(scenario())

    assert result.is_error is True
    assert "confidence: 7 is greater than the maximum of 1" in result.content[0].text


def test_a_wrong_key_is_refused_and_says_so(live_server, tenant_key):
    async def scenario():
        async with Client(stdio_server(live_server, "mp_not-a-key"), mode="legacy") as client:
            call = await client.call_tool("memory_load", {})
            try:
                await client.list_tools()
            except MCPError as exc:
                return call, exc
            return call, None

    call, listing_error = asyncio.run(scenario())

    assert call.is_error is True
    assert call.content[0].text == "Error: The memory server answered 401: Unknown or revoked API key."
    assert listing_error is not None
    assert "401" in listing_error.message


def test_another_tenants_facts_are_never_visible_over_stdio(live_server, tenant_key):
    other, _ = make_tenant("globex")
    theirs = make_fact(tenant=other, user_id="alice", content="Prefers MySQL", pinned=True)

    async def scenario():
        async with Client(stdio_server(live_server, tenant_key[1]), mode="legacy") as client:
            return (
                await client.call_tool("memory_search", {"query": "MySQL"}),
                await client.call_tool("memory_load", {}),
                await client.call_tool("memory_delete", {"fact_id": theirs.pk}),
            )

    search, load, delete = asyncio.run(scenario())

    assert search.structured_content["results"] == []
    assert load.structured_content["facts"] == []
    assert delete.is_error is True
    assert Fact.objects.filter(pk=theirs.pk).exists()


def test_the_console_script_runs_the_same_bridge():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]

    module, _, function = scripts["memoryproject-mcp"].partition(":")

    assert (module, function) == ("agents.mcp_stdio", "main")
    assert callable(getattr(agents.mcp_stdio, function))


def test_the_bridge_needs_neither_django_nor_the_database():
    code = (
        "import sys, agents.mcp_stdio; print(sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'facts'}))"
    )

    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env={}, check=True)

    assert done.stdout.strip() == "[]"


def test_without_a_key_or_user_it_stops_with_what_is_missing():
    environment = {name: value for name, value in os.environ.items() if not name.startswith("MEMORYPROJECT_")}

    done = subprocess.run(
        [sys.executable, "-m", "agents.mcp_stdio", "--user-id", "alice"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=environment,
    )

    assert done.returncode == 2
    assert "--api-key (or MEMORYPROJECT_API_KEY) is required" in done.stderr
