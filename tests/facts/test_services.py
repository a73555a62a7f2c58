"""fact_remember and the review services: every outcome, in English and Chinese."""

from datetime import UTC, datetime

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ai.services import embed_query
from core.errors import ApplicationError
from facts.models import Fact, FactConflict, FactEvent
from facts.selectors import fact_events, facts_list
from facts.services import (
    conflict_resolve,
    fact_approve,
    fact_delete,
    fact_reject,
    fact_remember,
    fact_update,
    facts_import,
    facts_record_usage,
)

pytestmark = pytest.mark.django_db


def remember(tenant, content, **kwargs):
    return fact_remember(tenant=tenant, user_id="u1", content=content, **kwargs)


def current(tenant) -> list[str]:
    return sorted(facts_list(tenant=tenant, user_id="u1").values_list("content", flat=True))


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def actions(fact) -> list[str]:
    return list(fact_events(tenant=fact.tenant, fact_id=fact.pk).values_list("action", flat=True))


class TestCreated:
    @pytest.mark.parametrize("content", ["Prefers dark mode in every editor", "喜欢在编辑器里用深色模式"])
    def test_new_information_is_stored_active_with_an_event(self, tenant, content):
        result = remember(tenant, content, category="preference")

        assert result.outcome == "created"
        assert result.fact.status == Fact.Status.ACTIVE
        assert result.fact.embedding_model == "hash-v2"
        assert actions(result.fact) == ["created"]

    def test_a_low_confidence_fact_waits_for_review(self, tenant):
        result = remember(tenant, "Might be moving to Lisbon", confidence=0.4)

        assert result.fact.status == Fact.Status.PENDING

    def test_different_users_and_tenants_never_merge(self, tenant, other_tenant_and_key):
        remember(tenant, "Prefers tea")
        other = fact_remember(tenant=tenant, user_id="u2", content="Prefers tea")
        foreign = fact_remember(tenant=other_tenant_and_key[0], user_id="u1", content="Prefers tea")

        assert other.outcome == foreign.outcome == "created"


class TestMerged:
    @pytest.mark.parametrize(
        ("first", "again"),
        [("Prefers dark mode.", "prefers   DARK mode"), ("我喜欢用 Vim 写代码。", "我喜欢用 Vim 写代码")],
    )
    def test_the_same_fact_again_raises_confidence_instead_of_adding_a_row(self, tenant, first, again):
        original = remember(tenant, first, confidence=0.8).fact

        result = remember(tenant, again, confidence=0.8)

        assert result.outcome == "merged"
        assert result.fact.pk == original.pk
        assert Fact.objects.filter(tenant=tenant).count() == 1
        assert result.fact.confidence == pytest.approx(0.88)
        assert actions(original) == ["created", "merged"]

    @pytest.mark.parametrize(
        ("first", "richer"),
        [
            ("Prefers PostgreSQL", "Prefers PostgreSQL because it has JSONB"),
            ("我们用 PostgreSQL", "我们用 PostgreSQL 存储订单数据"),
        ],
    )
    def test_richer_wording_replaces_the_old_and_history_keeps_it(self, tenant, first, richer):
        original = remember(tenant, first).fact

        result = remember(tenant, richer)

        assert result.outcome == "merged"
        assert result.fact.pk == original.pk
        assert Fact.objects.get(pk=original.pk).content == richer
        merged = fact_events(tenant=tenant, fact_id=original.pk).get(action="merged")
        assert merged.before["content"] == first
        assert merged.after["content"] == richer


class TestSuperseded:
    @pytest.mark.parametrize(
        ("old", "new"),
        [
            ("Uses MySQL for the orders service", "Switched from MySQL to PostgreSQL for the orders service"),
            ("Lives in Berlin", "Lives in Paris"),
            ("我们的项目使用 MySQL", "我们的项目不再使用 MySQL"),
            ("我住在柏林", "我住在巴黎"),
        ],
    )
    def test_a_contradiction_retires_the_old_fact_and_keeps_it_as_history(self, tenant, old, new):
        old_fact = remember(tenant, old).fact

        result = remember(tenant, new)

        assert result.outcome == "superseded"
        assert result.superseded_ids == [old_fact.pk]
        retired = Fact.objects.get(pk=old_fact.pk)
        assert retired.superseded_by_id == result.fact.pk
        assert retired.valid_to is not None
        assert current(tenant) == [new]
        assert list(facts_list(tenant=tenant, user_id="u1", validity="superseded")) == [retired]
        assert actions(retired) == ["created", "superseded"]


class TestConflict:
    def test_an_unsure_contradiction_opens_a_conflict_and_the_new_fact_waits(self, tenant):
        old = remember(tenant, "Lives in Berlin").fact

        result = remember(tenant, "Lives in Paris", confidence=0.5)

        assert result.outcome == "conflict"
        assert result.fact.status == Fact.Status.PENDING
        conflict = FactConflict.objects.get(pk=result.conflict_ids[0])
        assert (conflict.existing_fact, conflict.new_fact, conflict.status) == (old, result.fact, "open")
        assert Fact.objects.get(pk=old.pk).valid_to is None  # nothing retired before a human decides

    @pytest.mark.parametrize(("old", "new"), [("Works at Google", "Works at Meta"), ("我叫李雷", "我叫韩梅梅")])
    def test_an_extracted_fact_never_overrides_a_human_approved_one(self, tenant, old, new):
        approved = remember(tenant, old).fact
        fact_approve(tenant=tenant, fact_id=approved.pk, actor="staff:1")

        result = remember(tenant, new, source=Fact.Source.EXTRACTED, confidence=0.99)

        assert result.outcome == "conflict"
        assert Fact.objects.get(pk=approved.pk).valid_to is None

    def test_a_pinned_fact_is_never_superseded_automatically(self, tenant):
        remember(tenant, "Lives in Berlin", pinned=True)

        assert remember(tenant, "Lives in Paris").outcome == "conflict"


class TestConflictResolution:
    @pytest.fixture
    def conflict(self, tenant):
        remember(tenant, "Lives in Berlin")
        result = remember(tenant, "Lives in Paris", confidence=0.5)
        return FactConflict.objects.get(pk=result.conflict_ids[0])

    def test_keep_new_supersedes_the_old_fact(self, tenant, conflict):
        conflict_resolve(tenant=tenant, conflict_id=conflict.pk, resolution="keep_new", actor="staff:1")

        conflict.refresh_from_db()
        assert (conflict.status, conflict.resolution, conflict.resolved_by) == ("resolved", "keep_new", "staff:1")
        assert Fact.objects.get(pk=conflict.existing_fact_id).superseded_by_id == conflict.new_fact_id
        assert current(tenant) == ["Lives in Paris"]
        assert Fact.objects.get(pk=conflict.new_fact_id).status == "active"

    def test_keep_old_rejects_the_new_fact(self, tenant, conflict):
        conflict_resolve(tenant=tenant, conflict_id=conflict.pk, resolution="keep_old", actor="staff:1")

        assert Fact.objects.get(pk=conflict.new_fact_id).status == "rejected"
        assert Fact.objects.get(pk=conflict.existing_fact_id).valid_to is None

    def test_keep_both_activates_the_new_fact_and_keeps_the_old(self, tenant, conflict):
        conflict_resolve(tenant=tenant, conflict_id=conflict.pk, resolution="keep_both", actor="staff:1")

        assert sorted(Fact.objects.filter(status="active", valid_to=None).values_list("content", flat=True)) == [
            "Lives in Berlin",
            "Lives in Paris",
        ]

    def test_a_resolved_conflict_cannot_be_resolved_again(self, tenant, conflict):
        conflict_resolve(tenant=tenant, conflict_id=conflict.pk, resolution="keep_old", actor="staff:1")

        with pytest.raises(ApplicationError, match="already resolved"):
            conflict_resolve(tenant=tenant, conflict_id=conflict.pk, resolution="keep_new", actor="staff:1")


class TestReview:
    def test_history_lists_every_change_with_actor_and_values(self, tenant):
        fact = remember(tenant, "Prefers tabs", confidence=0.5, actor="api_key:1").fact
        fact_approve(tenant=tenant, fact_id=fact.pk, actor="staff:7")
        fact_update(tenant=tenant, fact_id=fact.pk, actor="staff:7", content="Prefers spaces", pinned=True)
        fact_reject(tenant=tenant, fact_id=fact.pk, actor="staff:8")
        fact_delete(tenant=tenant, fact_id=fact.pk, actor="staff:8")

        events = list(fact_events(tenant=tenant, fact_id=fact.pk))
        assert [(e.action, e.actor) for e in events] == [
            ("created", "api_key:1"),
            ("approved", "staff:7"),
            ("updated", "staff:7"),
            ("rejected", "staff:8"),
            ("deleted", "staff:8"),
        ]
        assert (events[1].before["status"], events[1].after["status"]) == ("pending", "active")
        assert (events[2].before["content"], events[2].after["content"]) == ("Prefers tabs", "Prefers spaces")
        assert not Fact.objects.filter(pk=fact.pk).exists()

    def test_update_re_embeds_new_content(self, tenant):
        fact = remember(tenant, "Prefers tabs").fact
        before = list(fact.embedding)

        updated = fact_update(tenant=tenant, fact_id=fact.pk, actor="staff:1", content="Drinks green tea daily")

        assert list(Fact.objects.get(pk=updated.pk).embedding) != before

    def test_invalid_update_changes_nothing(self, tenant):
        fact = remember(tenant, "Prefers tabs").fact

        with pytest.raises(ValidationError):
            fact_update(tenant=tenant, fact_id=fact.pk, actor="staff:1", content="Prefers spaces", confidence=3)

        assert Fact.objects.get(pk=fact.pk).content == "Prefers tabs"
        assert actions(fact) == ["created"]

    def test_a_fact_of_another_tenant_cannot_be_reviewed(self, tenant, other_tenant_and_key):
        foreign = fact_remember(tenant=other_tenant_and_key[0], user_id="u1", content="Prefers tea").fact

        with pytest.raises(ApplicationError, match="not found"):
            fact_approve(tenant=tenant, fact_id=foreign.pk, actor="staff:1")


class TestValidation:
    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            ({"content": "   "}, "content"),
            ({"content": "x" * 2001}, "content"),
            ({"category": "gossip"}, "category"),
            ({"confidence": 1.5}, "confidence"),
            ({"user_id": "has space"}, "user_id"),
            ({"user_id": ""}, "user_id"),
        ],
    )
    def test_bad_input_names_the_field_and_stores_nothing(self, tenant, kwargs, field):
        arguments = {"tenant": tenant, "user_id": "u1", "content": "Prefers tea", **kwargs}

        with pytest.raises(ValidationError) as raised:
            fact_remember(**arguments)

        assert field in raised.value.message_dict
        assert not Fact.objects.exists()


class TestUsage:
    def test_usage_rises_once_per_recorded_use_and_only_for_those_facts(self, tenant):
        used, unused = remember(tenant, "Prefers tea").fact, remember(tenant, "Works remotely").fact

        assert facts_record_usage(tenant=tenant, fact_ids=[used.pk, used.pk]) == 1
        facts_record_usage(tenant=tenant, fact_ids=[used.pk])

        used.refresh_from_db()
        unused.refresh_from_db()
        assert used.usage_count == 2
        assert used.last_used_at is not None
        assert (unused.usage_count, unused.last_used_at) == (0, None)

    def test_usage_of_another_tenants_fact_is_not_counted(self, tenant, other_tenant_and_key):
        foreign = fact_remember(tenant=other_tenant_and_key[0], user_id="u1", content="Prefers tea").fact

        assert facts_record_usage(tenant=tenant, fact_ids=[foreign.pk]) == 0

    def test_usage_counted_inside_a_callers_transaction_leaves_its_commit_as_durable_as_it_was(self, tenant):
        """Only a count that commits by itself skips the wait for the WAL flush (tests/facts/test_concurrency.py)."""
        used = remember(tenant, "Prefers tea").fact
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = on")  # whatever the server's default

        with CaptureQueriesContext(connection) as queries:
            assert facts_record_usage(tenant=tenant, fact_ids=[used.pk]) == 1

        assert "synchronous_commit" not in queries[-1]["sql"]
        assert synchronous_commit() == "on"


class TestImport:
    def test_facts_are_stored_as_given_without_merging(self, tenant):
        rows = facts_import(
            tenant=tenant,
            facts=[
                {"user_id": "u1", "content": "Prefers tea", "occurred_at": timezone.now()},
                {"user_id": "u1", "content": "Prefers tea"},
                {"user_id": "u2", "content": "Lives in Berlin", "status": "pending", "category": "profile"},
            ],
            actor="api_key:1",
        )

        assert [row.content for row in rows] == ["Prefers tea", "Prefers tea", "Lives in Berlin"]
        assert Fact.objects.filter(tenant=tenant, source="import").count() == 3
        assert Fact.objects.get(pk=rows[2].pk).status == "pending"
        assert all(row.embedding is not None for row in Fact.objects.all())
        assert FactEvent.objects.filter(tenant=tenant, action="created").count() == 3

    def test_one_bad_item_stores_nothing(self, tenant):
        with pytest.raises(ValidationError) as raised:
            facts_import(
                tenant=tenant,
                facts=[{"user_id": "u1", "content": "Prefers tea"}, {"user_id": "u1", "content": ""}],
                actor="api_key:1",
            )

        assert raised.value.message_dict == {"facts[1].content": ["Must not be empty."]}
        assert not Fact.objects.exists()

    def test_every_value_arrives_as_given(self, tenant):
        occurred = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)

        [row] = facts_import(
            tenant=tenant,
            facts=[
                {
                    "user_id": "u1",
                    "content": "Moved to  Lisbon",
                    "category": "profile",
                    "confidence": 0.8,
                    "pinned": True,
                    "occurred_at": occurred.isoformat(),
                    "metadata": {"origin": "crm", "ids": [1, 2]},
                    "agent_id": "support-bot",
                }
            ],
            actor="api_key:1",
        )

        stored = Fact.objects.get(pk=row.pk)
        assert (stored.content, stored.category, stored.confidence, stored.pinned) == (
            "Moved to Lisbon",
            "profile",
            0.8,
            True,
        )
        assert stored.occurred_at == stored.valid_from == occurred
        assert stored.metadata == {"origin": "crm", "ids": [1, 2]}
        assert stored.agent_id == "support-bot"
        assert np.allclose(stored.embedding, embed_query("Moved to Lisbon", tenant=None, user_id=None), atol=1e-6)
        assert "8 May 2023" in stored.search_text
