"""The embedding cache over HTTP: a tenant sees its own statistics only, and /api/health shows none to anyone."""

import pytest
from rest_framework.test import APIClient

from tests.factories import client_with_key

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("openai_settings")]


@pytest.fixture
def other_api(other_tenant_and_key):
    return client_with_key(other_tenant_and_key[1])


def context(client, query: str, user_id: str = "u1"):
    response = client.post("/api/v1/context", {"user_id": user_id, "query": query}, format="json")
    assert response.status_code == 200, response.content
    return response


def embedded(fake_openai) -> list[str]:
    return [text for request in fake_openai.requests_to("/v1/embeddings") for text in request["body"]["input"]]


def test_another_tenant_asking_the_same_question_is_never_answered_from_the_first_tenants_cache(
    api, other_api, fake_openai
):
    # Given tenant A asked something (its query's vector is now cached)
    context(api, "Where does Alice from accounting live?")
    context(api, "Where does Alice from accounting live?")
    assert embedded(fake_openai) == ["Where does Alice from accounting live?"]  # A's second ask was a hit

    # When tenant B asks the very same thing
    context(other_api, "Where does Alice from accounting live?")

    # Then B's query went to the model (no hit on A's row), and B's statistics show only B's own miss
    assert embedded(fake_openai) == ["Where does Alice from accounting live?"] * 2
    mine = api.get("/api/v1/embedding-cache").json()
    theirs = other_api.get("/api/v1/embedding-cache").json()
    assert (mine["hits"], mine["misses"], mine["rows"]) == (1, 1, 1)
    assert (theirs["hits"], theirs["misses"], theirs["rows"]) == (0, 1, 1)
    assert (theirs["enabled"], theirs["model"]) == (True, "fake-embed")


def test_the_statistics_need_a_key():
    response = APIClient().get("/api/v1/embedding-cache")

    assert response.status_code == 401


def test_a_knowledge_base_search_without_a_user_leaves_nothing_in_the_cache(api, fake_openai):
    api.post("/api/v1/kb/documents", {"doc_id": "a.md", "text": "# A\n\nThe office opens at 9."}, format="json")
    rows = api.get("/api/v1/embedding-cache").json()["rows"]

    for _ in range(2):
        assert api.post("/api/v1/kb/search", {"query": "when does Bob open?"}, format="json").status_code == 200

    assert embedded(fake_openai).count("when does Bob open?") == 2
    assert api.get("/api/v1/embedding-cache").json()["rows"] == rows == 1  # the document's chunk only


def test_health_shows_no_cache_counters_to_anonymous_callers(api):
    context(api, "Where does Alice from accounting live?")

    body = APIClient().get("/api/health").json()

    assert body["embedding"]["model"] == "fake-embed"
    assert "cache" not in body["embedding"]
    assert "hits" not in str(body)
    assert "misses" not in str(body)
