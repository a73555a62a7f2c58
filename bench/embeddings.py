"""Embedding throughput per provider, and what the embedding cache saves. Prints figures; asserts nothing.

    .venv/bin/python bench/embeddings.py [--texts 2000] [--runtimes]

--runtimes: the local model's forward on each LOCAL_EMBEDDING_RUNTIME (onnxruntime-int8, onnxruntime, torchscript,
torch), alternating rounds: load time, one text at a time (a query, a single add) and batches of 8 and 64, the
largest difference of the vectors from the model's own forward, and the resident memory of a fresh process with the
model loaded.

Uses the database of the current settings (the embedded one by default; run `manage.py migrate` first).
The openai provider is measured against the local fake OpenAI-compatible server from the tests, so the
figure is the client + HTTP + batching overhead, not a real model.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import _django  # noqa: F401
import numpy as np
from django.test import override_settings

from ai.embedders import LOCAL_RUNTIMES, get_embedder
from ai.services import embed_texts
from tenancy.services import tenant_create
from tests.fake_openai import API_KEY, FakeOpenAI

SENTENCES = [
    "The user prefers PostgreSQL because it has JSONB.",
    "We deploy to Kubernetes every Friday afternoon.",
    "用户喜欢用 Python 写脚本。",
    "Their cat is called Miso and hates the vacuum cleaner.",
    "Project Atlas moved from MySQL to PostgreSQL in May 2023.",
]


def corpus(count: int, tag: str) -> list[str]:
    return [f"{SENTENCES[n % len(SENTENCES)]} ({tag} {n})" for n in range(count)]


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:8.0f} texts/s  ({seconds * 1000:7.1f} ms for {count})"


def timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def embed_texts_of(texts: list[str], tenant, user_id: str) -> None:
    embed_texts(texts, tenant=tenant, user_id=user_id)


def bench_provider(label: str, count: int, **overrides) -> None:
    with override_settings(**overrides):
        embedder = get_embedder()
        embedder.embed(["warm up"])
        texts = corpus(count, label)
        print(f"{label:<28} raw provider   {rate(count, timed(embedder.embed, texts))}")
        queries = corpus(50, label + "-query")
        per_query = timed(lambda: [embedder.embed([q]) for q in queries]) / len(queries)
        print(f"{label:<28} single query   {per_query * 1000:8.2f} ms")
        if embedder.cacheable:
            tenant, _ = tenant_create(name=f"bench-embeddings-{uuid.uuid4().hex[:6]}")  # the cache keeps rows per owner
            try:
                cold = timed(embed_texts_of, texts, tenant, "bench-user")
                warm = timed(embed_texts_of, texts, tenant, "bench-user")
                print(f"{label:<28} cache cold     {rate(count, cold)}")
                print(f"{label:<28} cache warm     {rate(count, warm)}   speed-up x{cold / warm:.1f}")
            finally:
                tenant.delete()  # with its cached vectors


def bench_runtimes(rounds: int = 4) -> None:
    """The local model on each runtime its forward can run on, the same texts, alternating A, B, C, A, B, C."""
    embedders = {}
    for runtime in reversed(LOCAL_RUNTIMES):  # the model's own first: a later load's extra time is its runtime's
        with override_settings(EMBEDDING_PROVIDER="local", LOCAL_EMBEDDING_RUNTIME=runtime):
            started = time.perf_counter()
            embedders[runtime] = get_embedder()
            loaded = time.perf_counter() - started
        print(f"local on {runtime:<16}       load {loaded:6.2f} s (runs on {embedders[runtime].runtime})")
    texts = corpus(64, "runtimes")
    own = embedders["torch"].embed(texts)
    for runtime, embedder in embedders.items():
        difference = np.abs(embedder.embed(texts) - own).max()
        print(f"{runtime:<28} largest difference of a vector component from torch's, 64 texts: {difference:.2g}")
    for round_number in range(1, rounds + 1):
        for runtime, embedder in embedders.items():
            singles = [timed(embedder.embed, [text]) * 1000 for text in corpus(40, f"single {round_number}")]
            eight = timed(embedder.embed, corpus(8, f"eight {round_number}")) * 1000
            batch = timed(embedder.embed, corpus(64, f"batch {round_number}")) * 1000
            print(
                f"round {round_number} {runtime:<16}  one text p50 {statistics.median(singles):6.1f} ms   "
                f"8 texts {eight:6.1f} ms   64 texts {batch:7.1f} ms"
            )


def resident_mb(runtime: str) -> int:
    """VmRSS of a fresh process once the local model is loaded on `runtime` and has embedded a text."""
    answer = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--resident-of", runtime],
        capture_output=True, text=True, check=True, env={**os.environ, "EMBEDDING_PROVIDER": "local"},
    )  # fmt: skip
    return round(float(answer.stdout.split()[-1]))


def bench_resident(rounds: int = 2) -> None:
    measured = {runtime: [] for runtime in LOCAL_RUNTIMES}
    for _ in range(rounds):
        for runtime in LOCAL_RUNTIMES:
            measured[runtime].append(resident_mb(runtime))
    for runtime, figures in measured.items():
        print(f"local on {runtime:<16}       resident memory of a fresh process {', '.join(map(str, figures))} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--runtimes", action="store_true", help="only the local model's forward on each runtime")
    parser.add_argument("--resident-of", choices=LOCAL_RUNTIMES, help=argparse.SUPPRESS)  # resident_mb's child
    args = parser.parse_args()
    if args.resident_of:
        from report import process_resident_mb

        with override_settings(EMBEDDING_PROVIDER="local", LOCAL_EMBEDDING_RUNTIME=args.resident_of):
            get_embedder().embed(["I moved to Lisbon last year."])
        print(process_resident_mb(os.getpid()))
        return
    if args.runtimes:
        bench_runtimes()
        bench_resident()
        return

    bench_provider("hash", args.texts, EMBEDDING_PROVIDER="hash")
    fake = FakeOpenAI().start()
    try:
        bench_provider(
            "openai (local fake, batch 64)",
            args.texts,
            EMBEDDING_PROVIDER="openai",
            EMBEDDING_MODEL="bench-fake-embed",
            OPENAI_BASE_URL=fake.base_url,
            OPENAI_API_KEY=API_KEY,
        )
        print(f"{'':<28} requests made  {len(fake.requests_to('/v1/embeddings')):8d}")
    finally:
        fake.stop()
    bench_provider("local (all-MiniLM-L6-v2)", min(args.texts, 1000), EMBEDDING_PROVIDER="local")
    bench_runtimes()
    bench_resident()


if __name__ == "__main__":
    main()
