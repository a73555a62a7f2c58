"""forget_policy_apply: what is used survives, what is stale fades, what is past retention is gone."""

from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db.models import signals

from core.errors import ApplicationError
from facts.models import Fact, FactConflict, FactEvent
from facts.selectors import fact_events, facts_search
from facts.services import deletion, fact_remember, fact_restore, facts_record_usage
from forgetting import services as forgetting_services
from forgetting.models import ForgetPolicy, ForgetRun
from forgetting.selectors import forget_policy_get
from forgetting.services import forget_policy_apply, forget_policy_reset, forget_policy_set

from .conftest import add, age, status_of

pytestmark = pytest.mark.django_db


def found(tenant, query: str, user_id: str = "u1") -> list[str]:
    return [hit.fact.content for hit in facts_search(tenant=tenant, user_id=user_id, query=query, limit=10)]


def fact_state(tenant) -> list[tuple]:
    """Everything a run could change, to compare before and after."""
    facts = Fact.objects.filter(tenant=tenant).order_by("pk")
    events = FactEvent.objects.filter(tenant=tenant).order_by("pk")
    return [
        *facts.values_list("pk", "status", "archived_at", "updated_at", "superseded_by"),
        *events.values_list("pk", "action", "before", "after"),
        *FactConflict.objects.filter(tenant=tenant).values_list("pk"),
    ]


class TestArchiveUnused:
    def test_facts_unused_past_the_limit_are_archived_and_vanish_from_search(self, tenant, now):
        [stale] = add(tenant, "Prefers green tea in the morning")
        age(stale, now, days=91)
        assert found(tenant, "green tea") == ["Prefers green tea in the morning"]

        report = forget_policy_apply(tenant=tenant, now=now)

        assert (report.status, report.archived, report.evicted, report.purged) == ("done", 1, 0, 0)
        stale.refresh_from_db()
        assert (stale.status, stale.archived_at) == ("archived", now)
        assert found(tenant, "green tea") == []
        archived = fact_events(tenant=tenant, fact_id=stale.pk).get(action="archived")
        assert (archived.actor, archived.before, archived.after) == (
            "system:forget",
            {"status": "active"},
            {"status": "archived", "reason": "unused"},
        )

    def test_facts_used_enough_or_recently_survive(self, tenant, now):
        often, recent, fresh, stale = add(
            tenant, "Deploys with Kubernetes", "Writes Rust at work", "Lives in Lisbon", "Likes jazz"
        )
        age(often, now, days=400, used=3, used_days_ago=200)  # used min_usage_count times: kept however old
        age(recent, now, days=400, used=1, used_days_ago=10)  # used lately
        age(fresh, now, days=89)  # never used, but not long enough
        age(stale, now, days=400, used=2, used_days_ago=91)

        report = forget_policy_apply(tenant=tenant, now=now)

        assert report.archived == 1
        assert [status_of(fact) for fact in (often, recent, fresh, stale)] == ["active", "active", "active", "archived"]
        assert found(tenant, "Kubernetes")[0] == "Deploys with Kubernetes"
        assert "Likes jazz" not in found(tenant, "Likes jazz")

    def test_a_use_counted_by_the_context_path_keeps_a_fact(self, tenant, now):
        [fact] = add(tenant, "Prefers PostgreSQL for analytics")
        age(fact, now - timedelta(days=60), days=100)  # 100 days old 60 days ago
        facts_record_usage(tenant=tenant, fact_ids=[fact.pk])  # used just now

        assert forget_policy_apply(tenant=tenant, now=now + timedelta(days=89)).archived == 0
        assert forget_policy_apply(tenant=tenant, now=now + timedelta(days=91)).archived == 1

    def test_pinned_and_exempt_facts_are_never_forgotten(self, tenant, now):
        forget_policy_set(tenant=tenant, exempt_categories=["profile"], max_facts_per_user=1)
        [pinned] = add(tenant, "Allergic to peanuts", pinned=True)
        [profile] = add(tenant, "Born in 1990", category="profile")
        [other] = add(tenant, "Likes chess", category="preference")
        for fact in (pinned, profile, other):
            age(fact, now, days=1000)

        forget_policy_apply(tenant=tenant, now=now)
        forget_policy_apply(tenant=tenant, now=now + timedelta(days=1000))

        assert [status_of(fact) for fact in (pinned, profile)] == ["active", "active"]
        assert status_of(other) is None  # archived, then purged

    def test_pending_facts_fade_too_and_come_back_pending(self, tenant, now):
        [pending] = add(tenant, "Might move to Canada", status="pending")
        age(pending, now, days=91)

        forget_policy_apply(tenant=tenant, now=now)
        restored = fact_restore(tenant=tenant, fact_id=pending.pk, actor="staff:1")

        assert restored.status == "pending"

    def test_superseded_facts_are_not_archived_but_purged_after_retention(self, tenant, now):
        old = fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin").fact
        new = fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris").fact
        assert Fact.objects.get(pk=old.pk).valid_to is not None
        age(new, now, days=1, used=5, used_days_ago=1)

        report = forget_policy_apply(tenant=tenant, now=now + timedelta(days=29))
        assert (report.archived, report.purged, status_of(old)) == (0, 0, "active")

        report = forget_policy_apply(tenant=tenant, now=now + timedelta(days=31))

        assert (report.purged, report.superseded_purged) == (1, 1)
        assert status_of(old) is None
        assert status_of(new) == "active"
        assert [event.action for event in fact_events(tenant=tenant, fact_id=old.pk)] == [
            "created",
            "superseded",
            "purged",
        ]

    def test_a_policy_without_the_unused_rule_archives_nothing(self, tenant, now):
        forget_policy_set(tenant=tenant, max_unused_days=None)
        [fact] = add(tenant, "Uses Emacs")
        age(fact, now, days=5000)

        assert forget_policy_apply(tenant=tenant, now=now).archived == 0


class TestPerUserCap:
    def test_the_least_valuable_facts_go_first_low_usage_then_least_recently_used(self, tenant, now):
        forget_policy_set(tenant=tenant, max_facts_per_user=3, max_unused_days=None)
        facts = add(tenant, "F one", "F two", "F three", "F four", "F five", "F six")
        age(facts[0], now, days=10, used=9, used_days_ago=5)
        age(facts[1], now, days=10, used=1, used_days_ago=1)  # little used, but lately
        age(facts[2], now, days=10, used=1, used_days_ago=8)  # little used, long ago: second to go
        age(facts[3], now, days=10, used=0)  # never used: first to go
        age(facts[4], now, days=2, used=4, used_days_ago=6)
        [pinned] = add(tenant, "F pinned", pinned=True)
        age(pinned, now, days=10)  # counts towards the cap, never evicted
        [other_user] = add(tenant, "G one", user_id="u2")

        report = forget_policy_apply(tenant=tenant, now=now)

        # 7 live facts, cap 3: the 4 least valuable forgettable ones go.
        assert (report.archived, report.evicted) == (0, 4)
        kept = Fact.objects.filter(tenant=tenant, user_id="u1", status="active").order_by("content")
        assert list(kept.values_list("content", flat=True)) == ["F five", "F one", "F pinned"]
        assert status_of(other_user) == "active"
        archived = FactEvent.objects.filter(tenant=tenant, action="archived")
        assert {event.after["reason"] for event in archived} == {"over_cap"}

    def test_the_cap_counts_what_is_left_after_the_unused_rule(self, tenant, now):
        forget_policy_set(tenant=tenant, max_facts_per_user=2)
        stale, a, b, c = add(tenant, "Stale one", "Kept A", "Kept B", "Evicted C")
        age(stale, now, days=100)
        age(a, now, days=1, used=5, used_days_ago=1)
        age(b, now, days=1, used=4, used_days_ago=1)
        age(c, now, days=1, used=0)

        report = forget_policy_apply(tenant=tenant, now=now)

        assert (report.archived, report.evicted) == (1, 1)
        assert [status_of(fact) for fact in (stale, a, b, c)] == ["archived", "active", "active", "archived"]


class TestPurge:
    def test_archived_facts_past_retention_are_purged_and_the_audit_holds_no_content(self, tenant, now):
        [fact] = add(tenant, "Secret project codename Bluebird")
        [other] = add(tenant, "Project codename Redwood")
        conflict = FactConflict.objects.create(tenant=tenant, user_id="u1", existing_fact=other, new_fact=fact)
        Fact.objects.filter(pk=other.pk).update(superseded_by=fact)
        staff = get_user_model().objects.create_user("reviewer", is_staff=True)
        LogEntry.objects.log_actions(staff.pk, [fact], CHANGE, change_message="Changed content.", single_object=True)
        age(fact, now, days=100)
        age(other, now, days=1, used=9, used_days_ago=1)
        forget_policy_apply(tenant=tenant, now=now)

        early = forget_policy_apply(tenant=tenant, now=now + timedelta(days=29))
        assert (early.purged, status_of(fact)) == (0, "archived")
        report = forget_policy_apply(tenant=tenant, now=now + timedelta(days=30, seconds=1))

        assert (report.purged, report.superseded_purged) == (1, 0)
        assert status_of(fact) is None
        events = list(fact_events(tenant=tenant, fact_id=fact.pk))
        assert [event.action for event in events] == ["created", "archived", "purged"]
        assert all(event.before is None and event.after is None for event in events)
        assert not FactConflict.objects.filter(pk=conflict.pk).exists()
        assert Fact.objects.get(pk=other.pk).superseded_by_id is None
        log = LogEntry.objects.get(content_type=ContentType.objects.get_for_model(Fact), object_id=str(fact.pk))
        assert "Bluebird" not in log.object_repr + log.change_message

    def test_deletion_listeners_on_facts_still_hear_of_purged_facts(self, tenant, now):
        heard = []

        def listener(sender, instance, **kwargs):
            heard.append(instance.pk)

        [fact] = add(tenant, "Purged while someone listens")
        age(fact, now, days=100)
        forget_policy_apply(tenant=tenant, now=now)
        signals.post_delete.connect(listener, sender=Fact)
        deletion._fact_relations_sql.cache_clear()
        try:
            assert forget_policy_apply(tenant=tenant, now=now + timedelta(days=31)).purged == 1
        finally:
            signals.post_delete.disconnect(listener, sender=Fact)
            deletion._fact_relations_sql.cache_clear()

        assert heard == [fact.pk]
        assert status_of(fact) is None

    def test_facts_archived_by_hand_count_retention_from_their_last_change(self, tenant, now):
        [fact] = add(tenant, "Archived in the admin")
        Fact.objects.filter(pk=fact.pk).update(status="archived", updated_at=now - timedelta(days=31))

        assert forget_policy_apply(tenant=tenant, now=now).purged == 1


class TestRestore:
    def test_an_archived_fact_is_restored_before_purge_and_the_next_sweep_keeps_it(self, tenant, now):
        [fact] = add(tenant, "Prefers window seats")
        age(fact, now, days=100)
        forget_policy_apply(tenant=tenant, now=now)
        assert found(tenant, "window seats") == []

        restored = fact_restore(tenant=tenant, fact_id=fact.pk, actor="staff:3")

        assert (restored.status, restored.archived_at) == ("active", None)
        assert found(tenant, "window seats") == ["Prefers window seats"]
        restore_event = fact_events(tenant=tenant, fact_id=fact.pk).get(action="restored")
        assert (restore_event.actor, restore_event.before["status"], restore_event.after["status"]) == (
            "staff:3",
            "archived",
            "active",
        )
        assert forget_policy_apply(tenant=tenant, now=now + timedelta(days=31)).archived == 0
        assert status_of(fact) == "active"

    def test_a_purged_fact_cannot_be_restored(self, tenant, now):
        [fact] = add(tenant, "Prefers aisle seats")
        age(fact, now, days=100)
        forget_policy_apply(tenant=tenant, now=now)
        forget_policy_apply(tenant=tenant, now=now + timedelta(days=31))

        with pytest.raises(ApplicationError) as error:
            fact_restore(tenant=tenant, fact_id=fact.pk, actor="staff:3")
        assert error.value.status_code == 404

    def test_only_archived_facts_can_be_restored(self, tenant):
        [fact] = add(tenant, "Prefers trains")

        with pytest.raises(ApplicationError) as error:
            fact_restore(tenant=tenant, fact_id=fact.pk, actor="staff:3")
        assert error.value.status_code == 409

    def test_another_tenants_fact_is_not_found(self, tenant, other_tenant_and_key, now):
        [foreign] = add(other_tenant_and_key[0], "Globex secret")
        age(foreign, now, days=100)
        forget_policy_apply(tenant=other_tenant_and_key[0], now=now)

        with pytest.raises(ApplicationError) as error:
            fact_restore(tenant=tenant, fact_id=foreign.pk, actor="staff:3")
        assert error.value.status_code == 404
        assert status_of(foreign) == "archived"


class TestRuns:
    @pytest.fixture
    def mixed(self, tenant, now):
        """Something for every stage: unused, over the cap, archived and superseded past retention."""
        forget_policy_set(tenant=tenant, max_facts_per_user=2)
        facts = add(tenant, "Unused A", "Unused B", "Cap A", "Cap B", "Cap C", "Old archived", "Old superseded")
        for fact in facts[:2]:
            age(fact, now, days=200)
        for fact in facts[2:5]:
            age(fact, now, days=1, used=1, used_days_ago=1)
        Fact.objects.filter(pk=facts[5].pk).update(status="archived", archived_at=now - timedelta(days=40))
        superseded = {"valid_from": now - timedelta(days=60), "valid_to": now - timedelta(days=45)}
        Fact.objects.filter(pk=facts[6].pk).update(**superseded)
        return facts

    def test_a_dry_run_changes_nothing_and_reports_what_the_run_then_does(self, tenant, now, mixed):
        before = fact_state(tenant)

        dry = forget_policy_apply(tenant=tenant, now=now, dry_run=True)

        assert fact_state(tenant) == before
        assert (dry.archived, dry.evicted, dry.purged, dry.superseded_purged) == (2, 1, 2, 1)
        real = forget_policy_apply(tenant=tenant, now=now)
        assert (real.archived, real.evicted, real.purged, real.superseded_purged) == (2, 1, 2, 1)
        assert fact_state(tenant) != before

    def test_runs_are_idempotent(self, tenant, now, mixed):
        forget_policy_apply(tenant=tenant, now=now)
        events = FactEvent.objects.count()

        again = forget_policy_apply(tenant=tenant, now=now)

        assert (again.archived, again.evicted, again.purged) == (0, 0, 0)
        assert FactEvent.objects.count() == events

    def test_every_run_is_recorded_with_its_counts_timings_and_policy(self, tenant, now, mixed):
        forget_policy_apply(tenant=tenant, now=now, dry_run=True)
        report = forget_policy_apply(tenant=tenant, now=now)

        dry, real = ForgetRun.objects.filter(tenant=tenant).order_by("pk")
        assert (dry.dry_run, real.dry_run, real.pk) == (True, False, report.run_id)
        assert (real.status, real.as_of, real.archived, real.evicted, real.purged) == ("done", now, 2, 1, 2)
        assert set(real.timings) == {"archive", "evict", "purge"}
        assert real.policy["max_facts_per_user"] == 2
        assert real.duration_ms == report.duration_ms

    def test_small_batches_process_everything_once(self, tenant, now, settings):
        settings.FORGET_BATCH_SIZE = 2
        facts = add(tenant, *[f"Batch fact {n}" for n in range(7)])
        for fact in facts:
            age(fact, now, days=100)

        assert forget_policy_apply(tenant=tenant, now=now).archived == 7
        assert FactEvent.objects.filter(action="archived").count() == 7
        assert forget_policy_apply(tenant=tenant, now=now + timedelta(days=31)).purged == 7
        assert not Fact.objects.exists()

    def test_other_tenants_are_untouched(self, tenant, other_tenant_and_key, now):
        other = other_tenant_and_key[0]
        forget_policy_set(tenant=tenant, max_unused_days=10)
        [mine] = add(tenant, "Acme stale fact")
        [theirs] = add(other, "Globex stale fact")
        age(mine, now, days=50)
        age(theirs, now, days=50)  # stale for acme's policy, not for globex's default of 90 days

        forget_policy_apply(tenant=tenant, now=now)
        forget_policy_apply(tenant=tenant, now=now + timedelta(days=365))

        assert status_of(mine) is None
        assert status_of(theirs) == "active"
        assert not ForgetRun.objects.filter(tenant=other).exists()
        assert forget_policy_get(tenant=other).pk is None

    def test_a_disabled_policy_does_nothing_but_can_be_previewed(self, tenant, now):
        forget_policy_set(tenant=tenant, enabled=False)
        [fact] = add(tenant, "Stale but the policy is off")
        age(fact, now, days=100)

        report = forget_policy_apply(tenant=tenant, now=now)
        preview = forget_policy_apply(tenant=tenant, now=now, dry_run=True)

        assert (report.status, report.archived, report.run_id) == ("disabled", 0, None)
        assert status_of(fact) == "active"
        assert (preview.status, preview.archived) == ("done", 1)
        assert list(ForgetRun.objects.values_list("dry_run", flat=True)) == [True]

    def test_a_failed_run_is_recorded_and_raised_with_its_progress(self, tenant, now, monkeypatch):
        [fact] = add(tenant, "Archived before the failure")
        age(fact, now, days=100)

        def broken(*args, **kwargs):
            raise RuntimeError("disk full")

        monkeypatch.setattr(forgetting_services, "_purge", broken)
        with pytest.raises(RuntimeError):
            forget_policy_apply(tenant=tenant, now=now)

        run = ForgetRun.objects.get(tenant=tenant)
        assert (run.status, run.archived, run.error) == ("failed", 1, "RuntimeError: disk full")
        assert status_of(fact) == "archived"  # the finished batches stay done; a re-run carries on


class TestPolicy:
    def test_a_tenant_without_a_policy_follows_the_settings(self, tenant, settings):
        settings.FORGET_MAX_UNUSED_DAYS = 0
        settings.FORGET_EXEMPT_CATEGORIES = ["profile", "decision", "profile"]

        policy = forget_policy_get(tenant=tenant)

        assert policy.pk is None
        assert (policy.max_unused_days, policy.min_usage_count, policy.max_facts_per_user) == (None, 3, 1000)
        assert (policy.archive_retention_days, policy.exempt_categories) == (30, ["decision", "profile"])

    def test_setting_some_fields_keeps_the_defaults_of_the_others_and_reset_drops_it(self, tenant):
        policy = forget_policy_set(tenant=tenant, max_unused_days=30, exempt_categories=["profile", "profile"])

        assert (policy.max_unused_days, policy.min_usage_count, policy.exempt_categories) == (30, 3, ["profile"])
        assert forget_policy_set(tenant=tenant, min_usage_count=1).max_unused_days == 30
        assert ForgetPolicy.objects.count() == 1
        assert forget_policy_reset(tenant=tenant).pk is None
        assert not ForgetPolicy.objects.exists()

    @pytest.mark.parametrize(
        ("changes", "field"),
        [
            ({"max_unused_days": 0}, "max_unused_days"),
            ({"max_unused_days": 40000}, "max_unused_days"),
            ({"max_facts_per_user": 0}, "max_facts_per_user"),
            ({"archive_retention_days": 40000}, "archive_retention_days"),
            ({"exempt_categories": ["gossip"]}, "exempt_categories"),
            ({"exempt_categories": "profile"}, "exempt_categories"),
            ({"tenant_id": 7}, "tenant_id"),
        ],
    )
    def test_bad_values_are_refused_naming_the_field(self, tenant, changes, field):
        with pytest.raises(ValidationError) as error:
            forget_policy_set(tenant=tenant, **changes)

        assert field in error.value.message_dict
        assert not ForgetPolicy.objects.exists()
