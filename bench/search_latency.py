"""facts_search latency for one user with 1k, 10k and 100k facts (query embedding excluded), and context_build
end to end with the local embedder. Prints figures; asserts nothing.

    .venv/bin/python bench/search_latency.py [--sizes 1000,10000,100000] [--queries 200] [--explain] \
        [--paths rule,sort,shortlist,graph] [--rounds 1]

--paths times each of search.nearest's ways to the nearest facts at every size, alternating for --rounds: `rule`,
as configured; `sort`, `shortlist` and `graph`, that path for any user too large to sort (2,000 facts by default).
Works in a throwaway tenant of the current database and deletes it afterwards.
"""

import argparse
import random
import statistics
import time
import uuid

import _django  # noqa: F401
from django.db import connection
from django.test import override_settings

from ai.services import embed_query
from facts.selectors import facts_search, facts_search_statement, graph_settings
from facts.services import facts_import
from retrieval.context import context_build
from tenancy.services import tenant_create

WORDS = (
    "postgres kubernetes deploy friday lisbon berlin tea coffee rust python vim emacs review budget invoice "
    "billing migration schema index cache latency incident runbook oncall release sprint roadmap design "
    "customer contract renewal pricing discount meeting standup retro hiring onboarding laptop vpn ticket"
).split()


def sentence(rng: random.Random) -> str:
    return f"Prefers {' '.join(rng.sample(WORDS, 6))} (note {rng.randint(1, 99999)})"


def grow(tenant, user_id: str, count: int, rng: random.Random) -> None:
    items = [{"user_id": user_id, "content": sentence(rng)} for _ in range(count)]
    for start in range(0, count, 1000):
        facts_import(tenant=tenant, facts=items[start : start + 1000], actor="bench")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE facts_fact")  # the steady state autovacuum keeps: hint bits, visibility map


PATHS = {  # the settings of each way to the nearest facts (search.nearest)
    "rule": {},
    "sort": {"FACTS_SEARCH_EXACT_MAX_ENTRIES": 10**12},
    "shortlist": {"SEARCH_GRAPH_MIN_SHARE_ROWS": 1e18},
    "graph": {"SEARCH_GRAPH_MIN_SHARE_ROWS": 0},
}


def percentiles(timings: list[float]) -> str:
    timings = sorted(timings)
    return f"p50 {statistics.median(timings):6.2f} ms   p95 {timings[int(len(timings) * 0.95)]:6.2f} ms"


def search_timings(tenant, queries: list[str], vectors: list) -> list[float]:
    timings = []
    for query, vector in zip(queries, vectors, strict=True):
        started = time.perf_counter()
        facts_search(tenant=tenant, user_id="bench-user", query=query, limit=10, vector=vector)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def explain(tenant, query: str, vector) -> None:
    sql, params = facts_search_statement(tenant=tenant, user_id="bench-user", query=query, vector=vector)
    prefix, params = graph_settings(params)  # as facts_search sends it
    with connection.cursor() as cursor:
        cursor.execute(f"{prefix}EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
        cursor.nextset()
        print("\n".join(f"    {line}" for (line,) in cursor.fetchall()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of one search at each size")
    parser.add_argument("--paths", default="rule", help=f"comma-separated, of {', '.join(PATHS)}")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(7)
    tenant, _ = tenant_create(name=f"latency-{uuid.uuid4().hex[:6]}")
    try:
        with override_settings(EMBEDDING_PROVIDER="hash"):
            grow(tenant, "someone-else", 5000, rng)  # other users' rows share the table, as in production
            stored = 0
            for size in (int(value) for value in args.sizes.split(",")):
                grow(tenant, "bench-user", size - stored, rng)
                stored = size
                queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)]
                vectors = [embed_query(query, tenant=tenant, user_id="bench-user") for query in queries]
                for query, vector in zip(queries[:5], vectors[:5], strict=True):  # warm up the connection and caches
                    facts_search(tenant=tenant, user_id="bench-user", query=query, limit=10, vector=vector)
                timings = {path: [] for path in args.paths.split(",")}
                for _ in range(args.rounds):
                    for path, path_timings in timings.items():
                        with override_settings(**PATHS[path]):
                            path_timings += search_timings(tenant, queries, vectors)
                for path, path_timings in timings.items():
                    print(f"facts_search, {size:>7,} facts for the user, {path:>9}:  {percentiles(path_timings)}")
                if args.explain:
                    explain(tenant, queries[0], vectors[0])
        with override_settings(EMBEDDING_PROVIDER="local", EMBEDDING_CACHE=False):
            grow(tenant, "context-user", 1000, rng)
            context_build(tenant=tenant, user_id="context-user", query="warm up the model")
            timings = []
            for _ in range(50):
                started = time.perf_counter()
                context_build(tenant=tenant, user_id="context-user", query=" ".join(rng.sample(WORDS, 4)))
                timings.append((time.perf_counter() - started) * 1000)
            print(f"context_build end to end (local embedder, 1,000 facts):  {percentiles(timings)}")
    finally:
        tenant.delete()


if __name__ == "__main__":
    main()
