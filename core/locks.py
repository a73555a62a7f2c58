"""PostgreSQL advisory locks, one key space per kind of lock.

A key is one bigint: the namespace in the high 16 bits, the locked thing in the low 48 (an id as it is, or a hash
of several parts), so two kinds of lock never share a key (a user id "kb:x" cannot meet document "x"). A trigger
computes the same key with core_lock_key (core/sql/locks.sql).
"""

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

from django.db import DatabaseError, connection

_LOW_BITS = 48
_LOW_MASK = (1 << _LOW_BITS) - 1


class LockNamespace(IntEnum):
    USER_MEMORY = 1  # writes to one user's memory: (tenant id, user id)
    KB_DOCUMENT = 2  # writes to one knowledge-base document: (tenant id, doc id)
    FORGET_TENANT = 3  # a forgetting run of one tenant: (tenant id,)
    EPISODE_EXTRACTION = 4  # the extraction run of one episode: (episode id,)
    SEARCH_TERMS = 5  # the search-term counts of one user, taken by facts/sql/search_upkeep.sql: (tenant id, user id)


def lock_key(namespace: LockNamespace, *parts: int | str) -> int:
    """The advisory-lock key of `parts` in `namespace`: a single integer id is used as it is (unique up to
    2^48), anything else is hashed (the first 48 bits of the MD5 of the parts joined by U+001F: the same in every
    process, and in SQL: core_lock_key)."""
    if len(parts) == 1 and isinstance(parts[0], int) and 0 <= parts[0] <= _LOW_MASK:
        low = parts[0]
    else:
        text = "\x1f".join(str(part) for part in parts).encode()
        low = int.from_bytes(hashlib.md5(text).digest()[:6], "big")  # noqa: S324 - a key, not a secret
    return (int(namespace) << _LOW_BITS) | low


def xact_lock(namespace: LockNamespace, *parts: int | str) -> None:
    """Wait for the lock and hold it until the current transaction ends (call it inside transaction.atomic)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key(namespace, *parts)])


@contextmanager
def session_lock(namespace: LockNamespace, *parts: int | str, wait: bool = True) -> Iterator[bool]:
    """Hold the lock across transactions, on this connection, for the `with` block; yields whether it was taken
    (always True when waiting). A connection that dies releases its locks with itself."""
    key = lock_key(namespace, *parts)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s), true" if wait else "SELECT pg_try_advisory_lock(%s)", [key])
        acquired = cursor.fetchone()[-1]
    try:
        yield acquired
    finally:
        if acquired:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
            except DatabaseError:  # the connection is gone, and the lock with it
                pass


def is_locked(namespace: LockNamespace, *parts: int | str) -> bool:
    """Whether another session holds the lock now (it is taken and released at once to find out)."""
    with session_lock(namespace, *parts, wait=False) as acquired:
        return not acquired
