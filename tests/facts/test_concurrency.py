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
