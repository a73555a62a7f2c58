"""Reads of the operations side: is this process ready to serve, and how long are the queues?"""

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import OrmQ

from ai.embedders import embedder_readiness
from ai.services import CHAT, EMBEDDINGS, provider_report
from core.db import database_status
from facts.models import Fact, FactConflict

from .models import WorkerHeartbeat

OK = "ok"


@dataclass(frozen=True)
class Readiness:
    checks: dict[str, str] = field(default_factory=dict)  # name -> "ok" or why not
    # The AI providers as this process saw them: failing ones degrade the service (keyword-only search, facts
    # stored awaiting their vectors) without making it unready.
    providers: dict[str, dict] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return all(value == OK for value in self.checks.values())

    @property
    def degraded(self) -> bool:
        return any(report["status"] != OK for report in self.providers.values())

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
    checks["queue"] = _broker_check()
    return Readiness(checks=checks, providers=providers_check())


def providers_check() -> dict[str, dict]:
    """The embedding provider's (and the chat model's, when one is configured) recorded outcomes in this process:
    ok, or failing with the last error and since when (ai.services.provider_report). No call is made."""
    providers = {EMBEDDINGS: provider_report(EMBEDDINGS)}
    if settings.CHAT_PROVIDER != "none":
        providers[CHAT] = provider_report(CHAT)
    return providers


def facts_awaiting_embedding() -> dict:
    """Across tenants, how many facts wait for their vector and since when: what any process can see of an
    embedding outage (the worker's sweep or a web process's writes), through the partial index of those facts."""
    awaiting = Fact.objects.exclude(embedding_pending=Fact.EmbeddingPending.NO)
    oldest = awaiting.order_by("created_at").values_list("created_at", flat=True).first()
    return {"count": awaiting.count(), "oldest": oldest.isoformat() if oldest else None}


def _broker_check() -> str:
    """Can tasks be queued? The ORM broker is the database (checked above); Redis must answer a PING."""
    if Conf.ORM:
        return OK
    try:
        get_broker().ping()
    except Exception as exc:  # noqa: BLE001 - whatever redis-py raises, the queue cannot take tasks
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"the task queue (REDIS_URL) does not answer: {cause}"
    return OK


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


@dataclass(frozen=True)
class Backlog:
    """Numbers across every tenant, for the metrics scrape: no tenant's text, only counts by tenant id."""

    queued_tasks: int
    pending_facts: dict[int, int]  # tenant id -> facts pending review (tenants without any left out)
    open_conflicts: dict[int, int]  # tenant id -> open conflicts


def backlog_counts() -> Backlog:
    """Three small queries: django-q's queue (rows waiting or running), facts pending review and open conflicts."""

    def by_tenant(queryset) -> dict[int, int]:
        rows = queryset.values("tenant_id").annotate(count=Count("id")).order_by("tenant_id")
        return {row["tenant_id"]: row["count"] for row in rows}

    return Backlog(
        queued_tasks=OrmQ.objects.using(Conf.ORM).count(),
        pending_facts=by_tenant(Fact.objects.filter(status=Fact.Status.PENDING)),
        open_conflicts=by_tenant(FactConflict.objects.filter(status=FactConflict.Status.OPEN)),
    )
