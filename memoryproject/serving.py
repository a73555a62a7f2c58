"""What the web server's workers do as they start (gunicorn.conf.py's hooks call it)."""

import os
import time

from django.conf import settings

from ai.embedders import embedder_warm_up


def worker_warm_up(log) -> None:
    """Load the embedder before the first request and say so in one line (tests and operators read it)."""
    started = time.monotonic()
    try:
        embedder = embedder_warm_up()
    except Exception as exc:  # noqa: BLE001 - the worker still serves; requests that embed will fail the same way
        log.error("worker %d: embedding model %s not loaded: %s", os.getpid(), settings.EMBEDDING_PROVIDER, exc)
        return
    threads = getattr(embedder, "threads", None)
    log.info(
        "worker %d: embedding model %s ready in %.1f s (%s)",
        os.getpid(),
        embedder.model_name,
        time.monotonic() - started,
        f"torch threads {threads}" if threads is not None else f"provider {settings.EMBEDDING_PROVIDER}",
    )
