"""The client's tools resource against a live server: definitions in both formats, calls run for a user, a wrong
call answered as a tool result rather than raised."""

import json

import pytest

from memoryproject_client import ToolResult, ValidationError


def test_definitions_in_openai_and_anthropic_format(client):
    openai_tools = client.tools.list()
    anthropic_tools = client.tools.list(format="anthropic")

    names = [tool["function"]["name"] for tool in openai_tools]
    assert {"memory_add", "memory_search", "memory_load", "memory_clear", "kb_search"} <= set(names)
    assert all(tool["type"] == "function" for tool in openai_tools)
    assert [tool["name"] for tool in anthropic_tools] == names
    assert "input_schema" in anthropic_tools[0]


def test_a_call_runs_for_the_user_with_arguments_as_an_object_or_json(client):
    added = client.tools.call("alice", "memory_add", {"content": "Prefers PostgreSQL", "category": "preference"})
    found = client.tools.call("alice", "memory_search", json.dumps({"query": "PostgreSQL"}), agent_id="")

    assert isinstance(added, ToolResult)
    assert added.is_error is False
    assert added.data["outcome"] == "created"
    assert [fact.content for fact in client.facts.list("alice")] == ["Prefers PostgreSQL"]
    assert found.data["results"][0]["id"] == added.data["fact"]["id"]
    assert "Prefers PostgreSQL" in found.content


def test_a_wrong_call_is_a_result_that_says_what_was_wrong(client):
    unknown = client.tools.call("alice", "memory_teleport", {})
    bad_arguments = client.tools.call("alice", "memory_add", {"content": 42})
    refused = client.tools.call("alice", "memory_clear", {"confirm": False})

    assert (unknown.is_error, bad_arguments.is_error, refused.is_error) == (True, True, True)
    assert "memory_teleport" in unknown.content
    assert "content" in bad_arguments.content
    assert "confirm" in refused.content


def test_a_call_without_a_user_is_a_validation_error(client):
    with pytest.raises(ValidationError) as refused:
        client.tools.call("", "memory_load")

    assert "user_id" in refused.value.details


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_async_client_lists_and_calls_tools(async_client_factory):
    async with async_client_factory() as client:
        tools = await client.tools.list(format="openai")
        added = await client.tools.call("bob", "memory_add", {"content": "Lives in Porto"})
        loaded = await client.tools.call("bob", "memory_load")

    assert tools
    assert added.is_error is False
    assert "Lives in Porto" in loaded.content
