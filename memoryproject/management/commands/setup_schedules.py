from datetime import UTC, datetime, time, timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule


def _daily_at(at: str) -> time:
    try:
        hour, minute = (int(part) for part in at.split(":"))
        return time(hour, minute, tzinfo=UTC)
    except ValueError:
        raise CommandError(f"A daily time must be HH:MM (UTC), not {at!r}.") from None


def schedules() -> list[dict]:
    """Every periodic job of the project, by unique name. Add new ones here; `setup_schedules` keeps them in step.

    `at` is the time of day (UTC) of a daily job; a job without one first runs at once.
    """
    return [
        {
            "name": "forget-sweep",
            "func": "forgetting.tasks.forget_sweep",
            "schedule_type": Schedule.DAILY,
            "at": _daily_at(settings.FORGET_SWEEP_TIME),
        },
        {
            # Readiness (GET /api/health/ready) checks that a worker ran it lately. Every minute is django-q's
            # finest interval (its scheduler wakes every 30 s, so a run may come up to 30 s late).
            "name": "worker-heartbeat",
            "func": "memoryproject.tasks.worker_heartbeat",
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "at": None,
        },
        {
            # Episodes whose extraction task was lost (the queue was down when they were posted) are queued again.
            "name": "episodes-requeue",
            "func": "episodes.tasks.episodes_requeue",
            "schedule_type": Schedule.MINUTES,
            "minutes": 5,
            "at": None,
        },
        {
            # KB documents indexing in the worker: retries whose backoff has passed, and runs lost on the way.
            "name": "kb-indexing-requeue",
            "func": "kb.tasks.documents_indexing_requeue",
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "at": None,
        },
        {
            # Facts stored while the embedder failed whose next attempt is due (their queued task was lost, or
            # failed and backs off), embedded in batches and judged.
            "name": "facts-embed-sweep",
            "func": "facts.tasks.facts_embed_sweep",
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "at": None,
        },
    ]


def _next(at: time) -> datetime:
    now = timezone.now()
    candidate = datetime.combine(now.date(), at)
    return candidate if candidate > now else candidate + timedelta(days=1)


class Command(BaseCommand):
    help = "Declare every periodic django-q job (idempotent: run it after every migrate)."

    def handle(self, *args, **options):
        with transaction.atomic():
            for declared in schedules():
                name, at = declared.pop("name"), declared.pop("at")
                existing = Schedule.objects.select_for_update().filter(name=name).order_by("pk")
                first = existing.first()
                if first is not None:  # duplicates made by hand (django_q.tasks.schedule() is not idempotent)
                    existing.exclude(pk=first.pk).delete()
                # An existing schedule keeps its next run (a run missed while the server was down still happens)
                # unless the time of day changed.
                if at is None:
                    keep = first is not None and first.next_run is not None
                else:
                    keep = first is not None and first.next_run and first.next_run.astimezone(UTC).timetz() == at
                defaults = {"repeats": -1, "args": None, "kwargs": None, **declared}
                if not keep:
                    defaults["next_run"] = timezone.now() if at is None else _next(at)
                schedule, created = Schedule.objects.update_or_create(name=name, defaults=defaults)
                self.stdout.write(
                    f"{'Created' if created else 'Updated'} schedule {name!r}: {schedule.func}, "
                    f"{schedule.get_schedule_type_display().lower()}, next run {schedule.next_run:%Y-%m-%d %H:%M} UTC"
                )
