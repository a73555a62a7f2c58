"""Prometheus metrics measured in the process: request and search latencies.

With PROMETHEUS_MULTIPROC_DIR set (several server processes; prometheus_client reads it when first imported), each
process writes its samples to files in that folder and a scrape of any process adds them all up; unset, the
samples live in this process only. The numbers counted across tenants at scrape time (queue depth, review backlog)
are not here: memoryproject.metrics reads them from the database.
"""

import functools
import os
import time
from collections.abc import Callable

from prometheus_client import REGISTRY, CollectorRegistry, Histogram, generate_latest, multiprocess

MULTIPROCESS_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None
# Seconds; a per-user fact search is ~1-20 ms, a context build with a local model ~30 ms, an upload seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

REQUEST_SECONDS = Histogram(
    "memoryproject_http_request_duration_seconds",
    "Time to answer an HTTP request, by route (the URL pattern), method and status class.",
    ["route", "method", "status"],
    buckets=BUCKETS,
)
SEARCH_SECONDS = Histogram(
    "memoryproject_search_duration_seconds",
    "Time of one search (embedding the query included), by operation: facts_search, kb_search, episodes_search.",
    ["operation"],
    buckets=BUCKETS,
)
CONTEXT_BUILD_SECONDS = Histogram(
    "memoryproject_context_build_duration_seconds",
    "Time to build one prompt context (its searches, scoring, budget and usage counts).",
    buckets=BUCKETS,
)


def request_observe(*, route: str, method: str, status: int, seconds: float) -> None:
    """One answered request. Labels stay few whatever clients send: the route is a URL pattern (or one label for
    every unmatched path), an unknown method is "other", the status its class ("4xx")."""
    REQUEST_SECONDS.labels(
        route=route, method=method if method in METHODS else "other", status=f"{status // 100}xx"
    ).observe(seconds)


def timed(histogram: Histogram, **labels: str) -> Callable:
    """Decorate a function to observe its duration in `histogram` (with these labels), whether it returns or raises."""
    observed = histogram.labels(**labels) if labels else histogram

    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                observed.observe(time.perf_counter() - started)

        return wrapper

    return decorate


def process_metrics_text() -> bytes:
    """The text exposition of the metrics measured in processes: every process's when in multiprocess mode, else
    this one's (with its process and Python collectors)."""
    if MULTIPROCESS_DIR is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=MULTIPROCESS_DIR)
    return generate_latest(registry)
