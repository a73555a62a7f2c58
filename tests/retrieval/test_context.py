"""context_build and the search/context API: prompt-ready text, citations, budget, usage, cold start."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.text import estimate_tokens
from facts.models import Fact
from facts.services import facts_import
from retrieval.context import COLD_START_HINT, context_build

pytestmark = pytest.mark.django_db

FACTS = [
    "Prefers PostgreSQL for new services because of JSONB",
    "Deploys the billing service with Kubernetes",
    "Works from Lisbon most of the year",
    "Prefers short code reviews with small diffs",
    "Uses pytest with factories for every Django project",
]


@pytest.fixture
def facts(tenant):
    return facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": c} for c in FACTS], actor="test")


def usage(tenant) -> dict[str, int]:
    return dict(Fact.objects.filter(tenant=tenant).values_list("content", "usage_count"))


def active_counts(queries) -> int:
    """The cold-start counts (facts_active_count) among captured queries."""
    return sum('AS "active" FROM "facts_factsearchcount"' in query["sql"] for query in queries)


def test_context_lists_relevant_facts_with_citations(tenant, facts):
    context = context_build(tenant=tenant, user_id="u1", query="which database for the new service?")

    assert context.text.startswith("## What you know about this user")
    best = context.facts[0].fact
    assert best.content == FACTS[0]
    assert f"- {best.content} [fact:{best.pk}, {best.valid_from:%Y-%m-%d}]" in context.text
    assert not context.cold_start


def test_usage_rises_only_for_injected_facts(tenant, facts):
    context = context_build(tenant=tenant, user_id="u1", query="database JSONB", max_tokens=100)

    injected = {hit.fact.content for hit in context.facts}
    assert 0 < len(injected) < len(FACTS)
    counts = usage(tenant)
    assert {content for content, count in counts.items() if count == 1} == injected
    assert all(count == 0 for content, count in counts.items() if content not in injected)


@pytest.mark.parametrize("max_tokens", [50, 80, 200, 2000])
def test_the_token_budget_is_respected(tenant, facts, max_tokens):
    context = context_build(tenant=tenant, user_id="u1", query="how does the user work?", max_tokens=max_tokens)

    assert estimate_tokens(context.text) <= max_tokens
    assert context.token_count == estimate_tokens(context.text)


def test_a_new_user_gets_a_cold_start_hint(tenant):
    facts_import(tenant=tenant, facts=[{"user_id": "newbie", "content": "Prefers tea"}], actor="test")
    with CaptureQueriesContext(connection) as queries:
        context = context_build(tenant=tenant, user_id="newbie", query="what do they drink?")

    assert context.cold_start
    assert active_counts(queries) == 1
    assert COLD_START_HINT in context.text
    assert "Prefers tea" in context.text


@pytest.mark.parametrize(("fact_limit", "counted"), [(10, 0), (3, 0), (2, 1)])
def test_a_search_finding_enough_facts_tells_cold_start_without_counting(tenant, facts, fact_limit, counted):
    with CaptureQueriesContext(connection) as queries:
        context = context_build(tenant=tenant, user_id="u1", query="which database?", fact_limit=fact_limit)

    assert not context.cold_start  # five facts, found or counted
    assert active_counts(queries) == counted  # fewer hits than COLD_START_FACTS: counted


def test_another_users_facts_never_reach_the_context(tenant, facts, other_tenant_and_key):
    facts_import(
        tenant=other_tenant_and_key[0], facts=[{"user_id": "u1", "content": "Globex uses Oracle"}], actor="test"
    )

    context = context_build(tenant=tenant, user_id="u2", query="database")

    assert context.facts == []
    assert "Oracle" not in context.text
    assert "PostgreSQL" not in context.text


class TestApi:
    def test_search_returns_results_with_their_score_breakdown(self, api, facts):
        response = api.post("/api/v1/facts/search", {"user_id": "u1", "query": "Kubernetes deploys"}, format="json")

        assert response.status_code == 200
        [best, *_] = response.json()["results"]
        assert best["fact"]["content"] == FACTS[1]
        assert set(best["scores"]) == {"vector", "keyword", "decay", "final"}
        assert best["score"] == best["scores"]["final"]

    def test_search_on_an_empty_store_is_200_with_no_results(self, api):
        response = api.post("/api/v1/facts/search", {"user_id": "u1", "query": "anything"}, format="json")

        assert response.status_code == 200
        assert response.json() == {"results": [], "degraded": []}

    @pytest.mark.parametrize(
        ("payload", "field"),
        [
            ({"user_id": "u1"}, "query"),
            ({"user_id": "u1", "query": ""}, "query"),
            ({"query": "x"}, "user_id"),
            ({"user_id": "u1", "query": "x", "limit": 0}, "limit"),
            ({"user_id": "u1", "query": "x", "categories": ["gossip"]}, "categories"),
            ({"user_id": "u1", "query": "x", "as_of": "yesterday"}, "as_of"),
        ],
    )
    def test_bad_search_input_is_400_naming_the_field(self, api, payload, field):
        response = api.post("/api/v1/facts/search", payload, format="json")

        assert response.status_code == 400
        assert field in response.json()["error"]["details"]

    def test_context_endpoint_returns_text_and_counts_usage(self, api, tenant, facts):
        response = api.post("/api/v1/context", {"user_id": "u1", "query": "database", "max_tokens": 100}, format="json")

        assert response.status_code == 200
        body = response.json()
        assert body["text"].startswith("## What you know about this user")
        assert body["token_count"] <= 100
        assert body["documents"] == []
        assert sum(usage(tenant).values()) == len(body["facts"]) > 0

    def test_context_rejects_a_too_small_budget(self, api):
        response = api.post("/api/v1/context", {"user_id": "u1", "query": "x", "max_tokens": 5}, format="json")

        assert response.status_code == 400
        assert "max_tokens" in response.json()["error"]["details"]
