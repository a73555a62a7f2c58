"""Usage counting: every fact injected into a prompt counts one more use (the more used, the longer it lives)."""

from collections.abc import Iterable

from django.db import connection
from django.utils import timezone

from tenancy.models import Tenant


def facts_record_usage(*, tenant: Tenant, fact_ids: Iterable[int]) -> int:
    """Count one more use of each fact (it was injected into a prompt): one UPDATE for all of them.

    Cheap by design: usage_count and last_used_at are in no index and the table keeps free space on each page
    (fillfactor), so PostgreSQL updates the rows in place (HOT) without touching any index.
    """
    ids = sorted(set(fact_ids))
    if not ids:
        return 0
    # Lock the rows in primary-key order first: concurrent callers with overlapping ids then queue instead of
    # deadlocking.
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE facts_fact SET usage_count = usage_count + 1, last_used_at = %s
            WHERE id IN (SELECT id FROM facts_fact WHERE tenant_id = %s AND id = ANY(%s) ORDER BY id FOR UPDATE)
            """,
            [timezone.now(), tenant.pk, ids],
        )
        return cursor.rowcount
