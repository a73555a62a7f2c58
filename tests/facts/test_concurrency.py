"""Concurrent writers on separate database connections (threads), committed for real."""

import pytest

from facts.models import Fact
from facts.services import fact_remember, facts_record_usage
from tests.factories import make_tenant
from tests.threads import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_concurrent_saves_of_the_same_fact_leave_one_fact():
    tenant, _ = make_tenant()

    results = run_together(
        2, lambda _: fact_remember(tenant=tenant, user_id="u1", content="Deploys with Kubernetes").outcome
    )

    assert sorted(results) == ["created", "merged"]
    assert Fact.objects.filter(tenant=tenant).count() == 1


def test_usage_counting_is_exact_under_concurrency():
    tenant, _ = make_tenant()
    facts = [fact_remember(tenant=tenant, user_id="u1", content=f"Fact {n} is {n * 13}").fact for n in range(10)]
    ids = [fact.pk for fact in facts]

    run_together(4, lambda _: [facts_record_usage(tenant=tenant, fact_ids=ids) for _ in range(25)])

    assert set(Fact.objects.filter(pk__in=ids).values_list("usage_count", flat=True)) == {100}


def test_a_use_counted_by_itself_commits_without_waiting_for_the_flush_and_the_setting_ends_with_it():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    tenant, _ = make_tenant()
    fact = fact_remember(tenant=tenant, user_id="u1", content="Deploys with Kubernetes").fact
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = on")  # the session's, whatever the server's default

    with CaptureQueriesContext(connection) as queries:
        assert facts_record_usage(tenant=tenant, fact_ids=[fact.pk]) == 1

    assert queries[-1]["sql"].startswith("SET LOCAL synchronous_commit = off;")
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
    # Committed: another connection counts it.
    assert run_together(1, lambda _: Fact.objects.get(pk=fact.pk).usage_count) == [1]


def test_without_a_chat_model_the_judgement_is_made_under_the_memory_lock_and_not_repeated(settings):
    """The rules judge takes milliseconds: the neighbours are read once, after the lock, so no writer can change
    them between the judgement and the write (with a chat model they are read before and again under the lock:
    test_outage's neighbour-changed test)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.CHAT_PROVIDER = "none"
    tenant, _ = make_tenant()
    fact_remember(tenant=tenant, user_id="u1", content="Deploys with Kubernetes")

    with CaptureQueriesContext(connection) as queries:
        result = fact_remember(tenant=tenant, user_id="u1", content="Deploys with Kubernetes on weekdays")

    statements = [query["sql"] for query in queries.captured_queries]
    locked = next(n for n, sql in enumerate(statements) if "pg_advisory_xact_lock" in sql)
    neighbours = [n for n, sql in enumerate(statements) if "nearest AS MATERIALIZED" in sql]
    assert result.outcome in ("created", "merged")
    assert len(neighbours) == 1
    assert neighbours[0] > locked


def test_concurrent_saves_judged_under_the_lock_see_each_other():
    """Eight clients saving the same statement at once: each judges after the previous one wrote, so one fact."""
    tenant, _ = make_tenant()

    results = run_together(
        8, lambda _: fact_remember(tenant=tenant, user_id="u1", content="Prefers dark mode in every editor").outcome
    )

    assert sorted(results) == ["created"] + ["merged"] * 7
    assert Fact.objects.filter(tenant=tenant, user_id="u1", valid_to__isnull=True).count() == 1
