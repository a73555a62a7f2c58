"""Advisory locks: one key space per kind of lock, and locks that really exclude another session."""

import pytest
from django.db import connection, transaction

from core.locks import LockNamespace, is_locked, lock_key, session_lock, xact_lock
from tests.threads import held_elsewhere


def test_kinds_of_lock_never_share_a_key():
    # Before core.locks, a user id "kb:x" and the document "x" of the same tenant took the same lock.
    assert lock_key(LockNamespace.USER_MEMORY, 7, "kb:x") != lock_key(LockNamespace.KB_DOCUMENT, 7, "x")
    assert lock_key(LockNamespace.FORGET_TENANT, 7) != lock_key(LockNamespace.EPISODE_EXTRACTION, 7)
    keys = {lock_key(namespace, 7) for namespace in LockNamespace}
    assert len(keys) == len(LockNamespace)


def test_a_key_is_the_same_in_every_process_and_fits_a_bigint():
    assert lock_key(LockNamespace.USER_MEMORY, 3, "alice") == lock_key(LockNamespace.USER_MEMORY, 3, "alice")
    assert lock_key(LockNamespace.USER_MEMORY, 3, "alice") != lock_key(LockNamespace.USER_MEMORY, 3, "bob")
    assert lock_key(LockNamespace.USER_MEMORY, 3, "alice") != lock_key(LockNamespace.USER_MEMORY, 4, "alice")
    assert lock_key(LockNamespace.FORGET_TENANT, 42) == (int(LockNamespace.FORGET_TENANT) << 48) | 42
    for namespace in LockNamespace:
        assert 0 < lock_key(namespace, "x" * 300) < 2**63


@pytest.mark.django_db
@pytest.mark.parametrize("parts", [(3, "alice"), (12, "team/a b"), (1, "张伟"), ("x" * 300,)])
def test_sql_computes_the_key_python_does(parts):
    """What a trigger locks (core_lock_key) is what Python's lock_key names, so both can take the same lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT core_lock_key(%s, %s)", [int(LockNamespace.SEARCH_TERMS), "\x1f".join(map(str, parts))])
        [key] = cursor.fetchone()

    assert key == lock_key(LockNamespace.SEARCH_TERMS, *parts)


@pytest.mark.django_db(transaction=True)
def test_a_session_lock_excludes_other_sessions_until_released():
    with held_elsewhere(lambda: session_lock(LockNamespace.FORGET_TENANT, 5)):
        assert is_locked(LockNamespace.FORGET_TENANT, 5)
        assert not is_locked(LockNamespace.FORGET_TENANT, 6)
        assert not is_locked(LockNamespace.EPISODE_EXTRACTION, 5)  # another kind of lock, another key
        with session_lock(LockNamespace.FORGET_TENANT, 5, wait=False) as acquired:
            assert not acquired
    assert not is_locked(LockNamespace.FORGET_TENANT, 5)


@pytest.mark.django_db(transaction=True)
def test_a_transaction_lock_is_held_until_commit():
    def in_a_transaction():
        class Held:
            def __enter__(self):
                self.atomic = transaction.atomic()
                self.atomic.__enter__()
                xact_lock(LockNamespace.USER_MEMORY, 1, "alice")

            def __exit__(self, *exc):
                self.atomic.__exit__(None, None, None)

        return Held()

    with held_elsewhere(in_a_transaction):
        assert is_locked(LockNamespace.USER_MEMORY, 1, "alice")
        assert not is_locked(LockNamespace.KB_DOCUMENT, 1, "alice")
    assert not is_locked(LockNamespace.USER_MEMORY, 1, "alice")
