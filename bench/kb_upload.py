"""A large KB upload, before and after it moved to the worker: the upload request's time, and what another tenant's
/kb/search costs meanwhile (it embeds its query with the same local model).

    .venv/bin/python bench/kb_upload.py [--sizes-mb 0.9 3] [--inline-mb 0.9] [--queries-idle 30] [--nice 0 10]

Scenarios, in-process through the DRF test client against the current database (the embedded one by default):
- idle: other-tenant searches alone;
- before: the upload indexed on the request (KB_INLINE_INDEX_MAX_CHARS above its size), the whole document one
  embedding call (EMBEDDING_SLICE_SIZE above its chunk count: the old unbounded call), searches from another thread;
- after: the upload answers 202 at once; the worker (a separate process running kb.tasks.document_index, niced by
  KB_WORKER_NICE = each --nice value) indexes it while the web process serves the searches.
Prints figures, asserts nothing. Works in throwaway tenants, deleted afterwards (with their cache rows).
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid

import _django  # noqa: F401
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django_q.models import OrmQ
from rest_framework.test import APIClient

from ai.embedders import embedder_warm_up
from kb.models import Document, KBChunk
from tenancy.models import Tenant
from tenancy.services import tenant_create

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = (
    "import sys; sys.path.insert(0, 'bench'); import _django; from kb import tasks; "
    "print(tasks.document_index(int(sys.argv[1])))"
)


def corpus(megabytes: float, rng: random.Random) -> str:
    """Markdown with headings and prose-like paragraphs, about `megabytes` of UTF-8."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(5000)]
    words += ["the", "a", "of", "to", "and", "in", "is", "for", "with", "deploy", "database", "rollback"] * 40
    parts, size, section = [], 0, 0
    while size < megabytes * 1_000_000:
        section += 1
        paragraph = "\n\n".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(60, 140))) + "." for _ in range(rng.randint(2, 5))
        )
        part = f"## Section {section}\n\n{paragraph}\n"
        parts.append(part)
        size += len(part)
    return "# Handbook\n\n" + "\n".join(parts)


def client_for(tenant_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant_key}")
    return client


def upload(client: APIClient, doc_id: str, text: str) -> tuple[float, int, dict]:
    started = time.perf_counter()
    response = client.post("/api/v1/kb/documents", {"doc_id": doc_id, "text": text}, format="json")
    return time.perf_counter() - started, response.status_code, response.json()


def search_once(client: APIClient, rng: random.Random) -> float:
    query = f"how do I {rng.choice(['deploy', 'roll back', 'restore'])} the {rng.choice(['database', 'cache'])}?"
    started = time.perf_counter()
    response = client.post("/api/v1/kb/search", {"query": query, "limit": 5}, format="json")
    assert response.status_code == 200, response.content[:300]
    return time.perf_counter() - started


def searches_while(client: APIClient, busy, rng: random.Random) -> list[float]:
    """Search back to back while busy() holds (at least 3 searches)."""
    latencies = []
    while busy() or len(latencies) < 3:
        latencies.append(search_once(client, rng))
    return latencies


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"n={len(ordered):4d}  p50 {statistics.median(ordered) * 1000:7.0f} ms  p95 {p95 * 1000:7.0f} ms  "
        f"max {ordered[-1] * 1000:7.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[0.9, 3.0])
    parser.add_argument("--inline-mb", type=float, nargs="*", default=[0.9], help="sizes to time the old way too")
    parser.add_argument("--queries-idle", type=int, default=30)
    parser.add_argument("--nice", type=int, nargs="*", default=[0, 10], help="KB_WORKER_NICE values to compare")
    parser.add_argument("--contention-mb", type=float, default=0.2, help="upload size of the worker runs")
    args = parser.parse_args()
    rng = random.Random(17)
    run = uuid.uuid4().hex[:8]
    uploader_tenant, uploader_key = tenant_create(name=f"bench-upload-{run}")
    reader_tenant, reader_key = tenant_create(name=f"bench-reader-{run}")
    uploader, reader = client_for(uploader_key.key), client_for(reader_key.key)
    print(f"cores: {os.cpu_count()}, load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    embedder_warm_up()
    upload(reader, "reader.md", corpus(0.05, rng))  # the reader's tenant has a little KB of its own
    texts = {size: corpus(size, rng) for size in {*args.sizes_mb, *args.inline_mb, args.contention_mb}}
    try:
        idle = [search_once(reader, rng) for _ in range(args.queries_idle)]
        print(f"idle /kb/search (other tenant)                    {summary(idle)}")

        print("\nupload request time (POST /api/v1/kb/documents, JSON text)")
        for size in args.inline_mb:
            before = _inline_upload(uploader, reader, texts[size], f"inline-{size}", rng, old=True)
            print(f"  before  {size:4.1f} MB inline: {before}")
        limit = settings.KB_INLINE_INDEX_MAX_CHARS
        at_limit = _inline_upload(uploader, reader, corpus(limit * 0.95 / 1e6, rng)[:limit], "at-limit", rng, old=False)
        print(f"  after   {limit / 1000:.0f} kB (the inline limit), sliced: {at_limit}")
        for size in args.sizes_mb:
            seconds, status, body = upload(uploader, f"queued-{size}", texts[size])
            print(f"  after   {size:4.1f} MB: {seconds * 1000:8.0f} ms  -> {status} {body['document']['status']}")
            OrmQ.objects.all().delete()  # no cluster runs here: the worker runs below, by hand

        print(
            f"\nworker indexing a {args.contention_mb} MB upload in its own process; other tenant's searches meanwhile"
        )
        for nice in args.nice:
            _worker_run(uploader, reader, texts[args.contention_mb], f"worker-nice{nice}-", nice, rng)
    finally:
        connection.close()
        for tenant in (uploader_tenant, reader_tenant):
            Tenant.objects.filter(pk=tenant.pk).delete()


def _inline_upload(uploader, reader, text, doc_id, rng, *, old: bool) -> str:
    done = threading.Event()
    result = {}

    def post():
        try:
            if old:  # indexed on the request, the whole document one unsliced embedding call (process-wide)
                with override_settings(KB_INLINE_INDEX_MAX_CHARS=10**9, EMBEDDING_SLICE_SIZE=10**9):
                    result["upload"] = upload(uploader, doc_id, text)
            else:
                result["upload"] = upload(uploader, doc_id, text)
        finally:
            done.set()
            connection.close()

    thread = threading.Thread(target=post)
    thread.start()
    latencies = searches_while(reader, lambda: not done.is_set(), rng)
    thread.join()
    seconds, status, body = result["upload"]
    chunks = KBChunk.objects.filter(document_id=body["document"]["id"]).count()
    return (
        f"{seconds:7.1f} s -> {status}, {chunks} chunks"
        f"\n          other tenant's /kb/search meanwhile       {summary(latencies)}"
    )


def _worker_run(uploader, reader, text, doc_prefix, nice, rng) -> None:
    seconds, status, body = upload(uploader, f"{doc_prefix}{uuid.uuid4().hex[:6]}", text)
    OrmQ.objects.all().delete()
    document_id = body["document"]["id"]
    started = time.perf_counter()
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(document_id)],
        cwd=ROOT,
        env={**os.environ, "KB_WORKER_NICE": str(nice)},
        stdout=subprocess.PIPE,
        text=True,
    )
    latencies = searches_while(reader, lambda: worker.poll() is None, rng)
    outcome = worker.communicate()[0].strip()
    took = time.perf_counter() - started
    chunks = KBChunk.objects.filter(document_id=document_id).count()
    status = Document.objects.get(pk=document_id).status
    print(
        f"  KB_WORKER_NICE={nice:2d}: request {seconds * 1000:5.0f} ms -> 202; worker {took:6.1f} s -> {outcome} "
        f"({status}, {chunks} chunks)"
    )
    print(f"          other tenant's /kb/search meanwhile       {summary(latencies)}")


if __name__ == "__main__":
    main()
