"""End to end with a real django-q cluster: `manage.py qcluster` in its own process on the test database, with
each broker a deployment can choose: the ORM broker (the default) and Redis (REDIS_URL). The API only queues; the
cluster's worker extracts."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django_q.brokers import get_broker
from django_q.models import Success

from episodes.models import Episode
from facts.models import Fact
from tests.episodes.factories import TURN_1, TURN_2, conversation
from tests.external_postgres import current_database_url
from tests.factories import client_with_key, make_tenant

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]  # the cluster must see committed rows

DEADLINE_SECONDS = 30  # generous for a loaded machine: the wait ends as soon as the work is done


@pytest.fixture
def cluster(tmp_path, broker):
    """A django-q cluster on the test database and `broker`, with the test's embedder; stopped (and waited for)
    afterwards."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",  # not the test settings: those run tasks inline
        "DATABASE_URL": current_database_url(),
        "EMBEDDING_PROVIDER": settings.EMBEDDING_PROVIDER,
        "CHAT_PROVIDER": "none",
        "Q_WORKERS": "1",
        **broker,
    }
    log = (tmp_path / "qcluster.log").open("w+")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=Path(settings.BASE_DIR),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    yield process, log
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # django-q stops its workers and exits
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
    log.close()


def wait_for(condition, process, log) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    log.seek(0)
    pytest.fail(f"the cluster did not get there in {DEADLINE_SECONDS} s; its log:\n{log.read()[-4000:]}")


def test_a_real_cluster_extracts_in_the_background(cluster):
    tenant, key = make_tenant()
    api = client_with_key(key)

    first = api.post("/api/v1/episodes", conversation(messages=TURN_1), format="json")
    again = api.post("/api/v1/episodes", conversation(messages=TURN_1 + TURN_2), format="json")

    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json()["appended"] == 2
    episode_id = first.json()["id"]
    process, log = cluster

    def finished():
        episode = Episode.objects.get(pk=episode_id)
        results = Success.objects.filter(func="episodes.tasks.episode_extract").count()
        return episode.extraction_status == "done" and results == 2 and get_broker().queue_size() == 0

    wait_for(finished, process, log)
    episode = Episode.objects.get(pk=episode_id)
    assert (episode.extracted_message_count, episode.summarized_message_count) == (4, 4)
    assert episode.summary
    assert episode.embedding is not None
    assert sorted(Fact.objects.filter(source_episode=episode).values_list("content", "status")) == [
        ("Lives in Berlin", "active"),  # plain statements: at the auto-approval confidence
        ("Prefers PostgreSQL for new projects", "active"),
        ("Prefers green tea in the morning", "active"),
    ]
    assert Success.objects.filter(func="episodes.tasks.episode_extract").count() == 2
