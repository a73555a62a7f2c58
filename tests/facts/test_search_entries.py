"""FactSearchEntry, the narrow copy of each searchable fact, stays in step with facts_fact through every kind of
write (the triggers of migration facts/0013): compared row by row with what it must hold."""

import numpy as np
import pytest
from django.db import connection

from facts.models import Fact, FactSearchEntry
from facts.selectors import facts_search, search_scope_lexeme
from facts.services import fact_delete, fact_reject, fact_remember, fact_update, facts_import
from tenancy.services import tenant_create

pytestmark = pytest.mark.django_db


def expected_entries() -> dict[int, tuple]:
    """What the entries must be: one per current active or pending fact, computed here from the facts."""
    entries = {}
    for fact in Fact.objects.filter(valid_to__isnull=True, status__in=["active", "pending"]):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT search_vector || array_to_tsvector(ARRAY[%s]) FROM facts_fact WHERE id = %s",
                [search_scope_lexeme(fact.tenant_id, fact.user_id), fact.pk],
            )
            [keywords] = cursor.fetchone()
        vector = None if fact.embedding is None else np.asarray(fact.embedding, dtype=float)
        vector_model = "" if fact.embedding is None else fact.embedding_model
        entries[fact.pk] = (
            fact.tenant_id, fact.user_id, fact.agent_id, fact.category, fact.status, vector, vector_model,
            fact.embedding_pending != "", keywords,
        )  # fmt: skip
    return entries


def stored_entries() -> dict[int, tuple]:
    entries = {}
    for entry in FactSearchEntry.objects.all():
        with connection.cursor() as cursor:
            cursor.execute("SELECT keywords::text FROM facts_factsearchentry WHERE fact_id = %s", [entry.fact_id])
            [keywords] = cursor.fetchone()
        vector = None if entry.embedding is None else np.asarray(entry.embedding, dtype=float)
        entries[entry.fact_id] = (
            entry.tenant_id, entry.user_id, entry.agent_id, entry.category, entry.status, vector,
            entry.vector_model, entry.awaiting_vector, keywords,
        )  # fmt: skip
    return entries


def assert_in_step():
    stored, expected = stored_entries(), expected_entries()
    assert stored.keys() == expected.keys()
    for fact_id, entry in stored.items():
        *columns, vector, model, awaiting, keywords = entry
        *expected_columns, expected_vector, expected_model, expected_awaiting, expected_keywords = expected[fact_id]
        assert (columns, model, awaiting, keywords) == (
            expected_columns,
            expected_model,
            expected_awaiting,
            expected_keywords,
        )
        assert (vector is None) == (expected_vector is None)
        if vector is not None:  # half precision: three significant digits
            np.testing.assert_allclose(vector, expected_vector, rtol=1e-3, atol=1e-4)


def test_every_kind_of_write_keeps_the_entries_in_step(tenant, settings):
    settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 1.0
    imported = facts_import(
        tenant=tenant,
        facts=[{"user_id": "u1", "content": f"Drinks tea number {n}", "agent_id": "a1"} for n in range(5)],
        actor="test",
    )  # COPY
    assert_in_step()
    assert FactSearchEntry.objects.count() == 5

    remembered = fact_remember(tenant=tenant, user_id="u1", content="Lives in Lisbon").fact  # ORM insert
    fact_remember(tenant=tenant, user_id="u1", content="Lives in Porto now, no longer in Lisbon")  # supersedes
    fact_update(tenant=tenant, fact_id=imported[0].pk, actor="test", content="Drinks coffee, not tea")
    fact_update(tenant=tenant, fact_id=imported[1].pk, actor="test", category="preference", pinned=True)
    fact_reject(tenant=tenant, fact_id=imported[2].pk, actor="test")
    fact_delete(tenant=tenant, fact_id=imported[3].pk, actor="test")
    Fact.objects.filter(pk=imported[4].pk).update(status="pending", embedding=None, embedding_pending="embed")
    Fact.objects.filter(tenant=tenant).update(usage_count=7)  # no copied column: nothing to write
    assert_in_step()
    assert not FactSearchEntry.objects.filter(fact_id__in=[imported[2].pk, imported[3].pk]).exists()
    assert FactSearchEntry.objects.filter(fact_id=remembered.pk).exists() == (
        Fact.objects.get(pk=remembered.pk).valid_to is None
    )

    other, _ = tenant_create(name="other")
    facts_import(tenant=other, facts=[{"user_id": "u1", "content": "Drinks tea"}], actor="test")
    other.delete()  # the tenant's facts go, and their entries with them
    assert_in_step()


def test_a_fact_is_found_by_its_new_words_once_edited_and_not_once_rejected(tenant):
    [fact] = facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": "Plays the cello"}], actor="test")
    fact_update(tenant=tenant, fact_id=fact.pk, actor="test", content="Plays the theremin")

    assert [hit.fact.pk for hit in facts_search(tenant=tenant, user_id="u1", query="theremin", keyword_only=True)] == [
        fact.pk
    ]
    assert facts_search(tenant=tenant, user_id="u1", query="cello", keyword_only=True) == []

    fact_reject(tenant=tenant, fact_id=fact.pk, actor="test")
    assert facts_search(tenant=tenant, user_id="u1", query="theremin") == []


def test_a_words_scope_lexeme_written_into_a_fact_reaches_no_other_user(tenant):
    facts_import(tenant=tenant, facts=[{"user_id": "victim", "content": "Keeps the vault code 4471"}], actor="test")
    forged = f"{search_scope_lexeme(tenant.pk, 'victim')} vault code"
    facts_import(tenant=tenant, facts=[{"user_id": "mallory", "content": forged}], actor="test")

    victims = facts_search(tenant=tenant, user_id="victim", query="vault code", keyword_only=True)

    assert [hit.fact.user_id for hit in victims] == ["victim"]
