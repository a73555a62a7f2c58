"""Uploads built to hold a worker: each is answered 202 at once, read by the worker in a child process under a time
and a memory limit, and ends ready or failed with the limit it broke, never stuck; the version stored before stays
searchable. How long each takes is measured by bench/kb_hostile.py, not asserted here."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from kb.models import Document
from kb.services import document_index
from tests.kb.hostile_files import markdown_of_headings, pdf_with_one_shared_stream, repeated_open_tags

pytestmark = pytest.mark.django_db


@pytest.fixture
def upload(api, django_capture_on_commit_callbacks):
    """POST a file; the worker's task runs when the request's transaction commits (inline in the tests)."""

    def post(name: str, content: bytes, **fields):
        with django_capture_on_commit_callbacks(execute=True):
            return api.post(
                "/api/v1/kb/documents", {"file": SimpleUploadedFile(name, content), **fields}, format="multipart"
            )

    return post


def outcome(api, response) -> dict:
    assert response.status_code == 202, response.content
    return api.get(response["Location"]).json()


def test_html_of_repeated_open_tags_is_read_in_linear_time_by_the_worker(api, upload):
    detail = outcome(api, upload("tags.html", repeated_open_tags(400_000)))

    assert detail["status"] == "ready"
    assert detail["chunks"] == []  # it holds no text


def test_a_pdf_whose_pages_share_one_huge_stream_fails_at_the_time_limit(api, upload, settings):
    settings.KB_PARSE_TIMEOUT_SECONDS = 2

    detail = outcome(api, upload("bomb.pdf", pdf_with_one_shared_stream()))

    assert detail["status"] == "failed"
    assert detail["error"] == "cannot load bomb.pdf: reading it took longer than 2 s (KB_PARSE_TIMEOUT_SECONDS)"


def test_a_reader_past_its_memory_limit_fails_naming_it(api, upload, settings):
    settings.KB_PARSE_MAX_MEMORY_MB = 120

    detail = outcome(api, upload("bomb.pdf", pdf_with_one_shared_stream()))

    assert detail["status"] == "failed"
    assert detail["error"] == "cannot load bomb.pdf: reading it needed more than 120 MB (KB_PARSE_MAX_MEMORY_MB)"


def test_a_pdf_over_the_page_limit_fails_before_any_page_is_read(api, upload, settings):
    settings.KB_MAX_PDF_PAGES = 10

    detail = outcome(api, upload("long.pdf", pdf_with_one_shared_stream(pages=30)))

    assert detail["status"] == "failed"
    assert detail["error"] == "cannot load long.pdf: 30 pages; the limit is 10 (KB_MAX_PDF_PAGES)"


def test_markdown_of_thousands_of_headings_fails_at_the_chunk_limit_and_stores_no_chunk(api, upload):
    detail = outcome(api, upload("headings.md", markdown_of_headings(24_000)))  # over the inline size: the worker

    assert detail["status"] == "failed"
    assert detail["error"].endswith("the limit is 2,000 a document (KB_MAX_CHUNKS_PER_DOCUMENT)")
    assert detail["chunks"] == []


def test_a_short_text_over_the_chunk_limit_is_refused_in_the_request(api, settings):
    settings.KB_MAX_CHUNKS_PER_DOCUMENT = 50

    response = api.post(
        "/api/v1/kb/documents",
        {"doc_id": "h.md", "text": markdown_of_headings(2_000).decode()},
        format="json",
    )

    assert response.status_code == 400
    assert "(KB_MAX_CHUNKS_PER_DOCUMENT)" in response.json()["error"]["message"]
    assert not Document.objects.filter(doc_id="h.md").exists()


def test_a_hostile_replacement_leaves_the_previous_version_searchable(api, upload, tenant, settings):
    settings.KB_PARSE_TIMEOUT_SECONDS = 2
    document_index(tenant=tenant, doc_id="manual.pdf", text="# Router\n\nReset the router first.", content_type="text")

    detail = outcome(api, upload("manual.pdf", pdf_with_one_shared_stream()))

    assert detail["status"] == "failed"
    hits = api.post("/api/v1/kb/search", {"query": "reset the router"}, format="json").json()["results"]
    assert [hit["doc_id"] for hit in hits] == ["manual.pdf"]


def test_a_format_past_its_own_byte_limit_is_413_before_anything_is_stored(api, upload, tenant, settings):
    settings.KB_MAX_UPLOAD_BYTES_BY_TYPE = {"html": 1000}

    response = upload("big.html", b"<p>" + b"x" * 2000 + b"</p>")
    small = upload("small.html", b"<p>Hello</p>")

    assert response.status_code == 413
    assert "(KB_MAX_UPLOAD_BYTES_BY_TYPE)" in response.json()["error"]["message"]
    assert small.status_code == 202
    assert list(Document.objects.filter(tenant=tenant).values_list("doc_id", flat=True)) == ["small.html"]
