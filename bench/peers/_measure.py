"""The measuring protocol of bench/report.py, one copy for every system: the product (in process) and each peer
(its runner, in the peer's own virtualenv). Standard library only: it runs under every venv.

A system is an object with
    embed_query(text)                  -> anything (the query embedding alone, as the system's search makes it)
    search(user, query, limit)         -> list of dia_ids (None for memories without one), best first
    context(user, query)               -> anything (optional: the product's /context, embedding included)
    add(user, text)                    -> None (one memory through the system's public single add)
    bulk(user, texts)                  -> None (one call of the system's public bulk add)
    seed(user, items)                  -> None (setup, not measured: items are {"content", "dia_id"?, "occurred_at"?})
    info()                             -> dict (versions, threads, configuration)
and optionally thread_finished() (called at the end of each client thread), close(), and
    search_vector(namespace, vector, limit) -> list of item keys, best first (bench/kb.py: a search by a given vector)

A runner serves one JSON command per line on stdin and answers one JSON line on stdout (serve()).
"""

import json
import sys
import threading
import time
import traceback


def paired_search(system, user: str, queries: list[str], limit: int = 10, warmup: int = 3) -> dict:
    """Per query: the query's embedding alone, then the whole search (which embeds it again), timed apart, so
    store-side time = search - embedding of the same query (Mem0's paired protocol)."""
    for query in queries[:warmup]:
        system.embed_query(query)
        system.search(user, query, limit)
    embed_ms, e2e_ms = [], []
    for query in queries:
        started = time.perf_counter()
        system.embed_query(query)
        embedded = time.perf_counter()
        system.search(user, query, limit)
        finished = time.perf_counter()
        embed_ms.append((embedded - started) * 1000)
        e2e_ms.append((finished - embedded) * 1000)
    return {"embed_ms": embed_ms, "e2e_ms": e2e_ms}


def timed_contexts(system, user: str, queries: list[str], warmup: int = 3) -> dict:
    """Per query, the whole context build (its embedding included)."""
    for query in queries[:warmup]:
        system.context(user, query)
    e2e_ms = []
    for query in queries:
        started = time.perf_counter()
        system.context(user, query)
        e2e_ms.append((time.perf_counter() - started) * 1000)
    return {"e2e_ms": e2e_ms}


def single_adds(system, user: str, texts: list[str]) -> dict:
    latencies = []
    started = time.perf_counter()
    for text in texts:
        began = time.perf_counter()
        system.add(user, text)
        latencies.append((time.perf_counter() - began) * 1000)
    return {"count": len(texts), "seconds": time.perf_counter() - started, "latencies_ms": latencies}


def concurrent_adds(system, clients: list[list]) -> dict:
    """clients: [[user, texts], ...], one thread each, all started together; single adds through the public API."""
    errors: list[str] = []
    barrier = threading.Barrier(len(clients) + 1)

    def client(user: str, texts: list[str]) -> None:
        barrier.wait()
        try:
            for text in texts:
                try:
                    system.add(user, text)
                except Exception as exc:  # noqa: BLE001 - counted and reported: a failed add is a figure too
                    errors.append(f"{type(exc).__name__}: {exc}"[:300])
        finally:
            finished = getattr(system, "thread_finished", None)
            if finished:
                finished()

    threads = [threading.Thread(target=client, args=(user, texts)) for user, texts in clients]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    count = sum(len(texts) for _, texts in clients)
    return {"count": count - len(errors), "attempted": count, "seconds": seconds, "errors": errors[:5]}


def bulk_adds(system, user: str, texts: list[str], batch: int = 100) -> dict:
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        system.bulk(user, texts[start : start + batch])
    return {"rows": len(texts), "seconds": time.perf_counter() - started}


def recall_found(system, questions: list[list], limit: int = 10) -> dict:
    """questions: [[user, question], ...] -> the dia_ids each search returned, best first (scored by the caller)."""
    found, latencies = [], []
    for user, question in questions:
        started = time.perf_counter()
        found.append(system.search(user, question, limit))
        latencies.append((time.perf_counter() - started) * 1000)
    return {"found": found, "e2e_ms": latencies}


def timed_vector_search(system, namespace: list[str], vector: list[float], limit: int = 10) -> dict:
    """One search by a given query vector (no model involved), timed: one at a time, so that bench/kb.py chooses
    how it alternates them with the product's own."""
    started = time.perf_counter()
    keys = system.search_vector(namespace, vector, limit)
    return {"ms": (time.perf_counter() - started) * 1000, "keys": keys}


def seed(system, users: dict) -> dict:
    started = time.perf_counter()
    for user, items in users.items():
        system.seed(user, items)
    return {"rows": sum(len(items) for items in users.values()), "seconds": time.perf_counter() - started}


def run(system, command: dict) -> dict:
    """One command of bench/report.py against one system (in process or in a runner)."""
    op = command["op"]
    if op == "info":
        return system.info()
    if op == "seed":
        return seed(system, command["users"])
    if op == "search":
        return paired_search(system, command["user"], command["queries"], command.get("limit", 10))
    if op == "context":
        return timed_contexts(system, command["user"], command["queries"])
    if op == "add":
        return single_adds(system, command["user"], command["texts"])
    if op == "add_concurrent":
        return concurrent_adds(system, command["clients"])
    if op == "bulk":
        return bulk_adds(system, command["user"], command["texts"], command.get("batch", 100))
    if op == "recall":
        return recall_found(system, command["questions"], command.get("limit", 10))
    if op == "vector_search":
        return timed_vector_search(system, command["namespace"], command["vector"], command.get("limit", 10))
    raise ValueError(f"unknown op {op!r}")


def serve(make_system) -> None:
    """A runner's main loop: build the system, then answer one JSON line per command line until "close" or EOF.
    The real stdout carries only the answers: whatever a library prints goes to stderr."""
    answers = sys.stdout
    sys.stdout = sys.stderr
    try:
        system = make_system()
        answers.write(json.dumps({"ok": True, "result": "ready"}) + "\n")
    except Exception:  # noqa: BLE001 - the orchestrator shows why the peer could not start
        answers.write(json.dumps({"ok": False, "error": traceback.format_exc()}) + "\n")
        answers.flush()
        return
    answers.flush()
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "close":
            break
        try:
            answer = {"ok": True, "result": run(system, command)}
        except Exception:  # noqa: BLE001 - reported to the orchestrator, which decides
            answer = {"ok": False, "error": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    close = getattr(system, "close", None)
    if close:
        close()
