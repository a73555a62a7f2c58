"""Knowledge-base throughput and search latency: index a generated Markdown corpus, re-index it unchanged,
then kb_search over 100k chunks, beside LangGraph's PostgresStore holding the same chunks.

    .venv/bin/python bench/kb.py [--corpus-mb 5] [--local-mb 5] [--skip-local] [--chunks 100000]
                                 [--other-chunks 20000] [--queries 200] [--explain] [--no-langgraph]
                                 [--vectors random|hash] [--also SETTING=NUMBER]

Prints figures, asserts nothing. Works in throwaway tenants of the current database (the embedded one by
default; run `manage.py migrate` first) and deletes them afterwards, with the embedding-cache rows it wrote.
The corpus is new on every run (random seed), so the first indexing run starts with a cold embedding cache.
LangGraph runs as bench/report.py runs it (its own virtualenv under var/bench/venvs, its own database
bench_langgraph, recreated), searched with the same query vectors, the two systems alternating by halves.
"""

import argparse
import hashlib
import itertools
import random
import re
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import _django  # noqa: F401
import _report_figures as figures
import numpy as np
import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from ai.embedders import HashEmbedder
from ai.services import active_embedding_model
from core.db import copy_insert, vector_literal
from core.text import STOP_WORDS, search_text
from kb.models import Document, KBChunk
from kb.selectors import kb_search
from kb.services import documents_index_plan, index_plan_build
from tenancy.services import tenant_create

LANGUAGES = ["python", "sql", "yaml", "bash", "go"]
SEARCH_INDEXES = {"kbchunk_embedding_hnsw", "kbchunk_search_vector_gin"}


class Vocabulary:
    """Word frequencies like English text (Zipf): real stop words take the top ranks, then pseudo-words, a few
    common (in ~10% of chunks), a long tail of rare ones. Queries are drawn from the content words alone."""

    def __init__(self, rng: random.Random, size: int = 8000):
        syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["th", "qu", "ch", "st"]
        words: set[str] = set()
        while len(words) < size:
            words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
        content = sorted(words - STOP_WORDS)
        rng.shuffle(content)
        self.words = sorted(STOP_WORDS) + content
        self.content = content
        # Cumulative weights, computed once: random.choices would otherwise redo it on every call.
        self.cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(self.words))))
        self.content_cumulative = list(
            itertools.accumulate(1 / (rank + 1) for rank in range(len(STOP_WORDS), len(self.words)))
        )
        self.rng = rng

    def sample(self, count: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cumulative, k=count)

    def topic(self, count: int) -> str:
        """Words for a heading or title."""
        return " ".join(self.rng.choices(self.content, cum_weights=self.content_cumulative, k=count)).title()

    def query(self, rng: random.Random) -> str:
        return " ".join(rng.choices(self.content, cum_weights=self.content_cumulative, k=rng.randint(2, 6)))

    def sentence(self) -> str:
        words = self.sample(self.rng.randint(6, 18))
        return " ".join(words).capitalize() + "."


def markdown_file(vocab: Vocabulary, rng: random.Random, target_bytes: int) -> str:
    parts = [f"# {vocab.topic(3)}", "", " ".join(vocab.sentence() for _ in range(3)), ""]
    size = sum(len(part) + 1 for part in parts)
    while size < target_bytes:
        level = rng.choice(["##", "##", "###", "####"])
        block = [f"{level} {vocab.topic(rng.randint(1, 4))}", ""]
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.6:
                block += [" ".join(vocab.sentence() for _ in range(rng.randint(2, 7))), ""]
            elif kind < 0.8:
                block += [f"- {vocab.sentence()}" for _ in range(rng.randint(2, 6))] + [""]
            else:
                code = [
                    f"{rng.choice(vocab.content)}_{n} = {rng.choice(vocab.content)}({n})"
                    for n in range(rng.randint(3, 12))
                ]
                block += [f"```{rng.choice(LANGUAGES)}", *code, "```", ""]
        parts += block
        size += sum(len(line) + 1 for line in block)
    return "\n".join(parts)


def write_corpus(root: Path, *, megabytes: float, seed: int) -> int:
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    total, count = 0, 0
    while total < megabytes * 1_000_000:
        directory = root / f"section-{count // 40:02d}"
        directory.mkdir(exist_ok=True)
        text = markdown_file(vocab, rng, rng.randint(4_000, 30_000))
        (directory / f"page-{count:04d}.md").write_text(text)
        total += len(text.encode())
        count += 1
    return total


def index_tree(tenant, root: Path, label: str, *, size_bytes: int) -> float:
    plan = index_plan_build(paths=[root])
    started = time.perf_counter()
    run = documents_index_plan(tenant=tenant, plan=plan)
    elapsed = time.perf_counter() - started
    assert not run.failures, run.failures
    files = len(run.results)
    print(
        f"index ({label:<22}) {files:5d} files {run.chunks:6d} chunks {size_bytes / 1e6:4.1f} MB  "
        f"{elapsed:7.1f} s  {files / elapsed:7.1f} files/s  {run.chunks / elapsed:7.0f} chunks/s  "
        f"(new {run.count('new')}, changed {run.count('changed')}, unchanged {run.count('unchanged')})"
    )
    return elapsed


TERM_TRIGGERS = ("kb_term_frequency_inserted", "kb_term_frequency_updated", "kb_term_frequency_deleted")


def trigger_cost(root: Path, rounds: int = 3) -> None:
    """Indexing the same corpus into a new tenant with and without the term-count triggers, alternating (a
    comparison of the triggers' cost only: the tenant indexed without them is deleted with its wrong counts)."""
    seconds = {True: [], False: []}
    for _ in range(rounds):
        for with_triggers in (True, False):
            scope, _ = tenant_create(name=f"bench-kb-triggers-{uuid.uuid4().hex[:8]}")
            try:
                with connection.cursor() as cursor:
                    for trigger in TERM_TRIGGERS:
                        cursor.execute(
                            f"ALTER TABLE kb_kbchunk {'ENABLE' if with_triggers else 'DISABLE'} TRIGGER {trigger}"
                        )
                started = time.perf_counter()
                assert not documents_index_plan(tenant=scope, plan=index_plan_build(paths=[root])).failures
                seconds[with_triggers].append(time.perf_counter() - started)
            finally:
                with connection.cursor() as cursor:
                    for trigger in TERM_TRIGGERS:
                        cursor.execute(f"ALTER TABLE kb_kbchunk ENABLE TRIGGER {trigger}")
                scope.delete()
    on, off = statistics.median(seconds[True]), statistics.median(seconds[False])
    print(f"index with the term-count triggers {on:.2f} s, without {off:.2f} s (median of {rounds} alternating runs"
          f" each): {on / off - 1:+.1%}")  # fmt: skip


def unit_vectors(texts: list[str], *, kind: str, seed: int) -> np.ndarray:
    """The texts' vectors: random unit vectors ("random", no nearest-neighbour structure, HNSW's hardest case and
    unrelated to the words), or the hash embedder's bag of words ("hash": close when words are shared)."""
    if kind == "hash":
        return HashEmbedder(settings.EMBEDDING_DIMENSIONS).embed(texts).astype(np.float32)
    vectors = np.random.default_rng(seed).normal(size=(len(texts), settings.EMBEDDING_DIMENSIONS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def load_chunks(loads: list[tuple], *, rebuild_indexes: bool, vectors: str) -> None:
    """Fast setup (not what is measured): generated text and its vectors (unit_vectors) by COPY, then ANALYZE.

    Rows go into an HNSW + GIN indexed table at well under 100/s on 2 cores, so by default the two search
    indexes are dropped and rebuilt around the load, in one transaction: the table is locked meanwhile, and a
    failure leaves it as it was.
    """
    started = time.perf_counter()
    with transaction.atomic():
        search_indexes = [index for index in KBChunk._meta.indexes if index.name in SEARCH_INDEXES]
        with connection.schema_editor(atomic=False) as editor:
            if rebuild_indexes:
                for index in search_indexes:
                    editor.remove_index(KBChunk, index)
            for tenant, count, seed in loads:
                _copy_chunks(tenant, count, seed=seed, vectors=vectors)
            copied = time.perf_counter()
            if rebuild_indexes:
                with connection.cursor() as cursor:
                    # Django's foreign keys are checked at commit; CREATE INDEX refuses to run with checks pending.
                    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                    # The HNSW graph of a million 384-d vectors needs ~2.5 GB to be built in memory.
                    memory = "1GB" if sum(count for _, count, _ in loads) <= 200_000 else "4GB"
                    cursor.execute(f"SET LOCAL maintenance_work_mem = '{memory}'")
                for index in search_indexes:
                    editor.add_index(KBChunk, index)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE kb_kbchunk")
        cursor.execute("ANALYZE kb_document")
    total = sum(count for _, count, _ in loads)
    how = "indexes rebuilt after" if rebuild_indexes else "HNSW + GIN maintained"
    print(f"load {total:,} chunks (COPY, {how})  {copied - started:.1f} s copy + {time.perf_counter() - copied:.1f} s "
          f"indexes")  # fmt: skip


def _copy_chunks(tenant, count: int, *, seed: int, vectors: str, per_document: int = 100) -> None:
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    model, now = active_embedding_model(), timezone.now()
    for start in range(0, count, 10_000):
        documents = Document.objects.bulk_create(
            [
                Document(
                    tenant=tenant,
                    doc_id=f"load/{n:06d}.md",
                    title=vocab.topic(3),
                    content_type="markdown",
                    content_hash="0" * 64,
                )  # fmt: skip
                for n in range(start // per_document, (min(count, start + 10_000) - 1) // per_document + 1)
            ]
        )
        chunks = []
        for n in range(start, min(count, start + 10_000)):
            document = documents[n // per_document - start // per_document]
            heading = vocab.topic(2)
            text = f"## {heading}\n\n" + " ".join(vocab.sentence() for _ in range(rng.randint(5, 25)))
            chunk = KBChunk(
                tenant=tenant, document=document, ordinal=n % per_document, text=text,
                heading_path=f"{document.title} > {heading}", line_start=1, line_end=3,
                token_count=len(text) // 4, content_hash=hashlib.sha256(text.encode()).hexdigest(),
                embedding_model=model, created_at=now,
            )  # fmt: skip
            chunk.search_text = search_text(f"{document.title} {chunk.heading_path} {text}")
            chunks.append(chunk)
        embedded = unit_vectors([chunk.embedding_text() for chunk in chunks], kind=vectors, seed=seed + start)
        for chunk, vector in zip(chunks, embedded, strict=True):
            chunk.embedding = vector
        copy_insert(KBChunk, chunks, [
            "tenant", "document", "ordinal", "text", "heading_path", "line_start", "line_end", "token_count",
            "content_hash", "embedding", "embedding_model", "search_text", "created_at",
        ])  # fmt: skip


LANGGRAPH_VECTOR_INDEX = "store_vectors_embedding_idx"


def langgraph_start():
    """LangGraph's PostgresStore in its runner, on a fresh database of its own whose tables store.setup() made."""
    from report import peer_model_path, start_peer

    return start_peer("langgraph", settings.BASE_DIR / "var" / "bench", peer_model_path())


def langgraph_load(url: str, tenants: list) -> None:
    """The same chunks as LangGraph items, copied from kb_kbchunk (setup, not measured): one item per chunk, key its
    id, in the namespace ("kb", tenant id), value {"text": ...}, its vector in store_vectors. As for our table, the
    store's HNSW index is dropped and rebuilt around the load, in one transaction."""
    started = time.perf_counter()
    connection.ensure_connection()
    tenant_ids = ", ".join(str(int(tenant.pk)) for tenant in tenants)
    copies = {
        "store (prefix, key, value, created_at, updated_at)":
            "'kb.' || tenant_id, id::text, jsonb_build_object('text', text), created_at, created_at",
        "store_vectors (prefix, key, field_name, embedding, created_at, updated_at)":
            "'kb.' || tenant_id, id::text, 'text', embedding, created_at, created_at",
    }  # fmt: skip
    with psycopg.connect(url) as target:
        (definition,) = target.execute("SELECT pg_get_indexdef(%s::regclass)", [LANGGRAPH_VECTOR_INDEX]).fetchone()
        target.execute(f"DROP INDEX {LANGGRAPH_VECTOR_INDEX}")
        for table, columns in copies.items():
            query = f"COPY (SELECT {columns} FROM kb_kbchunk WHERE tenant_id IN ({tenant_ids})) TO STDOUT"
            with connection.connection.cursor() as source, source.copy(query) as reading:
                with target.cursor() as cursor, cursor.copy(f"COPY {table} FROM STDIN") as writing:
                    for block in reading:
                        writing.write(block)
        (rows,) = target.execute("SELECT count(*) FROM store_vectors").fetchone()
        copied = time.perf_counter()
        target.execute(f"SET LOCAL maintenance_work_mem = '{'1GB' if rows <= 200_000 else '4GB'}'")
        target.execute(definition)
    with psycopg.connect(url, autocommit=True) as target:
        target.execute("VACUUM ANALYZE")
    print(f"load {rows:,} chunks into LangGraph's store (COPY from kb_kbchunk, its HNSW index rebuilt after)  "
          f"{copied - started:.1f} s copy + {time.perf_counter() - copied:.1f} s index and VACUUM ANALYZE")  # fmt: skip


def _p50_p95(milliseconds: list[float]) -> str:
    return f"p50 {figures.median(milliseconds):.1f} ms  p95 {figures.percentile(milliseconds, 0.95):.1f} ms"


def exact_vector_top(tenant, vector, limit: int = 10) -> dict[str, str]:
    """{id: text} of the tenant's chunks nearest the vector by exact cosine (a scan: `+ 0` keeps the HNSW out)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id::text, text FROM kb_kbchunk WHERE tenant_id = %s ORDER BY (embedding <=> %s::vector) + 0 "
            "LIMIT %s",
            [tenant.pk, vector_literal(vector), limit],
        )
        return dict(cursor.fetchall())


def bench_search(tenant, count: int, *, seed: int, vectors: str, also: dict, langgraph=None) -> None:
    rng = random.Random(seed + 1)
    vocab = Vocabulary(random.Random(seed))  # the loaded chunks' vocabulary
    queries = [vocab.query(rng) for _ in range(count)]
    query_vectors = unit_vectors(queries, kind=vectors, seed=seed + 1)
    namespace = ["kb", str(tenant.pk)]

    def langgraph_search(vector) -> dict:
        return langgraph.run({"op": "vector_search", "namespace": namespace, "vector": vector.tolist(), "limit": 10})

    for query, vector in zip(queries[:10], query_vectors[:10], strict=True):  # warm the caches
        kb_search(tenant=tenant, query=query, vector=vector, limit=10)
        if langgraph:
            langgraph_search(vector)
    # The search as configured, and (interleaved, query by query) with every chunk of every term read and ranked,
    # and with the vector side an exact sort.
    variants = {
        "": {},
        ", every term's chunks read": {"KB_SEARCH_KEYWORD_CHUNKS_READ": 10**9},
        ", exact vector side": {"KB_SEARCH_EXACT_MAX_CHUNKS": 10**9},
    }
    chunks = KBChunk.objects.filter(tenant=tenant).count()
    if chunks > 200_000:
        del variants[", exact vector side"]  # seconds a query
    variants |= {f", {name}={value}": {name: value} for name, value in also.items()}
    timings = {label: [] for label in variants}
    returned, langgraph_ms, langgraph_keys = [], [], []
    # With LangGraph: half the queries on each system, then the other half (A, B, A, B), so that the machine's drift
    # hits both alike; not query by query, where each would evict the other's pages from the shared buffers.
    blocks = 2 if langgraph else 1
    for block in range(blocks):
        part = slice(block * count // blocks, (block + 1) * count // blocks)
        for query, vector in zip(queries[part], query_vectors[part], strict=True):
            for label, changed in variants.items():
                with override_settings(**changed):
                    started = time.perf_counter()
                    hits = kb_search(tenant=tenant, query=query, vector=vector, limit=10)
                    timings[label].append((time.perf_counter() - started) * 1000)
                returned.append(len(hits))
        if langgraph:
            for vector in query_vectors[part]:
                answer = langgraph_search(vector)  # timed inside its runner: the JSON round trip is not counted
                langgraph_ms.append(answer["ms"])
                langgraph_keys.append(answer["keys"])
    for label, measured in timings.items():
        halves = (
            f"; by half {_p50_p95(measured[: count // 2])}, {_p50_p95(measured[count // 2 :])}" if blocks > 1 else ""
        )
        print(
            f"kb_search (limit 10, {chunks:,} chunks in the tenant, {KBChunk.objects.count():,} in the table{label})  "
            f"{_p50_p95(measured)}  (query embedding excluded; {count} queries, min hits {min(returned)}{halves})"
        )
    checked = min(count, 100)
    overlap = {label: [] for label in variants}  # each variant's, so a shortfall shows which side loses it
    for query, vector in zip(queries[:checked], query_vectors[:checked], strict=True):
        with override_settings(KB_SEARCH_EXACT_MAX_CHUNKS=10**18, KB_SEARCH_KEYWORD_CHUNKS_READ=10**9):
            best = {hit.text for hit in kb_search(tenant=tenant, query=query, vector=vector, limit=10)}
        for label, changed in variants.items():
            with override_settings(**changed):
                found = {hit.text for hit in kb_search(tenant=tenant, query=query, vector=vector, limit=10)}
            overlap[label].append(len(found & best) / max(len(best), 1))
    others = "".join(f"; {label[2:]} {statistics.fmean(hits):.3f}" for label, hits in overlap.items() if label)
    print(f"kb_search hit@10 against an exhaustive search of the same chunks: {statistics.fmean(overlap['']):.3f} "
          f"({checked} queries; exact cosine instead of HNSW, every chunk of every term ranked, by the fused score "
          f"too){others}")  # fmt: skip
    if langgraph:
        # LangGraph's search is by vector alone: its reference is the exact cosine top 10, and ours beside it is
        # kb_search ranking by the vector alone (KB_SEARCH_VECTOR_WEIGHT = 1).
        ours, theirs = [], []
        for query, vector, keys in zip(queries[:checked], query_vectors[:checked], langgraph_keys, strict=False):
            exact = exact_vector_top(tenant, vector)
            with override_settings(KB_SEARCH_VECTOR_WEIGHT=1.0):
                found = {hit.text for hit in kb_search(tenant=tenant, query=query, vector=vector, limit=10)}
            ours.append(len(found & set(exact.values())) / len(exact))
            theirs.append(len(set(keys) & set(exact)) / len(exact))
        print(
            f"LangGraph PostgresStore.search (limit 10, the same chunks, vector only)  {_p50_p95(langgraph_ms)}  "
            f"(the same query vectors; min hits {min(map(len, langgraph_keys))}; by half "
            f"{_p50_p95(langgraph_ms[: count // 2])}, {_p50_p95(langgraph_ms[count // 2 :])}); "
            f"hit@10 against exact cosine "
            f"{statistics.fmean(theirs):.3f}, kb_search by the vector alone {statistics.fmean(ours):.3f} "
            f"({checked} queries)"
        )


def explain(tenant, query: str, *, seed: int, vectors: str) -> None:
    """The plan of kb_search's statement: which index each side used (EXPLAIN ANALYZE)."""
    (vector,) = unit_vectors([query], kind=vectors, seed=seed)
    with connection.execute_wrapper(_explaining):
        kb_search(tenant=tenant, query=query, vector=vector, limit=10)


def _explaining(execute, sql, params, many, context):
    if "WITH vector_hits" not in sql:
        return execute(sql, params, many, context)
    explain = sql.replace("WITH vector_hits", "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) WITH vector_hits", 1)
    execute(explain, params, many, context)
    context["cursor"].nextset()  # past the search's settings, sent before the statement
    plan = "\n".join(row[0] for row in context["cursor"].fetchall())
    plan = re.sub(r"'\[[-0-9.e,]+\]'", "'[...]'", plan)  # the query vector
    print(plan)
    return execute(sql, params, many, context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus-mb", type=float, default=5.0, help="Markdown to index with the hash embedder")
    parser.add_argument("--local-mb", type=float, default=5.0, help="Markdown to index with the local model")
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks loaded for the search benchmark")
    parser.add_argument("--other-chunks", type=int, default=20_000, help="chunks of a second tenant beside them")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--keep-indexes",
        action="store_true",
        help="load with the search indexes in place (slow) instead of "
        "dropping and rebuilding them in one transaction (which locks kb_kbchunk meanwhile)",
    )
    parser.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of a search")
    parser.add_argument("--no-langgraph", action="store_true", help="skip LangGraph's store beside kb_search")
    parser.add_argument("--also", action="append", default=[], metavar="SETTING=NUMBER", help="kb_search with this "
                        "setting too, interleaved with the others (KB_SEARCH_EF_SEARCH=400); repeatable")  # fmt: skip
    parser.add_argument("--vectors", choices=["random", "hash"], default="random", help="the loaded chunks' and "
                        "the queries' vectors: random unit vectors, or the hash embedder's")  # fmt: skip
    parser.add_argument("--trigger-cost", action="store_true", help="index the hash corpus with and without the "
                        "term-count triggers, alternating, and print what they cost")  # fmt: skip
    args = parser.parse_args()
    also = {}
    for setting in args.also:
        name, _, value = setting.partition("=")
        if not hasattr(settings, name) or not value.isdigit():
            parser.error(f"--also {setting}: expected SETTING=NUMBER with a setting of this project")
        also[name] = int(value)

    seed = uuid.uuid4().int % 2**32
    suffix = uuid.uuid4().hex[:8]
    tenant, _ = tenant_create(name=f"bench-kb-{suffix}")
    neighbour, _ = tenant_create(name=f"bench-kb-other-{suffix}")
    tenants = [tenant, neighbour]
    langgraph = None
    try:
        with tempfile.TemporaryDirectory() as directory:
            root = Path(directory) / "hash"
            root.mkdir()
            size = write_corpus(root, megabytes=args.corpus_mb, seed=seed)
            with override_settings(EMBEDDING_PROVIDER="hash"):
                first = index_tree(tenant, root, "hash, first run", size_bytes=size)
                again = index_tree(tenant, root, "hash, nothing changed", size_bytes=size)
                print(f"re-run with nothing changed: {again / first:.1%} of the first run's time")
                if args.trigger_cost:
                    trigger_cost(root)
            if not args.skip_local:
                local_root = Path(directory) / "local"
                local_root.mkdir()
                local_size = write_corpus(local_root, megabytes=args.local_mb, seed=seed + 7)
                local_tenant, _ = tenant_create(name=f"bench-kb-local-{suffix}")
                tenants.append(local_tenant)
                with override_settings(EMBEDDING_PROVIDER="local"):
                    active_embedding_model()  # load the model outside the timing
                    first = index_tree(local_tenant, local_root, "local, first run", size_bytes=local_size)
                    again = index_tree(local_tenant, local_root, "local, nothing changed", size_bytes=local_size)
                    print(f"re-run with nothing changed: {again / first:.1%} of the first run's time")
        with override_settings(EMBEDDING_PROVIDER="hash"):
            loads = [(tenant, args.chunks, seed), (neighbour, args.other_chunks, seed + 3)]
            load_chunks(loads, rebuild_indexes=not args.keep_indexes, vectors=args.vectors)
            if not args.no_langgraph:
                langgraph, url = langgraph_start()
                langgraph_load(url, [tenant, neighbour])
            for scope, scope_seed in ((tenant, seed), (neighbour, seed + 3)):
                bench_search(scope, args.queries, seed=scope_seed, vectors=args.vectors, also=also, langgraph=langgraph)
            if args.explain:
                vocab = Vocabulary(random.Random(seed))
                for scope in (tenant, neighbour):
                    print(f"\n--- EXPLAIN ANALYZE, tenant {scope.name}")
                    # One of the most common content words, and two of middling frequency.
                    query = " ".join([vocab.content[0], vocab.content[300], vocab.content[301]])
                    explain(scope, query, seed=seed, vectors=args.vectors)
    finally:
        if langgraph:
            langgraph.close()
        for scope in tenants:
            scope.delete()  # with the vectors it cached


if __name__ == "__main__":
    main()
