"""django-q's ORM broker, queueing inside a transaction; deleting the records of some tasks.

Outside a transaction the stock broker first closes "old" database connections, which with CONN_MAX_AGE=0 means
a new connection for every task a request queues (after its commit). Inside one it leaves the connection alone.
"""

from collections.abc import Collection

from django.db import transaction
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ, Task

_BATCH = 10000  # ids per statement, rows per read of the queue


class OrmBroker(ORM):
    def __init__(self, list_key: str | None = None):
        with transaction.atomic(using=Conf.ORM):
            super().__init__(list_key=list_key)

    def enqueue(self, task):
        with transaction.atomic(using=Conf.ORM):
            return super().enqueue(task)


def task_records_delete(*, func: str, names: Collection[str]) -> int:
    """Delete django-q's records of the tasks of `func` named one of `names`: their results (Success and Failure
    rows) and those still queued. For erasure: a record keeps the arguments its task was given, what it returned
    and the error it raised. Returns how many rows went.

    A queued task's name is inside its signed payload, so the queue is read through (it is short: tasks leave it
    when they start)."""
    names = set(names)
    if not names:
        return 0
    deleted = 0
    batches = [sorted(names)[start : start + _BATCH] for start in range(0, len(names), _BATCH)]
    for batch in batches:
        deleted += Task.objects.filter(func=func, name__in=batch).delete()[0]
    queued = [
        row.pk
        for row in OrmQ.objects.using(Conf.ORM).only("pk", "payload").iterator(chunk_size=_BATCH)
        if row.task.get("func") == func and row.task.get("name") in names
    ]
    for start in range(0, len(queued), _BATCH):
        deleted += OrmQ.objects.using(Conf.ORM).filter(pk__in=queued[start : start + _BATCH]).delete()[0]
    return deleted
