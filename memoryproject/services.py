"""Writes of the operations side: the worker heartbeat."""

from django.conf import settings
from django.utils import timezone

from .models import WorkerHeartbeat


def worker_heartbeat_record(*, cluster: str | None = None) -> WorkerHeartbeat:
    """Record that a worker of `cluster` (this project's Q_CLUSTER name) is alive now: one row per cluster."""
    heartbeat, _ = WorkerHeartbeat.objects.update_or_create(
        cluster=cluster or settings.Q_CLUSTER["name"], defaults={"beat_at": timezone.now()}
    )
    return heartbeat
