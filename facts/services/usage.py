"""Usage counting: every fact injected into a prompt counts one more use (the more used, the longer it lives)."""

from collections.abc import Iterable

from django.db import connection
from django.utils import timezone

from tenancy.models import Tenant

# Lock the rows in primary-key order first: concurrent callers with overlapping ids then queue instead of deadlocking.
_COUNT_USE_SQL = """
UPDATE facts_fact SET usage_count = usage_count + 1, last_used_at = %s
WHERE id IN (SELECT id FROM facts_fact WHERE tenant_id = %s AND id = ANY(%s) ORDER BY id FOR UPDATE)
"""
# A count lost to a crash of the database costs a fact a little of its life, not its correctness: the commit does
# not wait for its WAL flush (8 ids of a user's 1k facts, alternating: 0.81 -> 0.62 ms a call). Inside a caller's
# transaction the setting would cover the caller's writes too, so it is sent only when the UPDATE commits by itself.
_NO_FLUSH_WAIT_SQL = "SET LOCAL synchronous_commit = off;\n"


def facts_record_usage(*, tenant: Tenant, fact_ids: Iterable[int]) -> int:
    """Count one more use of each fact (it was injected into a prompt): one UPDATE for all of them.

    Cheap by design: usage_count and last_used_at are in no index and the table keeps free space on each page
    (fillfactor), so PostgreSQL updates the rows in place (HOT) without touching any index.
    """
    ids = sorted(set(fact_ids))
    if not ids:
        return 0
    own_transaction = connection.get_autocommit()  # False inside atomic(), or a transaction begun by hand
    # Two statements in one simple query run as one transaction: the setting ends with it.
    sql = _NO_FLUSH_WAIT_SQL + _COUNT_USE_SQL if own_transaction else _COUNT_USE_SQL
    with connection.cursor() as cursor:
        cursor.execute(sql, [timezone.now(), tenant.pk, ids])
        if own_transaction:
            cursor.nextset()  # the UPDATE's row count
        return cursor.rowcount
