"""The probes: /api/health/live answers without the database, /api/health/ready says what is not ready."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import Schedule
from django_q.scheduler import scheduler
from rest_framework.test import APIClient

from ai import embedders
from ai import services as ai_services
from ai.chat import get_chat
from ai.errors import AIProviderError
from facts.judging import llm_judge
from memoryproject.models import WorkerHeartbeat
from memoryproject.services import worker_heartbeat_record
from tests.factories import client_with_key, make_tenant
from tests.redis_server import redis_server


def test_live_answers_without_touching_the_database():
    # No django_db mark: a query would fail the test ("Database access not allowed").
    response = APIClient().get("/api/health/live")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def run_due_schedules() -> None:
    """What the cluster's scheduler does every 30 s; with Q_CLUSTER sync (test settings) the task runs inline."""
    scheduler(broker=get_broker())


@pytest.mark.django_db
class TestReady:
    def test_ready_once_the_scheduled_heartbeat_has_run(self):
        call_command("setup_schedules", stdout=StringIO())
        before = APIClient().get("/api/health/ready")

        run_due_schedules()
        after = APIClient().get("/api/health/ready")

        assert before.status_code == 503
        assert before.json()["error"]["code"] == "not_ready"
        assert "worker" in before.json()["error"]["message"]
        assert WorkerHeartbeat.objects.get().beat_at > timezone.now() - timedelta(seconds=10)
        assert after.status_code == 200
        assert after.json() == {
            "status": "ok",
            "checks": {"database": "ok", "pgvector": "ok", "embedder": "ok", "worker": "ok", "queue": "ok"},
            "providers": {"embeddings": {"status": "ok", "last_success_at": None}},  # (no embedding call yet)
        }

    def test_an_old_heartbeat_is_not_ready_and_says_so(self, settings):
        settings.WORKER_HEARTBEAT_MAX_AGE = 120
        heartbeat = worker_heartbeat_record()
        WorkerHeartbeat.objects.filter(pk=heartbeat.pk).update(beat_at=timezone.now() - timedelta(seconds=300))

        response = APIClient().get("/api/health/ready")

        assert response.status_code == 503
        error = response.json()["error"]
        assert "the last worker heartbeat is 300 s old (WORKER_HEARTBEAT_MAX_AGE is 120 s)" in error["message"]
        assert error["details"]["database"] == "ok"
        assert error["details"]["worker"].startswith("the last worker heartbeat is 300 s old")

    def test_a_redis_broker_that_does_not_answer_is_not_ready(self, settings, monkeypatch, tmp_path):
        settings.WORKER_HEARTBEAT_MAX_AGE = 0
        monkeypatch.setattr(Conf, "BROKER_CLASS", None)
        monkeypatch.setattr(Conf, "ORM", None)
        monkeypatch.setattr(Conf, "REDIS", f"unix://{tmp_path}/nobody-listens.sock")

        down = APIClient().get("/api/health/ready")
        with redis_server(tmp_path) as url:
            monkeypatch.setattr(Conf, "REDIS", url)
            back = APIClient().get("/api/health/ready")

        assert down.status_code == 503
        assert down.json()["error"]["details"]["queue"].startswith("the task queue (REDIS_URL) does not answer")
        assert back.status_code == 200

    def test_the_worker_check_can_be_switched_off(self, settings):
        settings.WORKER_HEARTBEAT_MAX_AGE = 0

        assert APIClient().get("/api/health/ready").status_code == 200

    def test_a_misconfigured_embedder_is_not_ready(self, settings):
        worker_heartbeat_record()
        settings.EMBEDDING_PROVIDER = "word2vec"

        response = APIClient().get("/api/health/ready")

        assert response.status_code == 503
        assert response.json()["error"]["details"]["embedder"] == (
            "Unknown EMBEDDING_PROVIDER 'word2vec': use local, openai or hash."
        )

    def test_ready_reads_no_tenant_data_and_is_cheap(self):
        worker_heartbeat_record()

        with CaptureQueriesContext(connection) as queries:
            response = APIClient().get("/api/health/ready")

        assert response.status_code == 200
        assert len(queries) <= 4
        assert not any("tenancy_" in query["sql"] or "facts_" in query["sql"] for query in queries)

    def test_probes_are_never_throttled(self, settings):
        settings.AUTH_FAILURE_THROTTLE_RATE = "2/min"
        settings.WORKER_HEARTBEAT_MAX_AGE = 0

        statuses = {APIClient().get(path).status_code for path in ["/api/health/live", "/api/health/ready"] * 5}

        assert statuses == {200}


def test_the_local_model_loads_in_the_background_and_a_failure_is_reported(settings, tmp_path):
    settings.EMBEDDING_PROVIDER = "local"
    settings.LOCAL_EMBEDDING_MODEL_PATH = str(tmp_path / "no-such-model")

    first = embedders.embedder_readiness()
    embedders._preload_thread.join(timeout=30)
    second = embedders.embedder_readiness()
    embedders._preload_thread.join(timeout=30)

    assert first == "The local embedding model is loading."
    assert second.startswith("The local embedding model failed to load (retrying): ")
    assert embedders.embedder_loaded() is False


def test_setup_schedules_declares_the_heartbeat_once(db):
    for _ in range(2):
        call_command("setup_schedules", stdout=StringIO())

    [schedule] = Schedule.objects.filter(name="worker-heartbeat")
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == (
        "memoryproject.tasks.worker_heartbeat",
        Schedule.MINUTES,
        1,
    )
    assert schedule.next_run <= timezone.now()


@pytest.mark.django_db
def test_health_and_ready_report_a_failing_embedding_provider_then_its_recovery(
    settings, openai_settings, fake_openai, monkeypatch
):
    settings.WORKER_HEARTBEAT_MAX_AGE = 0
    monkeypatch.setattr(ai_services, "PROBE_AFTER_SECONDS", 0)  # the health view's own call is not held back
    openai_settings.CHAT_PROVIDER = "none"
    tenant_api = client_with_key(make_tenant("probe-outage")[1])
    fake_openai.go_down("/v1/embeddings")

    search = tenant_api.post("/api/v1/facts/search", {"user_id": "u1", "query": "tea"}, format="json")
    ready = APIClient().get("/api/health/ready")
    health = APIClient().get("/api/health")
    fake_openai.recover()
    health_back = APIClient().get("/api/health")  # its own embedding call sees the provider answer again
    ready_back = APIClient().get("/api/health/ready")

    assert search.status_code == 200
    assert search.json()["degraded"] == ["embeddings"]
    assert ready.status_code == 200  # still serving: keyword-only
    assert ready.json()["status"] == "degraded"
    failing = ready.json()["providers"]["embeddings"]
    assert failing["status"] == "failing"
    assert "503" in failing["error"]
    assert failing["since"]
    assert failing["consecutive_failures"] >= 1
    assert "chat" not in ready.json()["providers"]  # no chat model configured
    assert health.status_code == 200
    assert health.json()["status"] == "degraded"
    assert health.json()["providers"]["embeddings"]["status"] == "failing"
    assert health.json()["providers"]["embeddings"]["facts_awaiting_embedding"] == {"count": 0, "oldest": None}
    assert health_back.json()["status"] == "ok"
    assert ready_back.json()["status"] == "ok"
    assert ready_back.json()["providers"]["embeddings"]["status"] == "ok"
    assert ready_back.json()["providers"]["embeddings"]["last_success_at"] is not None


@pytest.mark.django_db
def test_ready_reports_a_failing_chat_model_when_one_is_configured(settings, openai_settings, fake_openai):
    settings.WORKER_HEARTBEAT_MAX_AGE = 0
    fake_openai.go_down("/v1/chat/completions")
    with pytest.raises(AIProviderError):
        llm_judge(get_chat(), new="Lives in Paris", existing=["Lives in Berlin"])

    ready = APIClient().get("/api/health/ready").json()

    assert ready["status"] == "degraded"
    assert ready["providers"]["chat"]["status"] == "failing"
    assert ready["providers"]["embeddings"]["status"] == "ok"
