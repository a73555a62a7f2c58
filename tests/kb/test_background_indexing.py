"""Long uploads are indexed by the worker: 202 and a status to poll, batches whose crash leaves no partial chunks,
retries with backoff that end failed (and can be retried), a sweep for tasks the broker lost."""

import os
import subprocess
import sys
from datetime import timedelta
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import OrmQ, Schedule

from kb import services, tasks
from kb.chunking import chunk_document
from kb.models import Document, DocumentIndexing, KBChunk
from tests.factories import client_with_key
from tests.fake_openai import Failure
from tests.redis_server import redis_server

pytestmark = pytest.mark.django_db

INLINE_MAX = 600


def long_text(topic: str, sections: int = 6) -> str:
    """Markdown over INLINE_MAX characters, one chunk per section (each about 60 tokens)."""
    parts = [f"# {topic.title()} handbook\n"]
    for number in range(sections):
        body = " ".join(f"{topic} step {number} word{word}" for word in range(15))
        parts.append(f"## Section {number}\n\n{body}.\n")
    return "\n".join(parts)


TEXT = long_text("zanzibar")


@pytest.fixture(autouse=True)
def small_limits(settings):
    settings.KB_INLINE_INDEX_MAX_CHARS = INLINE_MAX
    settings.KB_INDEX_BATCH_CHUNKS = 2
    settings.KB_WORKER_NICE = 0  # the tests run the task in their own process: never nice it
    assert len(TEXT) > INLINE_MAX
    return settings


@pytest.fixture
def queued(monkeypatch, django_capture_on_commit_callbacks):
    """Queue into the ORM broker, as in production, instead of running the task inline; the test runs it."""
    monkeypatch.setattr(Conf, "SYNC", False)

    def post(client, doc_id="handbook.md", text=TEXT, **fields):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post("/api/v1/kb/documents", {"doc_id": doc_id, "text": text, **fields}, format="json")

    return post


def expected_chunks(text: str) -> list[str]:
    return [chunk.text for chunk in chunk_document(text, content_type="markdown", max_tokens=400, overlap_tokens=50)]


def stored_chunks(document_id: int) -> list[tuple[int, str]]:
    return list(KBChunk.objects.filter(document_id=document_id).order_by("ordinal").values_list("ordinal", "text"))


def search(client, query: str) -> list[str]:
    response = client.post("/api/v1/kb/search", {"query": query}, format="json")
    assert response.status_code == 200
    return [hit["doc_id"] for hit in response.json()["results"] if query in hit["text"]]


def test_a_long_upload_answers_202_and_is_found_once_the_worker_made_it_ready(api, queued):
    response = queued(api)

    assert response.status_code == 202
    body = response.json()
    document = body["document"]
    assert (body["outcome"], body["chunks_written"], document["status"], document["chunk_count"]) == (
        "new",
        0,
        "indexing",
        0,
    )
    assert body["poll"] == response["Location"] == f"/api/v1/kb/documents/{document['id']}"
    polled = api.get(body["poll"]).json()
    assert (polled["status"], polled["indexing"]["attempts"], polled["chunks"]) == ("indexing", 0, [])
    assert search(api, "zanzibar") == []  # not ready: not searched
    assert get_broker().queue_size() == 1

    assert tasks.document_index(document["id"]) == "ready"

    polled = api.get(body["poll"]).json()
    assert (polled["status"], polled["error"], polled["indexing"]) == ("ready", "", None)
    assert [chunk["text"] for chunk in polled["chunks"]] == expected_chunks(TEXT)
    assert len(polled["chunks"]) > 2  # several batches of 2
    assert polled["title"] == "Zanzibar handbook"
    assert "handbook.md" in search(api, "zanzibar")
    assert not DocumentIndexing.objects.exists()  # the waiting text is gone with its run


def test_a_short_upload_is_still_indexed_on_the_request(api, queued):
    response = queued(api, doc_id="short.md", text="# Short\n\nA few words about zanzibar.\n")

    assert response.status_code == 201
    assert (response.json()["document"]["status"], response.json()["document"]["chunk_count"]) == ("ready", 1)
    assert get_broker().queue_size() == 0


def test_a_short_upload_while_the_embedding_provider_fails_is_kept_for_the_worker(
    api, queued, openai_settings, fake_openai
):
    openai_settings.OPENAI_MAX_RETRIES = 0
    fake_openai.fail_next(Failure(status=500))

    response = queued(api, doc_id="short.md", text="# Short\n\nA few words about zanzibar.\n")

    assert response.status_code == 202
    document = response.json()["document"]
    assert (document["status"], document["chunk_count"]) == ("indexing", 0)
    assert tasks.document_index(document["id"]) == "ready"  # the provider is back
    assert "short.md" in search(api, "zanzibar")


def test_uploading_the_same_long_text_again_queues_nothing_more_and_once_ready_changes_nothing(api, queued):
    first = queued(api).json()
    again = queued(api)

    assert again.status_code == 202
    assert again.json()["document"]["id"] == first["document"]["id"]
    assert get_broker().queue_size() == 1
    tasks.document_index(first["document"]["id"])

    unchanged = queued(api)
    assert unchanged.status_code == 200
    assert (unchanged.json()["outcome"], unchanged.json()["chunks_written"]) == ("unchanged", 0)
    assert get_broker().queue_size() == 1  # nothing queued by the third upload either


def test_a_replaced_document_stays_searchable_by_its_old_text_until_the_new_one_is_ready(api, queued):
    document_id = queued(api).json()["document"]["id"]
    tasks.document_index(document_id)

    replaced = queued(api, text=long_text("kilimanjaro"))

    assert replaced.status_code == 202
    assert (replaced.json()["outcome"], replaced.json()["document"]["status"]) == ("changed", "indexing")
    assert set(search(api, "zanzibar")) == {"handbook.md"}  # the old text, still found
    assert search(api, "kilimanjaro") == []
    assert [text for _, text in stored_chunks(document_id)] == expected_chunks(TEXT)

    assert tasks.document_index(document_id) == "ready"
    assert search(api, "zanzibar") == []
    assert search(api, "kilimanjaro")
    assert [text for _, text in stored_chunks(document_id)] == expected_chunks(long_text("kilimanjaro"))


def test_a_run_that_crashes_after_its_first_batch_leaves_no_chunk_and_the_next_run_only_the_right_ones(
    api, queued, openai_settings, fake_openai, monkeypatch
):
    document_id = queued(api).json()["document"]["id"]
    real_embed = services._embed
    calls = []

    def embed_then_crash(tenant, rows):
        calls.append(len(rows))
        if len(calls) == 2:
            raise RuntimeError("worker killed mid-run")
        real_embed(tenant, rows)

    monkeypatch.setattr(services, "_embed", embed_then_crash)

    assert tasks.document_index(document_id) == "retrying"
    document = Document.objects.get(pk=document_id)
    assert (document.status, document.error) == ("indexing", "worker killed mid-run")
    assert stored_chunks(document_id) == []
    progress = DocumentIndexing.objects.get(pk=document_id)
    assert (progress.attempts, progress.chunks_embedded, progress.chunks_total) == (1, 2, len(expected_chunks(TEXT)))

    monkeypatch.setattr(services, "_embed", real_embed)
    fake_openai.requests.clear()
    assert tasks.document_index(document_id) == "ready"

    expected = expected_chunks(TEXT)
    assert stored_chunks(document_id) == list(enumerate(expected))  # each once, in order
    sent = [text for request in fake_openai.requests_to("/v1/embeddings") for text in request["body"]["input"]]
    assert sorted(sent) == sorted(expected[2:])  # the first batch's vectors came from the cache


def test_a_document_whose_indexing_keeps_failing_is_retried_with_backoff_then_failed_and_can_be_retried(
    api, queued, openai_settings, fake_openai
):
    openai_settings.KB_INDEX_MAX_ATTEMPTS = 3
    openai_settings.KB_INDEX_RETRY_BASE_SECONDS = 60
    openai_settings.OPENAI_MAX_RETRIES = 0
    document_id = queued(api).json()["document"]["id"]
    fake_openai.fail_next(*[Failure(status=500)] * 3)
    delays = []

    for _ in range(2):
        started = timezone.now()
        assert tasks.document_index(document_id) == "retrying"
        finished, due = timezone.now(), DocumentIndexing.objects.get(pk=document_id).next_attempt_at
        delays.append(((due - finished).total_seconds(), (due - started).total_seconds()))
        assert tasks.documents_indexing_requeue() == 0  # not due yet
        DocumentIndexing.objects.filter(pk=document_id).update(next_attempt_at=timezone.now())
        OrmQ.objects.all().delete()
        assert tasks.documents_indexing_requeue() == 1  # due: queued again
        assert get_broker().queue_size() == 1
    # base x 2^(attempt - 1), counted from the failure, which came between the start and the end of the run
    since_end, since_start = zip(*delays, strict=True)
    assert since_end[0] <= 60 <= since_start[0]
    assert since_end[1] <= 120 <= since_start[1]

    assert tasks.document_index(document_id) == "failed"
    polled = api.get(f"/api/v1/kb/documents/{document_id}").json()
    assert polled["status"] == "failed"
    assert "500" in polled["error"]
    assert (polled["indexing"]["attempts"], polled["indexing"]["max_attempts"]) == (3, 3)
    DocumentIndexing.objects.filter(pk=document_id).update(next_attempt_at=timezone.now() - timedelta(hours=1))
    OrmQ.objects.all().delete()
    assert tasks.documents_indexing_requeue() == 0  # failed stays failed
    assert tasks.document_index(document_id) == "idle"

    retried = api.post(f"/api/v1/kb/documents/{document_id}/retry")

    assert retried.status_code == 202
    assert (retried.json()["status"], retried.json()["error"]) == ("indexing", "")
    assert tasks.document_index(document_id) == "ready"  # the endpoint answers again
    assert [text for _, text in stored_chunks(document_id)] == expected_chunks(TEXT)
    again = api.post(f"/api/v1/kb/documents/{document_id}/retry")
    assert (again.status_code, again.json()["error"]["code"]) == (409, "conflict")


def test_a_long_upload_while_the_broker_is_down_is_stored_and_the_sweep_queues_it_when_it_is_back(
    api, monkeypatch, tmp_path, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "BROKER_CLASS", None)
    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "REDIS", f"unix://{tmp_path}/nobody-listens.sock")

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/v1/kb/documents", {"doc_id": "handbook.md", "text": TEXT}, format="json")

    assert response.status_code == 202
    document_id = response.json()["document"]["id"]
    assert Document.objects.get(pk=document_id).status == "indexing"
    assert DocumentIndexing.objects.get(pk=document_id).next_attempt_at <= timezone.now()  # due at once
    assert tasks.documents_indexing_requeue() == 0  # still down: the next run tries again

    with redis_server(tmp_path) as url:
        monkeypatch.setattr(Conf, "REDIS", url)
        assert tasks.documents_indexing_requeue() == 1
        assert get_broker().queue_size() == 1
        assert tasks.documents_indexing_requeue() == 0  # queued: not again until the stall timeout
    assert tasks.document_index(document_id) == "ready"


def test_the_sweep_leaves_a_running_indexing_alone(api, queued, monkeypatch):
    document_id = queued(api).json()["document"]["id"]
    OrmQ.objects.all().delete()
    DocumentIndexing.objects.filter(pk=document_id).update(next_attempt_at=timezone.now())
    swept = []

    def embed_and_sweep(tenant, rows):
        if not swept:
            swept.append(tasks.documents_indexing_requeue())
        real_embed(tenant, rows)

    real_embed = services._embed
    monkeypatch.setattr(services, "_embed", embed_and_sweep)

    assert tasks.document_index(document_id) == "ready"
    assert swept == [0]


@pytest.mark.parametrize(
    ("name", "content", "status", "code"),
    [
        ("handbook.md", b"\xff\xfe not utf-8 " * 200, 400, "unreadable_document"),
        ("handbook.exe", b"MZ" + b"\x00" * 4000, 415, "unsupported_file_type"),
    ],
)
def test_a_bad_long_upload_is_refused_with_nothing_stored_or_queued(api, tenant, queued, name, content, status, code):
    response = api.post("/api/v1/kb/documents", {"file": SimpleUploadedFile(name, content)}, format="multipart")

    assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert not Document.objects.filter(tenant=tenant).exists()
    assert not DocumentIndexing.objects.exists()
    assert get_broker().queue_size() == 0


def test_a_long_text_with_bad_fields_is_refused_before_anything_is_stored(api, tenant, queued):
    response = queued(api, content_type="docx")

    assert response.status_code == 400
    assert not Document.objects.filter(tenant=tenant).exists()
    assert get_broker().queue_size() == 0


def test_a_document_deleted_or_replaced_inline_while_it_waits_leaves_its_run_nothing_to_do(api, queued):
    deleted = queued(api, doc_id="gone.md").json()["document"]["id"]
    replaced = queued(api, doc_id="short.md").json()["document"]["id"]

    assert api.delete(f"/api/v1/kb/documents/{deleted}").status_code == 204
    inline = queued(api, doc_id="short.md", text="# Short\n\nNow short about zanzibar.\n")
    assert (inline.status_code, inline.json()["document"]["status"]) == (201, "ready")  # it never had chunks

    assert tasks.document_index(deleted) == "idle"
    assert tasks.document_index(replaced) == "idle"
    assert [text for _, text in stored_chunks(replaced)] == expected_chunks("# Short\n\nNow short about zanzibar.\n")
    assert not DocumentIndexing.objects.exists()


def test_other_tenants_neither_see_nor_retry_a_document_indexing(api, queued, other_tenant_and_key):
    other = client_with_key(other_tenant_and_key[1])
    document_id = queued(api).json()["document"]["id"]

    assert other.get(f"/api/v1/kb/documents/{document_id}").status_code == 404
    assert other.post(f"/api/v1/kb/documents/{document_id}/retry").status_code == 404
    assert tasks.document_index(document_id) == "ready"
    assert search(other, "zanzibar") == []


def test_the_sweep_runs_every_minute_on_a_schedule_declared_once():
    for _ in range(2):
        call_command("setup_schedules", stdout=StringIO())

    [schedule] = Schedule.objects.filter(name="kb-indexing-requeue")
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == (
        "kb.tasks.documents_indexing_requeue",
        Schedule.MINUTES,
        1,
    )


NICE_PROBE = """
import os, threading
import django
django.setup()
from django_q.conf import Conf
from kb import tasks
other = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)  # a thread started before
other.start()
before = os.getpriority(os.PRIO_PROCESS, 0)
Conf.SYNC = True
tasks._lower_priority_once()
in_sync = os.getpriority(os.PRIO_PROCESS, 0)
Conf.SYNC = False
tasks._lower_priority_once()
tasks._lower_priority_once()
print(before, in_sync, os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(os.PRIO_PROCESS, other.native_id))
"""


def test_the_worker_lowers_the_priority_of_its_every_thread_once_and_a_synchronous_queue_never():
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "memoryproject.settings_test", "KB_WORKER_NICE": "5"}
    probe = subprocess.run(
        [sys.executable, "-c", NICE_PROBE], capture_output=True, text=True, env=environment, timeout=120, check=True
    )

    before, in_sync, after, other_thread = map(int, probe.stdout.split())
    assert in_sync == before  # tasks run in the web process then: never nice it
    assert after == other_thread == min(before + 5, 19)  # once, however many tasks ran
