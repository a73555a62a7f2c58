"""How long to wait before trying again: one formula for every retry of the project (embeddings, extraction, KB)."""

from datetime import timedelta

MAX_DOUBLINGS = 32  # 2**32 base delays are past any cap; a bigger exponent only costs big integers


def retry_delay(failures: int, *, base_seconds: float, max_seconds: float | None = None) -> timedelta:
    """The wait after `failures` failed attempts in a row: the base, doubling with each failure, at most the cap."""
    seconds = base_seconds * 2 ** min(max(failures - 1, 0), MAX_DOUBLINGS)
    return timedelta(seconds=seconds if max_seconds is None else min(seconds, max_seconds))
