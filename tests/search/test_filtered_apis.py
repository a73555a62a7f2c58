"""The filter language where agents read memory: POST /facts/search, /context and the memory_search tool take the
same filters as GET /facts, narrow the facts to what they select, and refuse a bad one naming its path."""

import pytest

from tests.factories import client_with_key, make_tenant

pytestmark = pytest.mark.django_db

PROJECTS = {"atlas": "Deploys the atlas service with Helm", "zephyr": "Deploys the zephyr service with Ansible"}


def remember(api, content, **fields):
    response = api.post("/api/v1/facts", {"user_id": "alice", "content": content, **fields}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["fact"]["id"]


@pytest.fixture
def projects(api):
    return {name: remember(api, content, metadata={"project": name}) for name, content in PROJECTS.items()}


def test_search_returns_only_what_the_filter_selects(api, projects):
    body = {"user_id": "alice", "query": "how does she deploy the service?", "limit": 10}

    everything = api.post("/api/v1/facts/search", body, format="json")
    atlas = api.post("/api/v1/facts/search", body | {"filters": {"metadata.project": "atlas"}}, format="json")
    not_atlas = api.post(
        "/api/v1/facts/search", body | {"filters": {"NOT": {"metadata.project": "atlas"}}}, format="json"
    )

    assert {hit["fact"]["id"] for hit in everything.json()["results"]} == set(projects.values())
    assert [hit["fact"]["id"] for hit in atlas.json()["results"]] == [projects["atlas"]]
    assert [hit["fact"]["id"] for hit in not_atlas.json()["results"]] == [projects["zephyr"]]


def test_context_injects_only_what_the_filter_selects(api, projects):
    body = {"user_id": "alice", "query": "how does she deploy the service?", "include_documents": False}

    context = api.post("/api/v1/context", body | {"filters": {"metadata.project": {"in": ["zephyr"]}}}, format="json")

    assert context.status_code == 200
    assert [hit["fact"]["id"] for hit in context.json()["facts"]] == [projects["zephyr"]]
    assert "Ansible" in context.json()["text"]
    assert "Helm" not in context.json()["text"]


def test_the_memory_search_tool_takes_filters(api, projects):
    def search(filters):
        arguments = {"query": "deploy the service", "filters": filters}
        response = api.post(
            "/api/v1/tools/call", {"user_id": "alice", "name": "memory_search", "arguments": arguments}, format="json"
        )
        return response.json()

    found = search({"metadata.project": "zephyr"})
    refused = search({"AND": [{"metadata.project": {"gt": ["a"]}}]})

    assert [hit["id"] for hit in found["data"]["results"]] == [projects["zephyr"]]
    assert refused["is_error"] is True
    assert "filters.AND[0].metadata.project.gt: expected a string, a number or true / false" in refused["content"]


@pytest.mark.parametrize("path", ["/api/v1/facts/search", "/api/v1/context"])
def test_a_bad_filter_is_a_400_naming_its_path(api, path):
    body = {"user_id": "alice", "query": "anything", "filters": {"OR": [{"category": "preference"}, {"colour": 1}]}}

    response = api.post(path, body, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("filters.OR[1].colour: unknown field or operator")


def test_a_filter_never_reaches_another_tenants_facts(api, projects):
    other_api = client_with_key(make_tenant("globex")[1])
    body = {"user_id": "alice", "query": "deploy the service", "filters": {"id": {"in": list(projects.values())}}}

    response = other_api.post("/api/v1/facts/search", body, format="json")

    assert response.status_code == 200
    assert response.json()["results"] == []
