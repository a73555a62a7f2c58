"""Two runs of one tenant never overlap: separate connections (threads), committed for real."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.locks import LockNamespace, session_lock
from facts.models import Fact, FactEvent
from forgetting.models import ForgetRun
from forgetting.services import forget_policy_apply
from tests.factories import make_tenant
from tests.threads import held_elsewhere, run_together

from .conftest import add

pytestmark = pytest.mark.django_db(transaction=True)


def stale_facts(tenant, count: int) -> list[int]:
    facts = add(tenant, *[f"Stale fact number {n}" for n in range(count)])
    ids = [fact.pk for fact in facts]
    long_ago = timezone.now() - timedelta(days=365)
    Fact.objects.filter(pk__in=ids).update(created_at=long_ago, updated_at=long_ago)
    return ids


def test_two_concurrent_runs_do_not_double_process(settings):
    settings.FORGET_BATCH_SIZE = 20  # many small transactions: the runs have time to meet
    tenant, _ = make_tenant()
    ids = stale_facts(tenant, 400)

    reports = run_together(2, lambda _: forget_policy_apply(tenant=tenant))

    assert sum(report.archived for report in reports) == 400
    assert sorted(report.status for report in reports) in (["done", "done"], ["done", "skipped"])
    assert set(Fact.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"archived"}
    per_fact = FactEvent.objects.filter(action="archived").values_list("fact_id", flat=True)
    assert sorted(per_fact) == sorted(ids)  # one event per fact: nothing was archived twice


def test_a_run_while_another_holds_the_tenants_lock_is_skipped_and_recorded():
    tenant, _ = make_tenant()
    other, _ = make_tenant()
    ids = stale_facts(tenant, 3)
    stale_facts(other, 2)
    # What a running sweep holds: the tenant's session advisory lock, on its own connection.
    with held_elsewhere(lambda: session_lock(LockNamespace.FORGET_TENANT, tenant.pk, wait=False)):
        skipped = forget_policy_apply(tenant=tenant)
        unrelated = forget_policy_apply(tenant=other)  # another tenant's run is not held up

    assert (skipped.status, skipped.archived) == ("skipped", 0)
    assert set(Fact.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"active"}
    assert ForgetRun.objects.get(pk=skipped.run_id).status == "skipped"
    assert (unrelated.status, unrelated.archived) == ("done", 2)
    assert forget_policy_apply(tenant=tenant).archived == 3  # the lock is free again once the holder ends
