"""Fact store throughput: fact_remember, bulk import, and usage counting on a 100k-fact table.

    .venv/bin/python bench/facts.py [--usage-table 100000] [--skip-local]

Prints figures, asserts nothing. Works in a throwaway tenant of the current database (the embedded one by
default; run `manage.py migrate` first) and deletes it afterwards.
"""

import argparse
import statistics
import time
import uuid

import _django  # noqa: F401
import numpy as np
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from ai.embedders import normalise_rows
from core.db import copy_insert
from facts.models import Fact
from facts.services import fact_remember, facts_import, facts_record_usage
from facts.services.bulk import IMPORT_FIELDS
from tenancy.services import tenant_create

TOPICS = ["PostgreSQL", "Kubernetes", "dark mode", "Berlin", "tea", "Rust", "Vim", "Friday deploys", "JSONB", "CI"]


def sentences(count: int, tag: str) -> list[str]:
    return [f"{tag} fact {n}: prefers {TOPICS[n % 10]} for task {n // 10}" for n in range(count)]


def bench_remember(tenant, label: str, count: int) -> None:
    texts = sentences(count, label)
    started = time.perf_counter()
    for n, text in enumerate(texts):
        fact_remember(tenant=tenant, user_id=f"{label}-user-{n % 10}", content=text)
    elapsed = time.perf_counter() - started
    print(f"fact_remember ({label:<5})        {count / elapsed:8.0f} facts/s   (p-avg {elapsed / count * 1000:.1f} ms)")


def bench_import(tenant, key: str, total: int) -> None:
    texts = sentences(total, "import")
    payloads = [
        [{"user_id": f"import-user-{n % 50}", "content": text} for n, text in enumerate(texts[i : i + 1000], start=i)]
        for i in range(0, total, 1000)
    ]
    started = time.perf_counter()
    for batch in payloads:
        facts_import(tenant=tenant, facts=batch, actor="bench")
    service = time.perf_counter() - started
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    started = time.perf_counter()
    for batch in payloads:
        response = client.post("/api/v1/facts/import", {"facts": batch}, format="json")
        assert response.status_code == 201, response.content
    api = time.perf_counter() - started
    print(f"bulk import (hash, service)      {total / service:8.0f} rows/s")
    print(f"bulk import (hash, HTTP API)     {total / api:8.0f} rows/s   (batches of 1000)")


def fill_usage_table(tenant, rows: int) -> list[int]:
    """Fast setup (not what is measured): random vectors straight through COPY."""
    rng = np.random.default_rng(1)
    now = timezone.now()
    facts = [
        Fact(
            tenant=tenant,
            user_id=f"load-user-{n % 1000}",
            content=f"load fact {n}",
            embedding=vector,
            embedding_model="hash-v2",
            search_text=f"load fact {n}",
            valid_from=now,
            created_at=now,
            updated_at=now,
        )
        for n, vector in enumerate(normalise_rows(rng.normal(size=(rows, 384))))
    ]
    with transaction.atomic():
        copy_insert(Fact, facts, IMPORT_FIELDS)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE facts_fact")
    return [fact.pk for fact in facts]


def bench_usage(tenant, ids: list[int], runs: int = 300) -> None:
    rng = np.random.default_rng(2)
    pool = np.asarray(ids)
    # Drawn ahead: a draw takes ~5 ms, and the database backend would idle (and cool down) between the calls.
    draws = [[int(i) for i in rng.choice(pool, 10, replace=False)] for _ in range(runs)]
    timings = []
    for chosen in draws:
        started = time.perf_counter()
        facts_record_usage(tenant=tenant, fact_ids=chosen)
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    with connection.cursor() as cursor:
        cursor.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'facts_fact'")
        updated, hot = cursor.fetchone()
    print(
        f"facts_record_usage (10 ids, {len(ids):,} facts)  p50 {statistics.median(timings):.2f} ms  "
        f"p95 {timings[int(runs * 0.95)]:.2f} ms   HOT updates {hot}/{updated}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--remember", type=int, default=300)
    parser.add_argument("--import-rows", type=int, default=10000)
    parser.add_argument("--usage-table", type=int, default=100000)
    parser.add_argument("--skip-local", action="store_true")
    args = parser.parse_args()

    tenant, issued = tenant_create(name=f"bench-{uuid.uuid4().hex[:8]}")
    try:
        with override_settings(EMBEDDING_PROVIDER="hash"):
            bench_remember(tenant, "hash", args.remember)
            bench_import(tenant, issued.key, args.import_rows)
        if not args.skip_local:
            with override_settings(EMBEDDING_PROVIDER="local", EMBEDDING_CACHE=False):
                fact_remember(tenant=tenant, user_id="warm", content="load the model first")
                bench_remember(tenant, "local", min(args.remember, 200))
        ids = fill_usage_table(tenant, args.usage_table)
        bench_usage(tenant, ids)
    finally:
        tenant.delete()


if __name__ == "__main__":
    main()
