"""django-q's ORM broker, queueing inside a transaction.

Outside a transaction the stock broker first closes "old" database connections, which with CONN_MAX_AGE=0 means
a new connection for every task a request queues (after its commit). Inside one it leaves the connection alone.
"""

from django.db import transaction
from django_q.brokers.orm import ORM
from django_q.conf import Conf


class OrmBroker(ORM):
    def __init__(self, list_key: str | None = None):
        with transaction.atomic(using=Conf.ORM):
            super().__init__(list_key=list_key)

    def enqueue(self, task):
        with transaction.atomic(using=Conf.ORM):
            return super().enqueue(task)
