"""The scale run: does one user's search stay as fast when the facts table holds 2,000,000 rows over 2,000 users as
when it holds 100,000? And how much disk does a million facts take?

    .venv/bin/python bench/scale.py [--small 100000] [--large 2000000] [--users 2000] [--queries 200]

One user ("bench-user") has 1,000 facts written through facts_import (real search text and embeddings from the
active embedder); the other users' rows are COPYed with random unit vectors and generated sentences, in batches.
The table is measured at --small rows, then grown to --large and measured again (VACUUM ANALYZE before each, the
steady state autovacuum keeps); query vectors are embedded beforehand, so the figures are the store's side.
Prints search p50/p95 at both sizes, their ratio (the target: within 1.5x), and bytes on disk per million facts
(table, TOAST, indexes). Works in a throwaway tenant, deleted afterwards; needs ~5 GB free for 2M rows.
"""

import argparse
import random
import statistics
import time
import uuid

import _django  # noqa: F401
import numpy as np
from _facts import copy_facts, imported_fact
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from ai.services import active_embedding_model, embed_query
from facts.selectors import facts_search
from facts.services import facts_import
from tenancy.models import Tenant
from tenancy.services import tenant_create

WORDS = (
    "postgres kubernetes deploy friday lisbon berlin tea coffee rust python vim emacs review budget invoice "
    "billing migration schema index cache latency incident runbook oncall release sprint roadmap design "
    "customer contract renewal pricing discount meeting standup retro hiring onboarding laptop vpn ticket"
).split()
BATCH = 20_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=2_000_000)
    parser.add_argument("--users", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(7)
    tenant, _ = tenant_create(name=f"bench-scale-{uuid.uuid4().hex[:8]}")
    try:
        items = [{"user_id": "bench-user", "content": _sentence(rng)} for _ in range(1000)]
        for start in range(0, len(items), 1000):
            facts_import(tenant=tenant, facts=items[start : start + 1000], actor="bench")
        queries = [(query, embed_query(query, tenant=tenant, user_id="bench-user")) for query in _queries(rng, args)]
        rows = 1000
        figures = {}
        for target in (args.small, args.large):
            started = time.perf_counter()
            rows = _grow(tenant, rows, target, args.users, rng)
            print(f"grew the tenant to {rows:,} facts in {time.perf_counter() - started:.0f} s", flush=True)
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE facts_fact")
            figures[target] = _measure(tenant, queries)
            p50, p95 = figures[target]
            print(f"{rows:>9,} facts: bench-user search p50 {p50:6.2f} ms, p95 {p95:6.2f} ms", flush=True)
            _print_disk(tenant)
        (small_p50, small_p95), (large_p50, large_p95) = figures[args.small], figures[args.large]
        print(
            f"ratio {args.large:,} / {args.small:,}: p50 {large_p50 / small_p50:.2f}x, p95 {large_p95 / small_p95:.2f}x"
        )
    finally:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM facts_factevent WHERE tenant_id = %s", [tenant.pk])
            cursor.execute("DELETE FROM facts_fact WHERE tenant_id = %s", [tenant.pk])
            Tenant.objects.filter(pk=tenant.pk).delete()


def _grow(tenant, rows: int, target: int, users: int, rng: random.Random) -> int:
    """COPY other users' facts until the tenant has `target` rows (users other than bench-user, round robin)."""
    model, now, dimensions = active_embedding_model(), timezone.now(), settings.EMBEDDING_DIMENSIONS
    numpy_rng = np.random.default_rng(rng.randint(0, 2**31))
    while rows < target:
        count = min(BATCH, target - rows)
        vectors = numpy_rng.standard_normal((count, dimensions), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        copy_facts(
            [
                imported_fact(
                    tenant=tenant,
                    user_id=f"user-{(rows + index) % (users - 1)}",
                    content=_sentence(rng),
                    vector=vectors[index],
                    model=model,
                    now=now,
                )
                for index in range(count)
            ]
        )
        rows += count
    return rows


def _measure(tenant, queries) -> tuple[float, float]:
    for query, vector in queries[:20]:  # warm the cache as steady traffic would
        facts_search(tenant=tenant, user_id="bench-user", query=query, vector=vector)
    timings = []
    for query, vector in queries:
        started = time.perf_counter()
        facts_search(tenant=tenant, user_id="bench-user", query=query, vector=vector)
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95)]


def _print_disk(tenant) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM facts_fact")
        (total_rows,) = cursor.fetchone()
        cursor.execute(
            "SELECT pg_relation_size('facts_fact'), pg_total_relation_size('facts_fact') - pg_relation_size("
            "'facts_fact') - pg_indexes_size('facts_fact'), pg_indexes_size('facts_fact')"
        )
        heap, toast, indexes = cursor.fetchone()
    per_million = 1_000_000 / max(total_rows, 1) / 2**20
    print(
        f"    disk per million facts ({total_rows:,} rows in the table): heap {heap * per_million:,.0f} MiB, "
        f"TOAST {toast * per_million:,.0f} MiB, indexes {indexes * per_million:,.0f} MiB, "
        f"total {(heap + toast + indexes) * per_million:,.0f} MiB",
        flush=True,
    )


def _sentence(rng: random.Random) -> str:
    return f"Prefers {' '.join(rng.sample(WORDS, 6))} (note {rng.randint(1, 99999)})"


def _queries(rng: random.Random, args) -> list[str]:
    return [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)]


if __name__ == "__main__":
    main()
