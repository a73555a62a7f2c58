"""Reads of the operations side: is this process ready to serve?"""

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from ai.embedders import embedder_readiness
from core.db import database_status

from .models import WorkerHeartbeat

OK = "ok"


@dataclass(frozen=True)
class Readiness:
    checks: dict[str, str] = field(default_factory=dict)  # name -> "ok" or why not

    @property
    def ready(self) -> bool:
        return all(value == OK for value in self.checks.values())

    @property
    def failing(self) -> dict[str, str]:
        return {name: value for name, value in self.checks.items() if value != OK}


def worker_heartbeat_last(*, cluster: str | None = None) -> datetime | None:
    row = WorkerHeartbeat.objects.filter(cluster=cluster or settings.Q_CLUSTER["name"]).first()
    return row.beat_at if row else None


def readiness_check() -> Readiness:
    """Database reachable, pgvector installed, the embedder loaded in this process, a worker heartbeat seen within
    WORKER_HEARTBEAT_MAX_AGE seconds (0 switches that check off). Cheap: two small queries, no model call."""
    db = database_status()
    checks = {"database": OK if db.reachable else f"unreachable: {db.error}"}
    if not db.reachable:
        checks["pgvector"] = checks["worker"] = "unknown: the database is unreachable"
    else:
        checks["pgvector"] = OK if db.pgvector_version else "the vector extension is not installed"
    checks["embedder"] = embedder_readiness() or OK
    if db.reachable:
        checks["worker"] = _worker_check()
    return Readiness(checks=checks)


def _worker_check() -> str:
    max_age = settings.WORKER_HEARTBEAT_MAX_AGE
    if not max_age:
        return OK
    try:
        last = worker_heartbeat_last()
    except DatabaseError as exc:  # e.g. migrations not run yet
        return f"unknown: {str(exc).strip().splitlines()[0]}"
    if last is None:
        return "no worker heartbeat yet: is `manage.py qcluster` running, and `setup_schedules` run?"
    age = (timezone.now() - last).total_seconds()
    if age > max_age:
        return f"the last worker heartbeat is {age:.0f} s old (WORKER_HEARTBEAT_MAX_AGE is {max_age} s)"
    return OK
