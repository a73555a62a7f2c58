"""The ORM broker queues a task without throwing away the request's database connection; the records of named
tasks can be deleted (queued and finished)."""

import uuid

import pytest
from django.db import connection
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.models import OrmQ, Task
from django_q.tasks import async_task

from core.queue import OrmBroker, task_records_delete


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("broker_class", "keeps_connection"), [(OrmBroker, True), (ORM, False)])
def test_queueing_after_commit_keeps_the_connection_only_with_our_broker(broker_class, keeps_connection, monkeypatch):
    # A connection per request (DATABASE_CONN_MAX_AGE=0): the stock broker's close_old_connections() closes it.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    connection.close()
    connection.ensure_connection()
    before = connection.connection  # what a request holds after its commit (autocommit)

    async_task("forgetting.tasks.forget_sweep", broker=broker_class(), sync=False)

    assert OrmQ.objects.count() == 1
    assert (connection.connection is before) is keeps_connection


def finished(name: str, func: str, *, success: bool = True) -> Task:
    now = timezone.now()
    return Task.objects.create(
        id=uuid.uuid4().hex, name=name, func=func, args=(7,), result="done", started=now, stopped=now, success=success
    )


@pytest.mark.django_db
def test_the_records_of_named_tasks_go_queued_and_finished_and_no_other():
    for name in ["episode_extract-7", "episode_extract-8"]:
        async_task("episodes.tasks.episode_extract", 7, task_name=name, sync=False)
    async_task("forgetting.tasks.forget_tenant", 7, task_name="episode_extract-7", sync=False)  # same name, other func
    finished("episode_extract-7", "episodes.tasks.episode_extract")
    finished("episode_extract-7", "episodes.tasks.episode_extract", success=False)
    finished("episode_extract-8", "episodes.tasks.episode_extract")

    deleted = task_records_delete(func="episodes.tasks.episode_extract", names=["episode_extract-7"])

    assert deleted == 3
    assert sorted((row.task["func"], row.task["name"]) for row in OrmQ.objects.all()) == [
        ("episodes.tasks.episode_extract", "episode_extract-8"),
        ("forgetting.tasks.forget_tenant", "episode_extract-7"),
    ]
    assert list(Task.objects.values_list("name", flat=True)) == ["episode_extract-8"]
    assert task_records_delete(func="episodes.tasks.episode_extract", names=[]) == 0
