"""Forgetting: what is used survives, what is stale fades.

Stage one archives (status "archived": out of search and context, restorable): facts unused for the policy's
days and used fewer than its count, then each user's least valuable facts over the per-user cap ("evicted").
Stage two purges archived facts past retention, and facts superseded longer than retention ago: rows and
vectors are deleted, the audit keeps each fact's id, action and time, never its content.

Every stage works in batches (FORGET_BATCH_SIZE rows per transaction, primary-key order, rows re-checked under
lock), so a run never holds long locks, can be interrupted and simply run again. A session advisory lock per
tenant keeps two runs of one tenant apart: the second one is skipped, not queued.
"""

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from core.locks import LockNamespace, session_lock
from facts.models import Fact
from facts.services import facts_delete
from tenancy.models import Tenant

from .models import ForgetPolicy, ForgetRun
from .selectors import POLICY_FIELDS, forget_policy_defaults, forget_policy_get

logger = logging.getLogger(__name__)

FORGET_ACTOR = "system:forget"
_LIVE = [Fact.Status.ACTIVE, Fact.Status.PENDING]


@dataclass
class ForgetReport:
    """What one application of a policy did, or (dry run) would do."""

    tenant_id: int
    dry_run: bool
    status: str  # done | skipped (another run held the lock) | disabled (policy off, nothing ran) | failed
    as_of: datetime
    archived: int = 0
    evicted: int = 0
    purged: int = 0  # archived past retention + superseded past retention
    superseded_purged: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    duration_ms: int = 0
    run_id: int | None = None
    error: str = ""


# --- policy -------------------------------------------------------------------------------------


def forget_policy_set(*, tenant: Tenant, **changes) -> ForgetPolicy:
    """Save the tenant's own policy: the given fields change, the others keep their current (or default) value."""
    unknown = set(changes) - set(POLICY_FIELDS)
    if unknown:
        raise ValidationError({name: "Not a forget policy field." for name in sorted(unknown)})
    if "exempt_categories" in changes:
        changes["exempt_categories"] = _clean_categories(changes["exempt_categories"])
    with transaction.atomic():
        policy = ForgetPolicy.objects.select_for_update().filter(tenant=tenant).first()
        if policy is None:
            policy = ForgetPolicy(tenant=tenant, **forget_policy_defaults())
        for name, value in changes.items():
            setattr(policy, name, value)
        policy.full_clean(exclude=["tenant"], validate_unique=False)
        policy.save()
    return policy


def forget_policy_reset(*, tenant: Tenant) -> ForgetPolicy:
    """Drop the tenant's own policy: it follows the FORGET_* settings again."""
    with transaction.atomic():
        ForgetPolicy.objects.filter(tenant=tenant).delete()
    return forget_policy_get(tenant=tenant)


def _clean_categories(categories) -> list[str]:
    if not isinstance(categories, list | tuple) or any(value not in Fact.Category.values for value in categories):
        raise ValidationError(
            {"exempt_categories": f"Must be a list of categories from: {', '.join(Fact.Category.values)}."}
        )
    return sorted(set(categories))


# --- the sweep ----------------------------------------------------------------------------------


def forget_policy_apply(
    *, tenant: Tenant, now: datetime | None = None, dry_run: bool = False, batch_size: int | None = None
) -> ForgetReport:
    """Apply the tenant's forget policy as of `now` and record the run (ForgetRun).

    A dry run changes nothing (but is recorded) and reports the counts a real run at the same moment would;
    it also works while the policy is disabled, to preview it. A real run of a disabled policy does nothing
    and is not recorded. A real run while another one of the same tenant is going is skipped (and recorded).
    """
    now = now or timezone.now()
    batch_size = batch_size or settings.FORGET_BATCH_SIZE
    policy = forget_policy_get(tenant=tenant)
    report = ForgetReport(tenant_id=tenant.pk, dry_run=dry_run, status=ForgetRun.Status.DONE.value, as_of=now)
    if not policy.enabled and not dry_run:
        report.status = "disabled"
        return report
    started_at, started = timezone.now(), time.monotonic()
    rules = _Rules(tenant=tenant, policy=policy, now=now)
    try:
        with _background():
            if dry_run:
                _count(rules, report)
            else:
                # Held across the run's many transactions; a second run of the tenant is skipped, not queued.
                with session_lock(LockNamespace.FORGET_TENANT, tenant.pk, wait=False) as acquired:
                    if acquired:
                        _archive_unused(rules, report, batch_size)
                        _evict_over_cap(rules, report, batch_size)
                        _purge(rules, report, batch_size)
                    else:
                        report.status = ForgetRun.Status.SKIPPED.value
    except Exception as exc:
        report.status, report.error = ForgetRun.Status.FAILED.value, f"{type(exc).__name__}: {exc}"
        _record(report, policy, started_at, started)
        raise
    _record(report, policy, started_at, started)
    logger.info(
        "forget %s of tenant %s: %s, archived %s, evicted %s, purged %s in %s ms",
        "dry run" if dry_run else "run",
        tenant.pk,
        report.status,
        report.archived,
        report.evicted,
        report.purged,
        report.duration_ms,
    )
    return report


def _record(report: ForgetReport, policy: ForgetPolicy, started_at: datetime, started: float) -> None:
    report.duration_ms = round((time.monotonic() - started) * 1000)
    try:
        with transaction.atomic():
            run = ForgetRun.objects.create(
                tenant_id=report.tenant_id,
                dry_run=report.dry_run,
                status=report.status,
                as_of=report.as_of,
                archived=report.archived,
                evicted=report.evicted,
                purged=report.purged,
                superseded_purged=report.superseded_purged,
                timings=report.timings,
                policy={name: getattr(policy, name) for name in POLICY_FIELDS},
                error=report.error[:2000],
                started_at=started_at,
                duration_ms=report.duration_ms,
            )
    except DatabaseError:
        if report.status != ForgetRun.Status.FAILED:
            raise
        logger.exception("could not record the failed forget run of tenant %s", report.tenant_id)
        return
    report.run_id = run.pk


@contextmanager
def _background() -> Iterator[None]:
    """Run as a background job: one core at most (no parallel workers), so searches keep the others."""
    with connection.cursor() as cursor:
        cursor.execute("SET max_parallel_workers_per_gather = 0")
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute("RESET max_parallel_workers_per_gather")
        except DatabaseError:  # a broken connection takes the setting with it
            pass


def _rest(started: float) -> None:
    """Between batches, rest FORGET_THROTTLE times as long as the batch took: the sweep yields to the read path."""
    if settings.FORGET_THROTTLE > 0:
        time.sleep(min(5.0, (time.monotonic() - started) * settings.FORGET_THROTTLE))


class _Rules:
    """The policy as SQL: which facts each stage takes, with the parameters to pass along."""

    def __init__(self, *, tenant: Tenant, policy: ForgetPolicy, now: datetime):
        self.tenant = tenant
        self.now = now
        self.policy = policy
        self.params = {
            "tenant": tenant.pk,
            "live": list(_LIVE),
            "exempt": list(policy.exempt_categories or []),
            "min_usage": policy.min_usage_count,
            "unused_before": now - timedelta(days=policy.max_unused_days or 0),
            "cap": policy.max_facts_per_user or 0,
            "purge_before": now - timedelta(days=policy.archive_retention_days),
        }
        forgettable = "NOT pinned AND NOT (category = ANY(%(exempt)s))"
        # Unused: neither used nor written (created, merged, edited, reviewed, restored) since the cutoff, and
        # used fewer than min_usage times. Only current live facts; pinned and exempt ones never.
        self.unused = (
            f"status = ANY(%(live)s) AND valid_to IS NULL AND {forgettable} "
            "AND usage_count < %(min_usage)s AND greatest(last_used_at, updated_at) < %(unused_before)s"
            if policy.max_unused_days
            else "FALSE"
        )
        # Archived facts count their retention from archived_at (updated_at for rows archived by other means).
        self.purgeable = (
            f"{forgettable} AND ("
            "(status = 'archived' AND coalesce(archived_at, updated_at) < %(purge_before)s)"
            " OR valid_to < %(purge_before)s)"
        )


# Per user over the cap: the excess, taken from the forgettable live facts with the fewest uses, then the least
# recently used or written. Pinned and exempt facts count towards the cap but are never evicted. Facts that the
# unused rule takes anyway are left out, so a dry run (which archives nothing) counts exactly what a run does.
# One pass counts every user; only the users over the cap are then read again, through their index.
_OVER_CAP_SQL = """
WITH over AS (
    SELECT user_id, count(*) - %(cap)s AS excess
    FROM facts_fact
    WHERE tenant_id = %(tenant)s AND status = ANY(%(live)s) AND valid_to IS NULL AND NOT ({unused})
    GROUP BY user_id HAVING count(*) > %(cap)s
)
SELECT evicted.id
FROM over
CROSS JOIN LATERAL (
    SELECT id FROM facts_fact
    WHERE tenant_id = %(tenant)s AND user_id = over.user_id AND status = ANY(%(live)s) AND valid_to IS NULL
      AND NOT ({unused}) AND NOT pinned AND NOT (category = ANY(%(exempt)s))
    ORDER BY usage_count, greatest(last_used_at, updated_at), id
    LIMIT over.excess
) AS evicted
ORDER BY evicted.id
"""

# Archive one batch in one statement: lock the chosen rows (primary-key order, as every writer does), re-check
# them (a fact used a moment ago stays), flip them, and log one event per fact.
_ARCHIVE_SQL = """
WITH batch AS (
    SELECT id, user_id, status FROM facts_fact
    WHERE id = ANY(%(ids)s) AND tenant_id = %(tenant)s AND {recheck}
    ORDER BY id
    FOR UPDATE
),
archived AS (
    UPDATE facts_fact AS f SET status = 'archived', archived_at = %(now)s, updated_at = %(now)s
    FROM batch WHERE f.id = batch.id
    RETURNING f.id, f.user_id, batch.status AS was
),
logged AS (
    INSERT INTO facts_factevent (tenant_id, fact_id, user_id, action, actor, before, after, created_at)
    SELECT %(tenant)s, id, user_id, 'archived', %(actor)s, jsonb_build_object('status', was),
           jsonb_build_object('status', 'archived', 'reason', %(reason)s::text), clock_timestamp()
    FROM archived
    RETURNING 1
)
SELECT count(*) FROM logged
"""


def _count(rules: _Rules, report: ForgetReport) -> None:
    with connection.cursor() as cursor:
        started = time.monotonic()
        cursor.execute(f"SELECT count(*) FROM facts_fact WHERE tenant_id = %(tenant)s AND {rules.unused}", rules.params)
        report.archived = cursor.fetchone()[0]
        report.timings["archive"] = _since(started)

        started = time.monotonic()
        if rules.policy.max_facts_per_user:
            cursor.execute(
                f"SELECT count(*) FROM ({_OVER_CAP_SQL.format(unused=rules.unused)}) AS evicted", rules.params
            )
            report.evicted = cursor.fetchone()[0]
        report.timings["evict"] = _since(started)

        started = time.monotonic()
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE valid_to < %(purge_before)s) FROM facts_fact "
            f"WHERE tenant_id = %(tenant)s AND {rules.purgeable}",
            rules.params,
        )
        report.purged, report.superseded_purged = cursor.fetchone()
        report.timings["purge"] = _since(started)


def _ids(sql: str, params: dict) -> list[int]:
    """The ids a stage will take, found in one pass (batches then cost the same however large the table is)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _archive_unused(rules: _Rules, report: ForgetReport, batch_size: int) -> None:
    started = time.monotonic()
    ids = _ids(f"SELECT id FROM facts_fact WHERE tenant_id = %(tenant)s AND {rules.unused} ORDER BY id", rules.params)
    _archive(rules, ids, recheck=rules.unused, reason="unused", batch_size=batch_size, report=report, count="archived")
    report.timings["archive"] = _since(started)


def _evict_over_cap(rules: _Rules, report: ForgetReport, batch_size: int) -> None:
    started = time.monotonic()
    if rules.policy.max_facts_per_user:
        ids = _ids(_OVER_CAP_SQL.format(unused=rules.unused), rules.params)
        recheck = "status = ANY(%(live)s) AND valid_to IS NULL AND NOT pinned"
        _archive(rules, ids, recheck=recheck, reason="over_cap", batch_size=batch_size, report=report, count="evicted")
    report.timings["evict"] = _since(started)


def _archive(
    rules: _Rules, ids: list[int], *, recheck: str, reason: str, batch_size: int, report: ForgetReport, count: str
) -> None:
    """Archive `ids` (those still matching `recheck`), one transaction per batch, counting into report.<count>."""
    sql = _ARCHIVE_SQL.format(recheck=recheck)
    for start in range(0, len(ids), batch_size):
        batch_started = time.monotonic()
        params = {**rules.params, "ids": ids[start : start + batch_size], "now": rules.now}
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, {**params, "actor": FORGET_ACTOR, "reason": reason})
            archived = cursor.fetchone()[0]
        setattr(report, count, getattr(report, count) + archived)
        _rest(batch_started)


def _purge(rules: _Rules, report: ForgetReport, batch_size: int) -> None:
    started = time.monotonic()
    ids = _ids(
        f"SELECT id FROM facts_fact WHERE tenant_id = %(tenant)s AND {rules.purgeable} ORDER BY id", rules.params
    )
    for start in range(0, len(ids), batch_size):
        batch_started = time.monotonic()
        with transaction.atomic():
            rows = _purge_batch(rules, ids[start : start + batch_size])
        report.purged += len(rows)
        report.superseded_purged += sum(1 for _, superseded in rows if superseded)
        _rest(batch_started)
    report.timings["purge"] = _since(started)


def _purge_batch(rules: _Rules, ids: list[int]) -> list[tuple[int, bool]]:
    """Delete those of `ids` still purgeable (locked and re-checked: a fact restored a moment ago stays) through the
    facts' one deletion path, which keeps only id, action and time of each. Returns (id, superseded) per fact."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, valid_to < %(purge_before)s FROM facts_fact "
            f"WHERE id = ANY(%(ids)s) AND tenant_id = %(tenant)s AND {rules.purgeable} ORDER BY id FOR UPDATE",
            {**rules.params, "ids": ids},
        )
        rows = cursor.fetchall()
    facts_delete(tenant=rules.tenant, fact_ids=[row[0] for row in rows], actor=FORGET_ACTOR, purge=True)
    return rows


def _since(started: float) -> float:
    return round(time.monotonic() - started, 4)
