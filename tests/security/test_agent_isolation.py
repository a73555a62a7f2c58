"""An agent's writes never change another agent's facts, nor the facts of no agent (shared by all), and no answer to
an agent carries another agent's text: through REST, the tools API, MCP and the Mem0 routes."""

import asyncio

import pytest

from facts.models import Fact, FactConflict
from facts.services import fact_remember
from tests.agents.test_mcp_http import mcp_client
from tests.factories import client_with_key, make_tenant

BILLING_CITY = "Lives in Paris, billing address alice@corp.example"


def billing_fact(tenant, content=BILLING_CITY):
    return fact_remember(tenant=tenant, user_id="alice", content=content, agent_id="billing").fact


def shared_fact(tenant, content):
    return fact_remember(tenant=tenant, user_id="alice", content=content).fact


def tools_call(api, content, agent_id):
    response = api.post(
        "/api/v1/tools/call",
        {"user_id": "alice", "name": "memory_add", "arguments": {"content": content}, "agent_id": agent_id},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def tools_add(api, content, agent_id):
    """(the id of the fact the answer names, the answer)"""
    answer = tools_call(api, content, agent_id)
    return answer["data"]["fact"]["id"], answer


def rest_add(api, content, agent_id):
    response = api.post("/api/v1/facts", {"user_id": "alice", "content": content, "agent_id": agent_id}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()["fact"]["id"], response.json()


def mem0_add(api, content, agent_id):
    body = {"messages": [{"role": "user", "content": content}], "user_id": "alice", "agent_id": agent_id}
    response = api.post("/mem0/v3/memories/add/", body | {"infer": False}, format="json")
    assert response.status_code == 200, response.content
    [event] = response.json()["results"]
    return int(event["id"]), response.json()


def untouched(fact):
    stored = Fact.objects.get(pk=fact.pk)
    assert (stored.status, stored.valid_to, stored.superseded_by_id) == (Fact.Status.ACTIVE, None, None)
    assert (stored.content, stored.confidence) == (fact.content, fact.confidence)


@pytest.mark.django_db
@pytest.mark.parametrize("add", [tools_add, rest_add, mem0_add], ids=["tools", "rest", "mem0"])
def test_another_agents_duplicate_is_its_own_fact_and_the_answer_names_only_its_own(add):
    tenant, key = make_tenant("acme")
    billing = billing_fact(tenant)

    named, answer = add(client_with_key(key), BILLING_CITY, "coder")

    untouched(billing)
    coder = Fact.objects.get(tenant=tenant, agent_id="coder")
    assert coder.status == Fact.Status.ACTIVE
    assert named == coder.pk
    assert "merged" not in str(answer)


@pytest.mark.django_db
@pytest.mark.parametrize("add", [tools_add, rest_add, mem0_add], ids=["tools", "rest", "mem0"])
def test_another_agents_contradiction_leaves_the_other_agents_fact_current(add):
    tenant, key = make_tenant("acme")
    billing = billing_fact(tenant, "Lives in Paris")

    add(client_with_key(key), "Lives in Berlin", "coder")

    untouched(billing)
    assert not FactConflict.objects.filter(tenant=tenant, existing_fact=billing).exists()
    assert Fact.objects.get(tenant=tenant, agent_id="coder").content == "Lives in Berlin"


@pytest.mark.django_db
def test_an_agent_contradicting_a_shared_fact_opens_a_conflict_for_a_person():
    tenant, key = make_tenant("acme")
    shared = shared_fact(tenant, "Lives in Paris")

    answer = tools_call(client_with_key(key), "Lives in Berlin", "coder")

    untouched(shared)
    assert answer["data"]["outcome"] == "conflict"
    conflict = FactConflict.objects.get(tenant=tenant)
    assert (conflict.existing_fact_id, conflict.new_fact.agent_id) == (shared.pk, "coder")


@pytest.mark.django_db
def test_an_agents_duplicate_of_a_shared_fact_does_not_merge_into_it():
    tenant, key = make_tenant("acme")
    shared = shared_fact(tenant, "Prefers tea over coffee")

    answer = tools_call(client_with_key(key), "Prefers tea over coffee", "coder")

    untouched(shared)
    assert answer["data"]["outcome"] == "created"
    assert Fact.objects.get(tenant=tenant, agent_id="coder").status == Fact.Status.ACTIVE


@pytest.mark.django_db
def test_an_agent_still_merges_into_and_supersedes_its_own_facts():
    tenant, key = make_tenant("acme")
    own = fact_remember(tenant=tenant, user_id="alice", content="Lives in Paris", agent_id="coder").fact

    duplicate = tools_call(client_with_key(key), "Lives in Paris", "coder")
    moved = tools_call(client_with_key(key), "Lives in Berlin", "coder")

    assert (duplicate["data"]["outcome"], duplicate["data"]["fact"]["id"]) == ("merged", own.pk)
    assert moved["data"]["outcome"] == "superseded"
    assert moved["data"]["superseded_ids"] == [own.pk]


@pytest.mark.django_db(transaction=True)
def test_mcp_adds_with_an_agent_header_leave_other_agents_facts_alone(live_server):
    tenant, key = make_tenant("acme")
    billing = billing_fact(tenant)

    async def scenario():
        async with mcp_client(live_server.url, key, **{"X-Agent-Id": "coder"}) as client:
            return await client.call_tool("memory_add", {"content": BILLING_CITY})

    result = asyncio.run(scenario())

    untouched(billing)
    assert result.is_error is False
    coder = Fact.objects.get(tenant=tenant, agent_id="coder")
    assert result.content[0].text == f"Saved as fact {coder.pk}."


@pytest.mark.django_db
def test_facts_extracted_from_an_agents_episode_leave_other_agents_facts_alone(
    settings, django_capture_on_commit_callbacks
):
    settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 0.5  # the extracted move is active, so it would act at once
    tenant, key = make_tenant("acme")
    billing = billing_fact(tenant, "Lives in Paris")
    episode = {
        "user_id": "alice",
        "session_id": "s1",
        "agent_id": "coder",
        "messages": [{"role": "user", "content": "I live in Berlin now."}],
    }

    with django_capture_on_commit_callbacks(execute=True):  # the extraction queued after commit (run inline)
        response = client_with_key(key).post("/api/v1/episodes", episode, format="json")

    assert response.status_code == 202, response.content
    untouched(billing)
    extracted = Fact.objects.get(tenant=tenant, agent_id="coder", source=Fact.Source.EXTRACTED)
    assert "Berlin" in extracted.content
