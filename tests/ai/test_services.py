"""Embedding through the cache, re-embedding stale rows, and the vector-size check."""

from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from pgvector.django import CosineDistance

from ai import services as ai_services
from ai.checks import check_embedding_dimensions, embedding_dimension_problems, vector_columns
from ai.errors import AIProviderError
from ai.models import EmbeddingCache
from ai.services import (
    EMBEDDINGS,
    TENANT_TEXT,
    active_embedding_model,
    cache_stats_of,
    embed_query,
    embed_texts,
    embedding_cache_erase_user,
    embedding_probe,
    provider_report,
    provider_state,
)
from facts.models import Fact
from tests.factories import make_fact, make_tenant

pytestmark = pytest.mark.django_db


@pytest.mark.usefixtures("openai_settings")
def test_the_same_text_twice_costs_one_upstream_call(fake_openai, tenant):
    first = embed_texts(["we deploy on Fridays"], tenant=tenant, user_id="u1")
    second = embed_texts(["we deploy on Fridays"], tenant=tenant, user_id="u1")

    assert np.array_equal(first, second)
    assert len(fake_openai.requests_to("/v1/embeddings")) == 1
    stats = cache_stats_of(tenant=tenant)
    assert (stats.hits, stats.misses) == (1, 1)


@pytest.mark.usefixtures("openai_settings")
def test_duplicates_in_one_call_are_embedded_once_and_order_is_kept(fake_openai, tenant):
    vectors = embed_texts(["a", "b", "a"], tenant=tenant, user_id="u1")

    assert fake_openai.requests_to("/v1/embeddings")[0]["body"]["input"] == ["a", "b"]
    assert np.array_equal(vectors[0], vectors[2])
    assert not np.array_equal(vectors[0], vectors[1])


@pytest.mark.usefixtures("openai_settings")
def test_clearing_the_cache_makes_the_next_call_go_upstream(fake_openai, tenant):
    embed_texts(["cached text"], tenant=tenant, user_id="u1")

    out = StringIO()
    call_command("embedding_cache_clear", stdout=out)
    embed_texts(["cached text"], tenant=tenant, user_id="u1")

    assert "Deleted 1 cached embedding" in out.getvalue()
    assert len(fake_openai.requests_to("/v1/embeddings")) == 2


def test_the_hash_embedder_skips_the_cache(tenant):
    embed_texts(["anything"], tenant=tenant, user_id="u1")

    assert not EmbeddingCache.objects.exists()


def cached_owners() -> list[tuple[str, str]]:
    return sorted(EmbeddingCache.objects.values_list("tenant__name", "user_id"))


@pytest.mark.usefixtures("openai_settings")
class TestOwners:
    """The cache keeps a vector under the tenant and user whose text it is: nobody else ever reads it."""

    def test_another_tenant_embedding_the_same_text_never_reads_the_first_tenants_row(self, fake_openai, tenant):
        other, _ = make_tenant("globex")
        embed_texts(["we deploy on Fridays"], tenant=tenant, user_id="u1")

        vectors = embed_texts(["we deploy on Fridays"], tenant=other, user_id="u1")

        assert [request["body"]["input"] for request in fake_openai.requests_to("/v1/embeddings")] == [
            ["we deploy on Fridays"],
            ["we deploy on Fridays"],
        ]
        assert np.allclose(vectors[0], embed_query("we deploy on Fridays", tenant=None, user_id=None))
        assert cached_owners() == [("acme", "u1"), ("globex", "u1")]
        assert (cache_stats_of(tenant=other).hits, cache_stats_of(tenant=other).misses) == (0, 1)
        assert (cache_stats_of(tenant=tenant).hits, cache_stats_of(tenant=tenant).misses) == (0, 1)

    def test_a_user_hits_only_their_own_rows_and_the_tenants_documents_are_apart(self, fake_openai, tenant):
        embed_texts(["we deploy on Fridays"], tenant=tenant, user_id="u1")
        embed_texts(["we deploy on Fridays", "we deploy on Fridays"], tenant=tenant, user_id=["u2", "u1"])
        embed_texts(["we deploy on Fridays"], tenant=tenant, user_id=TENANT_TEXT)

        sent = [request["body"]["input"] for request in fake_openai.requests_to("/v1/embeddings")]
        assert sent == [["we deploy on Fridays"]] * 3  # u2's and the tenant's copies are their own misses
        assert cached_owners() == [("acme", ""), ("acme", "u1"), ("acme", "u2")]
        assert (cache_stats_of(tenant=tenant).hits, cache_stats_of(tenant=tenant).misses) == (1, 3)

    def test_no_owner_skips_the_cache(self, fake_openai, tenant):
        embed_texts(["a tenant-wide query"], tenant=tenant, user_id=None)
        embed_texts(["a maintenance text"], tenant=None, user_id=None)
        embed_texts(["a maintenance text"], tenant=None, user_id=None)

        assert len(fake_openai.requests_to("/v1/embeddings")) == 3
        assert cached_owners() == []

    def test_erasing_a_user_drops_only_that_users_rows(self, tenant):
        other, _ = make_tenant("globex")
        for scope, user_id in [(tenant, "u1"), (tenant, "u2"), (tenant, TENANT_TEXT), (other, "u1")]:
            embed_texts(["prefers tea", "lives in Porto"], tenant=scope, user_id=user_id)

        assert embedding_cache_erase_user(tenant=tenant, user_id="u1") == 2

        assert cached_owners() == [("acme", ""), ("acme", ""), ("acme", "u2"), ("acme", "u2")] + [("globex", "u1")] * 2
        with pytest.raises(ValueError, match="belong to no user"):
            embedding_cache_erase_user(tenant=tenant, user_id=TENANT_TEXT)


def nearest(tenant, query: str) -> list[str]:
    """What a search over the active model's vectors returns, best first."""
    return list(
        Fact.objects.filter(tenant=tenant, embedding_model=active_embedding_model())
        .annotate(distance=CosineDistance("embedding", embed_query(query, tenant=tenant, user_id="user-1")))
        .order_by("distance")
        .values_list("content", flat=True)
    )


@pytest.mark.usefixtures("openai_settings")
def test_reembed_moves_rows_to_the_active_model_and_search_then_finds_them(tenant):
    noise = np.random.default_rng(7).normal(size=(3, 384))
    for content, vector in zip(["deploys with Kubernetes", "prefers tea", "lives in Berlin"], noise, strict=True):
        make_fact(tenant=tenant, content=content, embedding=vector, embedding_model="old-model")
    assert nearest(tenant, "where does the user live, Berlin?") == []  # old vectors are never mixed in

    out = StringIO()
    call_command("reembed", "--batch", "2", stdout=out, stderr=StringIO())

    assert set(Fact.objects.values_list("embedding_model", flat=True)) == {"fake-embed"}
    assert "facts_fact: 3 row(s) re-embedded" in out.getvalue()
    assert nearest(tenant, "where does the user live, Berlin?")[0] == "lives in Berlin"

    call_command("reembed", stdout=out, stderr=StringIO())
    assert "facts_fact: 0 row(s) re-embedded" in out.getvalue()  # nothing stale is left


def test_a_changed_dimension_setting_is_reported_and_reembed_fixes_it(settings, monkeypatch, tenant):
    vector = embed_query("prefers tea", tenant=tenant, user_id="user-1")
    make_fact(tenant=tenant, content="prefers tea", embedding=vector, embedding_model="hash-v2")
    # As a process started with EMBEDDING_DIMENSIONS=8 would see it: the setting and the model fields.
    settings.EMBEDDING_DIMENSIONS = 8
    for model, field_name in vector_columns():
        monkeypatch.setattr(model._meta.get_field(field_name), "dimensions", 8)

    errors = check_embedding_dimensions(databases=["default"])
    assert "facts_fact.embedding holds vector(384) but EMBEDDING_DIMENSIONS is 8" in [e.msg for e in errors]
    assert all("manage.py reembed" in error.hint for error in errors)

    call_command("reembed", stdout=StringIO(), stderr=StringIO())

    assert embedding_dimension_problems() == []
    assert len(Fact.objects.get().embedding) == 8


@pytest.mark.usefixtures("openai_settings")
class TestProviderState:
    def test_failures_are_counted_from_the_first_until_a_success(self, fake_openai):
        fake_openai.go_down("/v1/embeddings")
        for _ in range(2):
            with pytest.raises(AIProviderError):
                embed_texts(["one"], tenant=None, user_id=None)
        failing = provider_state(EMBEDDINGS)
        fake_openai.recover()
        embed_texts(["two"], tenant=None, user_id=None)
        back = provider_state(EMBEDDINGS)

        assert failing.failing
        assert failing.consecutive_failures == 2
        assert failing.failing_since < failing.last_failure_at
        assert "503" in failing.last_error
        assert not back.failing
        assert back.failing_since is None
        assert back.last_success_at > failing.last_failure_at
        assert provider_report(EMBEDDINGS)["status"] == "ok"

    def test_a_probe_does_not_call_a_provider_that_just_failed(self, fake_openai, monkeypatch):
        fake_openai.go_down("/v1/embeddings")
        with pytest.raises(AIProviderError):
            embed_texts(["one"], tenant=None, user_id=None)
        calls = len(fake_openai.requests_to("/v1/embeddings"))

        embedding_probe()  # within PROBE_AFTER_SECONDS of the failure
        held_back = len(fake_openai.requests_to("/v1/embeddings"))
        monkeypatch.setattr(ai_services, "PROBE_AFTER_SECONDS", 0)
        fake_openai.recover()
        embedding_probe()

        assert held_back == calls
        assert len(fake_openai.requests_to("/v1/embeddings")) > calls
        assert not provider_state(EMBEDDINGS).failing
