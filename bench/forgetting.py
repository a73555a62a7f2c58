"""The forgetting sweep at scale: time per stage over a large store, and search latency for other users meanwhile.

    .venv/bin/python bench/forgetting.py [--facts 1000000] [--stale 100000] [--users 1000] [--batch 10000]

Loads --facts facts (random 384-d vectors, one "created" event each) for --users users straight in SQL; --stale
of them, spread over the first fifth of the users, are unused for 200 days, and a few users are over the
per-user cap. Then, in a separate process (as the django-q worker would), sweep one archives and evicts, and
sweep two, 31 days later, purges what was archived; meanwhile this process keeps searching the memory of users
the sweep does not touch and compares the latency with the idle figures. Prints figures, asserts nothing. Works
in a throwaway tenant of the current database (run `manage.py migrate` first) and deletes it afterwards.
"""

import argparse
import multiprocessing
import os
import statistics
import time
import uuid
from datetime import timedelta

os.environ.setdefault("EMBEDDING_PROVIDER", "hash")  # before Django starts, here and in the sweep process

import _django  # noqa: F401, E402
import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from ai.services import active_embedding_model  # noqa: E402
from facts.models import Fact  # noqa: E402
from facts.selectors import facts_search  # noqa: E402
from forgetting.services import forget_policy_apply, forget_policy_set  # noqa: E402
from tenancy.models import Tenant  # noqa: E402
from tenancy.services import tenant_create  # noqa: E402

CAP = 1000
OVER_CAP_USERS = 20  # users with CAP + 250 facts: 250 each to evict
VECTOR_POOL = 1000

# One row per fact, straight from generate_series. Fact n belongs to user n % users; the first `stale_per_user`
# facts of each of the first `stale_users` users were written 200 days ago and never used; the others were
# written 10 days ago, and most of them used since.
_LOAD_FACTS = """
INSERT INTO facts_fact (
    tenant_id, user_id, agent_id, category, content, embedding, embedding_model, confidence, usage_count,
    last_used_at, status, source, valid_from, pinned, metadata, search_text, created_at, updated_at
)
SELECT %(tenant)s, 'bench-user-' || u, '', 'other', t, v.embedding, %(model)s, 1.0,
       CASE WHEN stale THEN 0 ELSE n %% 10 END,
       CASE WHEN stale OR n %% 10 = 0 THEN NULL ELSE %(now)s - interval '5 days' END,
       'active', 'import', w, false, '{}', t, w, w
FROM (
    SELECT n, n %% %(users)s AS u,
           (n %% %(users)s < %(stale_users)s AND n / %(users)s < %(stale_per_user)s) AS stale,
           'bench fact ' || n || ' about topic ' || (n %% 97) || ' and project ' || (n %% 13) AS t
    FROM generate_series(%(first)s, %(last)s) AS n
) AS f
JOIN bench_vectors v ON v.i = f.n %% %(pool)s
CROSS JOIN LATERAL (
    SELECT CASE WHEN f.stale THEN %(now)s - interval '200 days' ELSE %(now)s - interval '10 days' END AS w
) AS written
"""

_LOAD_OVER_CAP = """
INSERT INTO facts_fact (
    tenant_id, user_id, agent_id, category, content, embedding, embedding_model, confidence, usage_count,
    status, source, valid_from, pinned, metadata, search_text, created_at, updated_at
)
SELECT %(tenant)s, u, '', 'other', 'extra fact ' || k, v.embedding, %(model)s, 1.0, 0,
       'active', 'import', %(now)s, false, '{}', 'extra fact ' || k, %(now)s - interval '1 day',
       %(now)s - interval '1 day'
FROM unnest(%(over)s::text[]) AS u CROSS JOIN generate_series(1, 250) AS k
JOIN bench_vectors v ON v.i = k
"""


def load(tenant, *, facts: int, stale: int, users: int, now) -> None:
    stale_users = max(1, users // 5)
    stale_per_user = -(-stale // stale_users)
    params = {
        "tenant": tenant.pk,
        "model": active_embedding_model(),
        "now": now,
        "users": users,
        "stale_users": stale_users,
        "stale_per_user": stale_per_user,
        "pool": VECTOR_POOL,
    }
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE bench_vectors AS SELECT i, "
            "(SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) WHERE i >= 0)::vector(384) AS embedding "
            "FROM generate_series(0, %s) AS i",
            [VECTOR_POOL - 1],
        )
        for first in range(0, facts, 200_000):
            cursor.execute(_LOAD_FACTS, {**params, "first": first, "last": min(facts, first + 200_000) - 1})
        # Over-cap users: users stale_users.. get 250 more recent, never-used facts each.
        over = [f"bench-user-{u}" for u in range(stale_users, min(users, stale_users + OVER_CAP_USERS))]
        cursor.execute(_LOAD_OVER_CAP, {**params, "over": over})
        cursor.execute(
            "INSERT INTO facts_factevent (tenant_id, fact_id, user_id, action, actor, before, after, created_at) "
            "SELECT tenant_id, id, user_id, 'created', 'bench', NULL, "
            "jsonb_build_object('content', content, 'status', status), created_at "
            "FROM facts_fact WHERE tenant_id = %s",
            [tenant.pk],
        )
        cursor.execute("DROP TABLE bench_vectors")
        cursor.execute("SELECT count(*) FROM facts_fact WHERE tenant_id = %s", [tenant.pk])
        total = cursor.fetchone()[0]
    loaded = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) facts_fact")
        cursor.execute("VACUUM (ANALYZE) facts_factevent")
    vacuumed = time.perf_counter() - started - loaded
    print(
        f"loaded {total:,} facts for {users:,} users ({stale:,} stale over {stale_users} users, "
        f"{len(over)} users over a cap of {CAP}) in {loaded:.0f} s, vacuumed in {vacuumed:.0f} s"
    )


def sweep_in_child(tenant_id: int, now_iso: str, batch: int, ready, done, results) -> None:
    """The sweep, in its own process and database connection, as a django-q worker runs it."""
    from datetime import datetime

    tenant = Tenant.objects.get(pk=tenant_id)
    ready.set()  # started up: the measured window begins
    report = forget_policy_apply(tenant=tenant, now=datetime.fromisoformat(now_iso), batch_size=batch)
    results.put(
        {
            "status": report.status,
            "archived": report.archived,
            "evicted": report.evicted,
            "purged": report.purged,
            "timings": report.timings,
            "duration_ms": report.duration_ms,
        }
    )
    done.set()


class Searcher:
    """Per-user hybrid search (the agent's read path) for users the sweep does not touch."""

    def __init__(self, tenant, users: list[str]):
        self.tenant, self.users = tenant, users
        self.rng = np.random.default_rng(7)
        rows = Fact.objects.filter(tenant=tenant, user_id=users[0]).values_list("embedding", flat=True)[:50]
        self.vectors = [np.asarray(vector, dtype=np.float32) for vector in rows]

    def once(self) -> float:
        user = self.users[int(self.rng.integers(len(self.users)))]
        vector = self.vectors[int(self.rng.integers(len(self.vectors)))]
        topic = int(self.rng.integers(97))
        started = time.perf_counter()
        facts_search(tenant=self.tenant, user_id=user, query=f"topic {topic}", vector=vector, limit=10)
        return (time.perf_counter() - started) * 1000

    def idle(self, count: int) -> list[float]:
        return [self.once() for _ in range(count)]

    def during(self, done, process) -> list[float]:
        timings = []
        while not done.is_set() and process.is_alive():
            timings.append(self.once())
        return timings


def percentiles(timings: list[float]) -> str:
    ordered = sorted(timings)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"p50 {statistics.median(ordered):6.2f} ms  p95 {p95:6.2f} ms  ({len(ordered)} searches)"


def run_sweep(label: str, tenant, now, batch: int, searcher: Searcher, idle_searches: int) -> dict:
    idle = searcher.idle(idle_searches)  # the baseline right before, under the same background load
    context = multiprocessing.get_context("spawn")
    results, ready, done = context.Queue(), context.Event(), context.Event()
    process = context.Process(target=sweep_in_child, args=(tenant.pk, now.isoformat(), batch, ready, done, results))
    process.start()
    if not ready.wait(timeout=300):
        raise RuntimeError("the sweep process did not start")
    started = time.perf_counter()
    during = searcher.during(done, process)
    elapsed = time.perf_counter() - started
    report = results.get(timeout=60)
    process.join()
    stages = "  ".join(f"{stage} {seconds:.2f} s" for stage, seconds in report["timings"].items())
    print(
        f"{label}: {report['status']}, archived {report['archived']:,}, evicted {report['evicted']:,}, "
        f"purged {report['purged']:,} in {report['duration_ms'] / 1000:.2f} s (window {elapsed:.1f} s)"
    )
    print(f"    per stage: {stages}")
    idle_p95 = sorted(idle)[int(len(idle) * 0.95)]
    during_p95 = sorted(during)[min(len(during) - 1, int(len(during) * 0.95))] if during else float("nan")
    print(f"    search idle before     {percentiles(idle)}")
    print(f"    search while sweeping  {percentiles(during) if during else 'no search finished'}")
    print(f"    p95 during / idle = {during_p95 / idle_p95:.2f}x")
    return report


def cleanup(tenant) -> None:
    """Delete the bench tenant in SQL: the ORM's cascade would load every fact into memory."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for sql in [
            "DELETE FROM facts_factconflict WHERE tenant_id = %s",
            "DELETE FROM facts_factevent WHERE tenant_id = %s",
            "DELETE FROM facts_fact WHERE tenant_id = %s",
            "DELETE FROM forgetting_forgetrun WHERE tenant_id = %s",
            "DELETE FROM forgetting_forgetpolicy WHERE tenant_id = %s",
        ]:
            cursor.execute(sql, [tenant.pk])
    tenant.delete()
    print(f"deleted the bench tenant in {time.perf_counter() - started:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--stale", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=10_000, help="rows per transaction")
    parser.add_argument("--idle-searches", type=int, default=300, help="searches before each sweep, for the baseline")
    parser.add_argument("--throttle", type=float, help="FORGET_THROTTLE for the sweeps (default: the setting)")
    args = parser.parse_args()
    if args.throttle is not None:
        os.environ["FORGET_THROTTLE"] = str(args.throttle)  # read by the sweep processes' settings
        settings.FORGET_THROTTLE = args.throttle
    if args.stale > args.facts // 5:
        parser.error("--stale must be at most a fifth of --facts")

    tenant, _ = tenant_create(name=f"bench-forget-{uuid.uuid4().hex[:8]}")
    try:
        now = timezone.now()
        forget_policy_set(
            tenant=tenant,
            max_unused_days=90,
            min_usage_count=3,
            max_facts_per_user=CAP,
            archive_retention_days=30,
        )
        load(tenant, facts=args.facts, stale=args.stale, users=args.users, now=now)
        searcher = Searcher(tenant, [f"bench-user-{u}" for u in range(args.users // 2, args.users)])
        searcher.idle(50)  # warm-up
        print(f"FORGET_THROTTLE={settings.FORGET_THROTTLE}, FORGET_BATCH_SIZE={args.batch}")

        started = time.perf_counter()
        dry = forget_policy_apply(tenant=tenant, now=now, dry_run=True)
        print(
            f"dry run: would archive {dry.archived:,}, evict {dry.evicted:,}, purge {dry.purged:,} "
            f"in {time.perf_counter() - started:.2f} s"
        )
        run_sweep("sweep 1 (archive + evict)", tenant, now, args.batch, searcher, args.idle_searches)
        run_sweep(
            "sweep 2 (purge, 31 days later)", tenant, now + timedelta(days=31), args.batch, searcher, args.idle_searches
        )
        again = forget_policy_apply(tenant=tenant, now=now + timedelta(days=31), batch_size=args.batch)
        print(f"sweep 3 (nothing left to do): {again.duration_ms / 1000:.2f} s")
    finally:
        cleanup(tenant)


if __name__ == "__main__":
    main()
