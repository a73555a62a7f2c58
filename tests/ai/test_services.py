"""Embedding through the cache, re-embedding stale rows, and the vector-size check."""

from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from pgvector.django import CosineDistance

from ai.checks import check_embedding_dimensions, embedding_dimension_problems, vector_columns
from ai.models import EmbeddingCache
from ai.services import active_embedding_model, cache_stats, embed_query, embed_texts
from facts.models import Fact
from tests.factories import make_fact

pytestmark = pytest.mark.django_db


@pytest.mark.usefixtures("openai_settings")
def test_the_same_text_twice_costs_one_upstream_call(fake_openai):
    hits_before = cache_stats.hits

    first = embed_texts(["we deploy on Fridays"])
    second = embed_texts(["we deploy on Fridays"])

    assert np.array_equal(first, second)
    assert len(fake_openai.requests_to("/v1/embeddings")) == 1
    assert cache_stats.hits == hits_before + 1


@pytest.mark.usefixtures("openai_settings")
def test_duplicates_in_one_call_are_embedded_once_and_order_is_kept(fake_openai):
    vectors = embed_texts(["a", "b", "a"])

    assert fake_openai.requests_to("/v1/embeddings")[0]["body"]["input"] == ["a", "b"]
    assert np.array_equal(vectors[0], vectors[2])
    assert not np.array_equal(vectors[0], vectors[1])


@pytest.mark.usefixtures("openai_settings")
def test_clearing_the_cache_makes_the_next_call_go_upstream(fake_openai):
    embed_texts(["cached text"])

    out = StringIO()
    call_command("embedding_cache_clear", stdout=out)
    embed_texts(["cached text"])

    assert "Deleted 1 cached embedding" in out.getvalue()
    assert len(fake_openai.requests_to("/v1/embeddings")) == 2


def test_the_hash_embedder_skips_the_cache():
    embed_texts(["anything"])

    assert not EmbeddingCache.objects.exists()


def nearest(tenant, query: str) -> list[str]:
    """What a search over the active model's vectors returns, best first."""
    return list(
        Fact.objects.filter(tenant=tenant, embedding_model=active_embedding_model())
        .annotate(distance=CosineDistance("embedding", embed_query(query)))
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
    make_fact(tenant=tenant, content="prefers tea", embedding=embed_query("prefers tea"), embedding_model="hash-v2")
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
