"""setup_schedules, the forget command and the sweep task."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from django_q.models import Schedule

from forgetting import tasks
from forgetting.models import ForgetRun
from forgetting.services import forget_policy_set
from tests.factories import make_tenant

from .conftest import add, age, status_of

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


class TestSetupSchedules:
    def test_running_it_twice_leaves_one_daily_sweep(self, settings):
        settings.FORGET_SWEEP_TIME = "03:30"

        first = run("setup_schedules")
        second = run("setup_schedules")

        [schedule] = Schedule.objects.filter(name="forget-sweep")
        assert (schedule.func, schedule.schedule_type, schedule.repeats) == ("forgetting.tasks.forget_sweep", "D", -1)
        assert schedule.next_run > timezone.now()
        assert schedule.next_run - timezone.now() <= timedelta(days=1)
        assert schedule.next_run.astimezone(UTC).strftime("%H:%M") == "03:30"
        assert "Created schedule 'forget-sweep'" in first
        assert "Updated schedule 'forget-sweep'" in second

    def test_a_missed_run_is_kept_and_a_new_time_is_taken(self, settings):
        settings.FORGET_SWEEP_TIME = "03:00"
        run("setup_schedules")
        missed = datetime.combine(timezone.now().date() - timedelta(days=1), datetime.min.time(), UTC)
        missed = missed.replace(hour=3)
        Schedule.objects.filter(name="forget-sweep").update(next_run=missed)

        run("setup_schedules")
        assert Schedule.objects.get(name="forget-sweep").next_run == missed  # the cluster still runs it

        settings.FORGET_SWEEP_TIME = "04:15"
        run("setup_schedules")
        assert Schedule.objects.get(name="forget-sweep").next_run.astimezone(UTC).strftime("%H:%M") == "04:15"

    def test_duplicates_made_by_hand_are_folded_into_one(self):
        for _ in range(2):
            Schedule.objects.create(name="forget-sweep", func="facts.tasks.old_name", schedule_type=Schedule.HOURLY)

        run("setup_schedules")

        [schedule] = Schedule.objects.filter(name="forget-sweep")
        assert (schedule.func, schedule.schedule_type) == ("forgetting.tasks.forget_sweep", "D")

    def test_a_bad_time_setting_is_an_error_naming_it(self, settings):
        settings.FORGET_SWEEP_TIME = "3 am"

        with pytest.raises(CommandError, match="HH:MM"):
            run("setup_schedules")
        assert not Schedule.objects.exists()


class TestForgetCommand:
    @pytest.fixture
    def stale(self, tenant):
        facts = add(tenant, "Stale one", "Stale two")
        for fact in facts:
            age(fact, timezone.now(), days=100)
        return facts

    def test_a_dry_run_prints_what_would_go_and_changes_nothing(self, tenant, stale):
        output = run("forget", "--dry-run")

        assert "Dry run" in output
        header, row = output.splitlines()[1:3]
        assert header.split()[:5] == ["tenant", "status", "archived", "evicted", "purged"]
        assert row.split()[:5] == ["acme", "done", "2", "0", "0"]
        assert {status_of(fact) for fact in stale} == {"active"}
        assert ForgetRun.objects.get().dry_run is True

    def test_a_run_of_one_tenant_prints_what_went(self, tenant, stale):
        other, _ = make_tenant("globex")
        [theirs] = add(other, "Globex stale")
        age(theirs, timezone.now(), days=100)

        output = run("forget", "--tenant", "acme")

        assert output.splitlines()[1].split()[:3] == ["acme", "done", "2"]
        assert {status_of(fact) for fact in stale} == {"archived"}
        assert status_of(theirs) == "active"

    def test_every_tenant_is_listed_with_a_total(self, tenant, stale):
        make_tenant("globex")

        lines = run("forget").splitlines()

        assert [line.split()[0] for line in lines] == ["tenant", "acme", "globex", "total"]
        assert lines[-1].split()[1] == "2"

    def test_an_unknown_tenant_is_an_error(self, tenant):
        with pytest.raises(CommandError, match="No tenant named 'nobody'"):
            run("forget", "--tenant", "nobody")


class TestSweepTask:
    def test_the_sweep_applies_every_active_tenants_policy(self, tenant, now):
        other, _ = make_tenant("globex")
        inactive, _ = make_tenant("dormant")
        inactive.is_active = False
        inactive.save()
        forget_policy_set(tenant=other, enabled=False)
        facts = [add(scope, f"{scope.name} stale")[0] for scope in (tenant, other, inactive)]
        for fact in facts:
            age(fact, timezone.now(), days=100)

        queued = tasks.forget_sweep()  # test settings run django-q tasks synchronously

        assert queued == 2
        assert [status_of(fact) for fact in facts] == ["archived", "active", "active"]
        assert list(ForgetRun.objects.values_list("tenant__name", "status")) == [("acme", "done")]

    def test_a_tenant_deleted_before_its_task_runs_is_skipped(self):
        assert tasks.forget_tenant(987654) is None
