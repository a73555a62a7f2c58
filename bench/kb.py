"""Knowledge-base throughput and search latency: index a generated Markdown corpus, re-index it unchanged,
then kb_search over 100k chunks.

    .venv/bin/python bench/kb.py [--corpus-mb 5] [--local-mb 5] [--skip-local] [--chunks 100000]
                                 [--other-chunks 20000] [--queries 200] [--explain]

Prints figures, asserts nothing. Works in throwaway tenants of the current database (the embedded one by
default; run `manage.py migrate` first) and deletes them afterwards, with the embedding-cache rows it wrote.
The corpus is new on every run (random seed), so the first indexing run starts with a cold embedding cache.
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
import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from ai.services import active_embedding_model
from core.db import copy_insert
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


def load_chunks(loads: list[tuple], *, rebuild_indexes: bool) -> None:
    """Fast setup (not what is measured): random unit vectors and generated text by COPY, then ANALYZE.

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
                _copy_chunks(tenant, count, seed=seed)
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


def _copy_chunks(tenant, count: int, *, seed: int, per_document: int = 100) -> None:
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    vectors = np.random.default_rng(seed).normal(size=(count, settings.EMBEDDING_DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
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
                embedding=vectors[n], embedding_model=model, created_at=now,
            )  # fmt: skip
            chunk.search_text = search_text(f"{document.title} {chunk.heading_path} {text}")
            chunks.append(chunk)
        copy_insert(KBChunk, chunks, [
            "tenant", "document", "ordinal", "text", "heading_path", "line_start", "line_end", "token_count",
            "content_hash", "embedding", "embedding_model", "search_text", "created_at",
        ])  # fmt: skip


def bench_search(tenant, count: int, *, seed: int) -> None:
    rng = random.Random(seed + 1)
    vocab = Vocabulary(random.Random(seed))  # the loaded chunks' vocabulary
    queries = [vocab.query(rng) for _ in range(count)]
    vectors = np.random.default_rng(seed + 1).normal(size=(count, settings.EMBEDDING_DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for query, vector in zip(queries[:10], vectors[:10], strict=True):  # warm the caches
        kb_search(tenant=tenant, query=query, vector=vector, limit=10)
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
    timings = {label: [] for label in variants}
    returned = []
    for query, vector in zip(queries, vectors, strict=True):
        for label, changed in variants.items():
            with override_settings(**changed):
                started = time.perf_counter()
                hits = kb_search(tenant=tenant, query=query, vector=vector, limit=10)
                timings[label].append((time.perf_counter() - started) * 1000)
            returned.append(len(hits))
    for label, measured in timings.items():
        measured.sort()
        print(
            f"kb_search (limit 10, {chunks:,} chunks in the tenant, {KBChunk.objects.count():,} in the table{label})  "
            f"p50 {statistics.median(measured):.1f} ms  p95 {measured[int(count * 0.95)]:.1f} ms  "
            f"(query embedding excluded; {count} queries, min hits {min(returned)})"
        )
    checked = min(count, 100)
    overlap = []
    for query, vector in zip(queries[:checked], vectors[:checked], strict=True):
        found = {hit.text for hit in kb_search(tenant=tenant, query=query, vector=vector, limit=10)}
        with connection.execute_wrapper(_exhaustive), override_settings(KB_SEARCH_KEYWORD_CHUNKS_READ=10**9):
            best = {hit.text for hit in kb_search(tenant=tenant, query=query, vector=vector, limit=10)}
        overlap.append(len(found & best) / max(len(best), 1))
    print(f"kb_search hit@10 against an exhaustive search of the same chunks: {statistics.fmean(overlap):.3f} "
          f"({checked} queries; exact cosine instead of HNSW, every chunk of every term ranked)")  # fmt: skip


def _exhaustive(execute, sql, params, many, context):
    """kb_search's statement with its vector side an exact scan: the distance wrapped so no index can serve it."""
    if sql.lstrip().startswith("WITH vector_hits"):
        indexed, exact = "ORDER BY embedding <=> %(vector)s::vector", "ORDER BY (embedding <=> %(vector)s::vector) + 0"
        assert indexed in sql or exact in sql, (
            "kb_search's vector side changed: update _exhaustive"
        )  # else it would compare with itself
        sql = sql.replace(indexed, exact)
    return execute(sql, params, many, context)


def explain(tenant, query: str, *, seed: int) -> None:
    """The plan of kb_search's statement: which index each side used (EXPLAIN ANALYZE)."""
    vector = np.random.default_rng(seed).normal(size=settings.EMBEDDING_DIMENSIONS).astype(np.float32)
    vector /= np.linalg.norm(vector)
    with connection.execute_wrapper(_explaining):
        kb_search(tenant=tenant, query=query, vector=vector, limit=10)


def _explaining(execute, sql, params, many, context):
    if not sql.lstrip().startswith("WITH vector_hits"):
        return execute(sql, params, many, context)
    execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, params, many, context)
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
    parser.add_argument("--trigger-cost", action="store_true", help="index the hash corpus with and without the "
                        "term-count triggers, alternating, and print what they cost")  # fmt: skip
    args = parser.parse_args()

    seed = uuid.uuid4().int % 2**32
    suffix = uuid.uuid4().hex[:8]
    tenant, _ = tenant_create(name=f"bench-kb-{suffix}")
    neighbour, _ = tenant_create(name=f"bench-kb-other-{suffix}")
    tenants = [tenant, neighbour]
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
            load_chunks(loads, rebuild_indexes=not args.keep_indexes)
            bench_search(tenant, args.queries, seed=seed)
            bench_search(neighbour, args.queries, seed=seed + 3)
            if args.explain:
                vocab = Vocabulary(random.Random(seed))
                for scope in (tenant, neighbour):
                    print(f"\n--- EXPLAIN ANALYZE, tenant {scope.name}")
                    # One of the most common content words, and two of middling frequency.
                    explain(scope, " ".join([vocab.content[0], vocab.content[300], vocab.content[301]]), seed=seed)
    finally:
        for scope in tenants:
            scope.delete()  # with the vectors it cached


if __name__ == "__main__":
    main()
