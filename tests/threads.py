"""Run test work on several threads at once: each thread has its own database connection."""

import threading
from contextlib import contextmanager

from django.db import connection


def run_together(count: int, work) -> list:
    """Start `count` threads at the same instant; return their results (re-raising any error)."""
    barrier = threading.Barrier(count)
    results, errors = [None] * count, []

    def worker(index: int):
        try:
            barrier.wait()
            results[index] = work(index)
        except Exception as exc:  # noqa: BLE001 - surfaced to the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results


@contextmanager
def held_elsewhere(hold):
    """For the `with` block, another database session (a thread of its own) is inside `hold()`: a context manager
    that takes a lock, as a worker running elsewhere would hold it."""
    held, release = threading.Event(), threading.Event()

    def holder():
        try:
            with hold():
                held.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(30), "the other session never took the lock"
        yield
    finally:
        release.set()
        thread.join(30)
