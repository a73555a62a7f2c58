"""Large users in a large table: does a user with 10,000 facts search as fast in a table that also holds 1,000,000
facts of 1,000 other users as alone, and a user with 100 facts as fast as in an empty table?

    .venv/bin/python bench/large_users.py --data ../shared/data/locomo/locomo_dev.json \
        [--others 1000] [--per-other 1000] [--rounds 3] [--queries 150] [--variants default,exact,graph]

Two embedded databases of their own, kept between runs (delete the folders to start again): var/bench-alone holds
the two bench users only; var/bench-large holds the same two users and the other users' facts. The bench users'
facts are LoCoMo turns through the product's bulk import (the 10k user's wrap around the turns with a suffix, as
bench/report.py's do; the small user's are the first 100), loaded first, so each user's rows lie together in the
table. The other users' facts are the same turns with their vectors moved by noise (cosine ~0.86 to the turn's
own: people talk of similar things), COPYed in batches with the search indexes built after the load. Queries are
LoCoMo questions, embedded beforehand: the figures are the store's side, facts_search with its vector given.

Each measurement runs in a child process against one database (both servers kept up meanwhile), warmed first;
the databases alternate for --rounds, each variant in turn (search.nearest's paths: `sort`, the nearest entries
always sorted exactly; `graph`, always walked through the HNSW graph; `shortlist`, always shortlisted by their
signs; `default`, the rule as configured). Prints p50 / p95 per round and
the large / alone ratios of the medians. Asserts nothing.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATABASES = {"alone": ROOT / "var" / "bench-alone", "large": ROOT / "var" / "bench-large"}
TENANT = "bench-large-users"
USERS = {"big": 10_000, "small": 100}
VARIANTS = {  # the settings a child runs with (search.nearest's paths)
    "default": {},
    "sort": {"FACTS_SEARCH_EXACT_MAX_ENTRIES": str(10**12)},
    "graph": {"FACTS_SEARCH_EXACT_MAX_ENTRIES": "0", "SEARCH_GRAPH_MIN_SHARE_ROWS": "0"},
    "shortlist": {"FACTS_SEARCH_EXACT_MAX_ENTRIES": "0", "SEARCH_GRAPH_MIN_SHARE_ROWS": "1e18"},
}
BATCH = 20_000
NOISE_PER_DIMENSION = 0.03
WARM_QUERIES = 40


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo's JSON (locomo_dev.json)")
    parser.add_argument("--others", type=int, default=1000)
    parser.add_argument("--per-other", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--variants", default="default,sort,graph,shortlist")
    parser.add_argument("--child", choices=["setup", "grow", "measure"], help=argparse.SUPPRESS)
    parser.add_argument("--user", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return

    from memoryproject.embedded_postgres.server import ensure_running

    for name, folder in DATABASES.items():
        ensure_running(folder)  # kept up by this process, so each child finds its pages warm
        _run_child(folder, ["--child", "setup"], args)
        if name == "large":
            _run_child(folder, ["--child", "grow"], args)
    variants = args.variants.split(",")
    results: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for round_number in range(1, args.rounds + 1):
        for variant in variants:
            for name, folder in DATABASES.items():
                for user in USERS:
                    output = _run_child(folder, ["--child", "measure", "--user", user], args, VARIANTS[variant])
                    p50, p95 = json.loads(output.strip().splitlines()[-1])
                    results.setdefault((variant, name, user), []).append((p50, p95))
                    print(
                        f"round {round_number} {variant:>7} {name:>5} {user:>5}: p50 {p50:6.2f} ms, p95 {p95:6.2f} ms",
                        flush=True,
                    )
    print("\nmedians of the rounds, and large / alone:")
    for variant in variants:
        for user in USERS:
            alone = [statistics.median(f[i] for f in results[(variant, "alone", user)]) for i in (0, 1)]
            large = [statistics.median(f[i] for f in results[(variant, "large", user)]) for i in (0, 1)]
            print(
                f"{variant:>7} {user:>5}: alone p50 {alone[0]:6.2f} / p95 {alone[1]:6.2f} ms; "
                f"large p50 {large[0]:6.2f} / p95 {large[1]:6.2f} ms; "
                f"ratio p50 {large[0] / alone[0]:.2f}x, p95 {large[1] / alone[1]:.2f}x"
            )


def _run_child(folder: Path, child_args: list[str], args, settings: dict | None = None) -> str:
    command = [sys.executable, __file__, "--data", str(args.data), "--queries", str(args.queries)]
    command += ["--others", str(args.others), "--per-other", str(args.per_other), *child_args]
    env = os.environ | {"EMBEDDED_PG_DATA_DIR": str(folder), "DJANGO_ENV": "development"} | (settings or {})
    env.pop("DATABASE_URL", None)
    completed = subprocess.run(command, env=env, check=True, stdout=subprocess.PIPE, text=True)  # noqa: S603
    return completed.stdout


def _child(args) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import _django  # noqa: F401
    from django.core.management import call_command

    if args.child == "setup":
        call_command("migrate", verbosity=0)
        _setup(args)
    elif args.child == "grow":
        _grow(args)
    else:
        print(json.dumps(_measure(args)))


def _turns(args) -> list[str]:
    import locomo_recall

    samples = json.loads(args.data.read_text())
    return [turn["content"] for sample in samples for turn in locomo_recall.load_turns(sample)]


def _questions(args) -> list[str]:
    samples = json.loads(args.data.read_text())
    return [qa["question"] for sample in samples for qa in sample["qa"]][: args.queries]


def _tenant():
    from tenancy.models import Tenant
    from tenancy.services import tenant_create

    tenant = Tenant.objects.filter(name=TENANT).first()
    return tenant or tenant_create(name=TENANT)[0]


def _setup(args) -> None:
    from facts.models import Fact
    from facts.services import facts_import

    tenant = _tenant()
    pool = _turns(args)
    for user, count in USERS.items():
        if Fact.objects.filter(tenant=tenant, user_id=user).exists():
            continue
        started = time.perf_counter()
        texts = [pool[n % len(pool)] + (f" (#{n // len(pool)})" if n >= len(pool) else "") for n in range(count)]
        for start in range(0, count, 1000):
            rows = [{"user_id": user, "content": text} for text in texts[start : start + 1000]]
            facts_import(tenant=tenant, facts=rows, actor="bench")
        print(f"{user}: {count:,} facts in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


def _grow(args) -> None:
    import numpy as np
    from _facts import copy_facts, imported_fact
    from django.db import connection
    from django.utils import timezone

    from ai.services import active_embedding_model, embed_texts
    from facts.models import Fact

    tenant = _tenant()
    target = args.others * args.per_other
    others = Fact.objects.filter(tenant=tenant).exclude(user_id__in=list(USERS))
    if others.count() >= target:
        return
    if others.exists():
        sys.exit(f"{DATABASES['large']} holds part of a load: delete the folder and run again")
    pool = _turns(args)
    started = time.perf_counter()
    vectors = np.asarray(embed_texts(pool, tenant=None, user_id=None), dtype=np.float32)
    print(f"embedded {len(pool):,} turns in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    with connection.cursor() as cursor:  # built once after the load: maintained row by row it takes hours
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'facts_factsearchentry'"
            " AND indexname IN ('factsearch_embedding_hnsw', 'factsearch_keywords')"
        )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f"DROP INDEX {name}")
    model, now, rng = active_embedding_model(), timezone.now(), np.random.default_rng(7)
    started = time.perf_counter()
    for start in range(0, target, BATCH):
        numbers = range(start, min(start + BATCH, target))
        picked = rng.integers(0, len(pool), len(numbers))
        moved = vectors[picked] + rng.normal(0, NOISE_PER_DIMENSION, (len(numbers), vectors.shape[1]))
        moved /= np.linalg.norm(moved, axis=1, keepdims=True)
        copy_facts(
            [
                imported_fact(
                    tenant=tenant,
                    user_id=f"other-{n % args.others}",
                    content=f"{pool[index]} (#{n})",
                    vector=vector,
                    model=model,
                    now=now,
                )
                for n, index, vector in zip(numbers, picked, moved.astype(np.float32), strict=True)
            ]
        )
        done = numbers.stop
        print(f"  {done:,} facts, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '4GB'")
        for _, definition in indexes:  # the partitioned table's: made again for every partition, not ON ONLY it
            cursor.execute(definition.replace(" ON ONLY ", " ON "))
        cursor.execute("VACUUM ANALYZE facts_fact")
        cursor.execute("VACUUM ANALYZE facts_factsearchentry")
        cursor.execute("VACUUM ANALYZE facts_factsearchcount")
        cursor.execute("VACUUM ANALYZE facts_factsearchterm")
    print(f"indexes built and vacuumed in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


def _measure(args) -> tuple[float, float]:
    from django.db import connection

    from ai.services import embed_query
    from facts.selectors import facts_search

    tenant = _tenant()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE facts_factsearchentry")  # the steady state autovacuum keeps
    queries = [(query, embed_query(query, tenant=tenant, user_id=args.user)) for query in _questions(args)]
    for query, vector in queries[:WARM_QUERIES]:
        facts_search(tenant=tenant, user_id=args.user, query=query, vector=vector)
    timings = []
    for query, vector in queries:
        started = time.perf_counter()
        facts_search(tenant=tenant, user_id=args.user, query=query, vector=vector)
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95)]


if __name__ == "__main__":
    main()
