"""With the embedding provider down (the local fake failing every request), /context and both searches answer by
keywords alone and say so ("degraded"), instead of failing."""

import pytest

from kb.services import document_index

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("openai_settings")]

RUNBOOK = """\
# Runbook

## Rollbacks

To roll back a release, run deployctl rollback with the previous build number.

## Paging

The on-call engineer is paged through the escalation rota after five minutes.
"""


@pytest.fixture
def knowledge_base(tenant, openai_settings):
    openai_settings.CHAT_PROVIDER = "none"
    document_index(tenant=tenant, doc_id="ops/runbook.md", text=RUNBOOK, content_type="markdown", title="Runbook")


def test_kb_search_falls_back_to_keywords_and_says_so(api, knowledge_base, fake_openai):
    fake_openai.go_down("/v1/embeddings")

    down = api.post("/api/v1/kb/search", {"query": "how do I roll back with deployctl"}, format="json")
    fake_openai.recover()
    up = api.post("/api/v1/kb/search", {"query": "how do I roll back with deployctl"}, format="json")

    assert down.status_code == 200
    assert down.json()["degraded"] == ["embeddings"]
    [best, *_] = down.json()["results"]
    assert best["heading_path"].endswith("Rollbacks")
    assert best["scores"]["vector"] == 0
    assert all(hit["scores"]["keyword"] > 0 for hit in down.json()["results"])  # keyword hits only
    assert up.json()["degraded"] == []
    assert up.json()["results"][0]["scores"]["vector"] > 0


def test_context_is_built_from_keyword_hits_while_the_query_cannot_be_embedded(api, knowledge_base, fake_openai):
    api.post("/api/v1/facts", {"user_id": "u1", "content": "Owns the deployctl release tooling"}, format="json")
    fake_openai.go_down("/v1/embeddings")

    response = api.post("/api/v1/context", {"user_id": "u1", "query": "deployctl rollback"}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["degraded"] == ["embeddings"]
    assert "Owns the deployctl release tooling" in body["text"]
    assert "deployctl rollback with the previous build number" in body["text"]
    assert [fact["fact"]["content"] for fact in body["facts"]] == ["Owns the deployctl release tooling"]


def test_a_context_with_its_vector_says_nothing_is_degraded(api, knowledge_base):
    response = api.post("/api/v1/context", {"user_id": "u1", "query": "deployctl rollback"}, format="json")

    assert response.status_code == 200
    assert response.json()["degraded"] == []
