"""The ORM broker queues a task without throwing away the request's database connection."""

import pytest
from django.db import connection
from django_q.brokers.orm import ORM
from django_q.models import OrmQ
from django_q.tasks import async_task

from core.queue import OrmBroker


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("broker_class", "keeps_connection"), [(OrmBroker, True), (ORM, False)])
def test_queueing_after_commit_keeps_the_connection_only_with_our_broker(broker_class, keeps_connection):
    connection.ensure_connection()
    before = connection.connection  # what a request holds after its commit (autocommit, CONN_MAX_AGE=0)

    async_task("forgetting.tasks.forget_sweep", broker=broker_class(), sync=False)

    assert OrmQ.objects.count() == 1
    assert (connection.connection is before) is keeps_connection
