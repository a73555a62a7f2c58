"""The task queue down (a Redis that does not answer): a posted conversation is stored all the same, the caller
hears 503 naming the episode, and its extraction is queued again once the broker is back."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import Schedule

from core.errors import ApplicationError
from episodes.models import Episode
from episodes.services import episodes_requeue
from episodes.tasks import episodes_requeue as episodes_requeue_task
from tests.episodes.factories import TURN_1, conversation
from tests.factories import client_with_key, make_tenant
from tests.redis_server import redis_server

pytestmark = pytest.mark.django_db(transaction=True)  # the queueing happens after the commit


@pytest.fixture
def redis_broker(monkeypatch):
    """Queue into Redis at a URL the test chooses (the settings' REDIS_URL path)."""
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "BROKER_CLASS", None)
    monkeypatch.setattr(Conf, "ORM", None)

    def use(url: str) -> None:
        monkeypatch.setattr(Conf, "REDIS", url)

    return use


def test_a_conversation_posted_while_redis_is_down_is_kept_and_queued_when_it_is_back(redis_broker, tmp_path):
    tenant, key = make_tenant()
    redis_broker(f"unix://{tmp_path}/nobody-listens.sock")

    response = client_with_key(key).post("/api/v1/episodes", conversation(messages=TURN_1), format="json")

    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "queue_unavailable"
    episode = Episode.objects.get(pk=error["details"]["episode_id"], tenant=tenant)
    assert (episode.message_count, episode.extraction_status) == (2, "pending")
    with pytest.raises(ApplicationError):  # still down: the sweep fails loudly, and its next run tries again
        episodes_requeue(older_than=timedelta(0))

    with redis_server(tmp_path) as url:
        redis_broker(url)
        Episode.objects.filter(pk=episode.pk).update(updated_at=timezone.now() - timedelta(minutes=11))

        assert episodes_requeue(older_than=timedelta(minutes=10)) == 1
        assert get_broker().queue_size() == 1


def test_the_requeue_leaves_recent_and_finished_episodes_alone(redis_broker, tmp_path):
    tenant, _ = make_tenant()
    with redis_server(tmp_path) as url:
        redis_broker(url)
        Episode.objects.create(tenant=tenant, user_id="u1", session_id="a", message_count=0)  # pending
        done = Episode.objects.create(
            tenant=tenant, user_id="u1", session_id="b", message_count=0, extraction_status="done"
        )
        Episode.objects.filter(pk=done.pk).update(updated_at=timezone.now() - timedelta(hours=1))

        assert episodes_requeue(older_than=timedelta(minutes=10)) == 0
        assert get_broker().queue_size() == 0


def test_the_requeue_runs_on_a_schedule_declared_once():
    for _ in range(2):
        call_command("setup_schedules", stdout=StringIO())

    [schedule] = Schedule.objects.filter(name="episodes-requeue")
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == (
        "episodes.tasks.episodes_requeue",
        Schedule.MINUTES,
        5,
    )


def test_the_task_takes_its_age_from_the_setting(redis_broker, tmp_path, settings):
    tenant, _ = make_tenant()
    settings.EPISODES_REQUEUE_AFTER_MINUTES = 30
    with redis_server(tmp_path) as url:
        redis_broker(url)
        episode = Episode.objects.create(tenant=tenant, user_id="u1", session_id="a", message_count=0)
        Episode.objects.filter(pk=episode.pk).update(updated_at=timezone.now() - timedelta(minutes=20))
        assert episodes_requeue_task() == 0
        Episode.objects.filter(pk=episode.pk).update(updated_at=timezone.now() - timedelta(minutes=40))
        assert episodes_requeue_task() == 1
