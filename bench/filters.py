"""Filtered search: a 10,000-fact user's search with a filter that keeps 1 % of the facts, and with one that keeps
none, against the same search unfiltered (the query's vector given: the store's side, without the embedding).

    .venv/bin/python bench/filters.py [--facts 10000] [--others 0] [--queries 200]

Prints p50 and p95 per variant, the variants interleaved query by query (this machine's speed drifts); the metadata
variants run again without the metadata index (bitmap scans off for the statement: a GIN index is read by them
alone), to show what it gives. Asserts nothing. Works in a throwaway tenant of the current database (the embedded
one by default; run `manage.py migrate` first) and deletes it afterwards. --others adds that many facts of 100 other
users of the tenant to the table.
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

from ai.embedders import normalise_rows
from ai.services import active_embedding_model
from core.db import copy_insert
from facts.models import Fact
from facts.selectors import fact_filters_parse, facts_search
from facts.services.bulk import IMPORT_FIELDS
from tenancy.services import tenant_create

TOPICS = ["PostgreSQL", "Kubernetes", "dark mode", "Berlin", "tea", "Rust", "Vim", "Friday deploys", "JSONB", "CI"]
BUCKETS = 100  # facts per metadata bucket: 1 %

VARIANTS = {
    "unfiltered": None,
    "metadata, keeps 1 %": {"metadata.bucket": 7},
    "metadata OR, keeps 1 %": {"OR": [{"metadata.bucket": 7}, {"metadata.bucket": 1000}]},
    "created_at, keeps 1 %": "dates",  # the newest 1 % (filled in once the facts exist)
    "metadata, keeps none": {"metadata.bucket": 1000},
}
WITHOUT_INDEX = ("metadata, keeps 1 %", "metadata, keeps none")


def fill(tenant, user_id: str, count: int, seed: int) -> list[Fact]:
    """Setup, not measured: the facts straight through COPY, with random vectors of the active model."""
    rng = np.random.default_rng(seed)
    now = timezone.now()
    model = active_embedding_model()
    facts = [
        Fact(
            tenant=tenant,
            user_id=user_id if isinstance(user_id, str) else user_id(n),
            content=f"fact {n}: prefers {TOPICS[n % 10]} for task {n // 10}",
            search_text=f"fact {n}: prefers {TOPICS[n % 10]} for task {n // 10}",
            embedding=vector,
            embedding_model=model,
            metadata={"bucket": n % BUCKETS, "team": ["ops", "dev"][n % 2]},
            valid_from=now,
            created_at=now - (count - n) * timezone.timedelta(seconds=1),
            updated_at=now,
        )
        for n, vector in enumerate(normalise_rows(rng.normal(size=(count, 384)).astype(np.float32)))
    ]
    for start in range(0, count, 10_000):
        with transaction.atomic():
            copy_insert(Fact, facts[start : start + 10_000], IMPORT_FIELDS)
    return facts


def label(name: str, index: bool) -> str:
    return name if index else f"{name}, no index"


def percentile(timings: list[float], share: float) -> float:
    return sorted(timings)[min(len(timings) - 1, int(len(timings) * share))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--others", type=int, default=0)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    with override_settings(EMBEDDING_PROVIDER="hash"):
        tenant, _ = tenant_create(name=f"bench-{uuid.uuid4().hex[:8]}")
        try:
            facts = fill(tenant, "user", args.facts, seed=1)
            if args.others:
                fill(tenant, lambda n: f"other-{n % 100}", args.others, seed=2)
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE facts_fact")
                cursor.execute("ANALYZE facts_factsearchentry")
            newest = sorted(fact.created_at for fact in facts)[-args.facts // BUCKETS]
            filters = {
                name: None if raw is None else fact_filters_parse(
                    {"created_at": {"gte": newest.isoformat()}} if raw == "dates" else raw
                )
                for name, raw in VARIANTS.items()
            }  # fmt: skip
            rng = np.random.default_rng(3)
            queries = [
                (f"which {TOPICS[n % 10]} setup for task {n}?", vector)
                for n, vector in enumerate(normalise_rows(rng.normal(size=(args.queries, 384)).astype(np.float32)))
            ]
            runs = [(name, node, True) for name, node in filters.items()]
            runs += [(name, filters[name], False) for name in WITHOUT_INDEX]
            timings: dict[str, list[float]] = {label(name, index): [] for name, _, index in runs}
            found: dict[str, int] = dict.fromkeys(timings, 0)
            for _ in range(2):  # the first round warms the caches
                for values in timings.values():
                    values.clear()
                for text, vector in queries:
                    for name, node, index in runs:
                        with transaction.atomic():
                            if not index:
                                with connection.cursor() as cursor:
                                    cursor.execute("SET LOCAL enable_bitmapscan = off")
                            started = time.perf_counter()
                            hits = facts_search(tenant=tenant, user_id="user", query=text, vector=vector, filters=node)
                            elapsed = (time.perf_counter() - started) * 1000
                        timings[label(name, index)].append(elapsed)
                        found[label(name, index)] = max(found[label(name, index)], len(hits))
            print(f"facts_search, one user of {args.facts:,} facts (+{args.others:,} of other users), "
                  f"{args.queries} queries, vector given")  # fmt: skip
            for name, values in timings.items():
                print(
                    f"  {name:<38} p50 {statistics.median(values):6.2f} ms   p95 {percentile(values, 0.95):6.2f} ms"
                    f"   (hits up to {found[name]})"
                )
        finally:
            tenant.delete()


if __name__ == "__main__":
    main()
