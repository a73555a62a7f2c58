"""The knowledge-base API over HTTP: upload (text or file), list, get, delete, search; tenant isolation."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ai.embedders import HashEmbedder
from kb.models import Document, DocumentIndexing, KBChunk
from tests.factories import client_with_key
from tests.kb.test_loaders import minimal_pdf

pytestmark = pytest.mark.django_db

GUIDE = """\
# Guide

Intro text for the guide.

## Rate limits

Each key may send 100 requests per minute.
Bursts of 20 are absorbed.

## Support

Write to ops at example.com.
"""


@pytest.fixture
def other_api(other_tenant_and_key):
    return client_with_key(other_tenant_and_key[1])


def upload_text(client, doc_id="guide.md", text=GUIDE, **fields):
    return client.post("/api/v1/kb/documents", {"doc_id": doc_id, "text": text, **fields}, format="json")


def upload_file(client, name, content: bytes, **fields):
    return client.post(
        "/api/v1/kb/documents", {"file": SimpleUploadedFile(name, content), **fields}, format="multipart"
    )


def error_of(response) -> dict:
    return response.json()["error"]


# --- upload -------------------------------------------------------------------------------------------------------


def test_posting_text_creates_a_document_and_reposting_it_changes_nothing(api, tenant):
    created = upload_text(api)
    again = upload_text(api)

    assert created.status_code == 201
    body = created.json()
    assert (body["outcome"], body["chunks_written"]) == ("new", 3)
    document = body["document"]
    assert (document["doc_id"], document["title"], document["content_type"], document["chunk_count"]) == (
        "guide.md",
        "Guide",
        "markdown",
        3,
    )
    assert document["size_bytes"] == len(GUIDE)
    assert "_chunking" not in document["metadata"]
    assert again.status_code == 200
    assert (again.json()["outcome"], again.json()["chunks_written"], again.json()["document"]["chunk_count"]) == (
        "unchanged",
        0,
        3,
    )
    assert Document.objects.filter(tenant=tenant).count() == 1


def test_posting_changed_text_replaces_the_chunks(api, tenant):
    upload_text(api)

    response = upload_text(api, text=GUIDE.replace("## Support\n", "## Support\n\nCall us.\n\n## Status\n"))

    assert response.status_code == 200
    assert (response.json()["outcome"], response.json()["chunks_written"]) == ("changed", 4)
    assert KBChunk.objects.filter(tenant=tenant).count() == 4


def test_posted_html_is_read_by_the_worker_and_a_given_title_wins(api, django_capture_on_commit_callbacks):
    html = "<html><body><h1>Status</h1><p>All <b>systems</b> normal.</p></body></html>"

    with django_capture_on_commit_callbacks(execute=True):  # the worker's task (run inline by the test settings)
        response = upload_text(api, doc_id="status", text=html, content_type="html", title="Status page")

    assert response.status_code == 202  # stored; read, chunked and embedded by the worker
    document_id = response.json()["document"]["id"]
    detail = api.get(f"/api/v1/kb/documents/{document_id}").json()
    assert detail["title"] == "Status page"
    assert detail["content_type"] == "html"
    assert [chunk["text"] for chunk in detail["chunks"]] == ["# Status\n\nAll systems normal."]


def test_a_file_upload_takes_its_type_and_doc_id_from_the_file_name(api, django_capture_on_commit_callbacks):
    response = upload_file(api, "guide.md", GUIDE.encode())
    with django_capture_on_commit_callbacks(execute=True):
        pdf = upload_file(api, "manual.pdf", minimal_pdf([["Reset the router first."]]), doc_id="manuals/router")

    assert response.status_code == 201
    assert (response.json()["document"]["doc_id"], response.json()["document"]["chunk_count"]) == ("guide.md", 3)
    assert pdf.status_code == 202
    assert (pdf.json()["document"]["doc_id"], pdf.json()["document"]["content_type"]) == ("manuals/router", "pdf")
    hits = api.post("/api/v1/kb/search", {"query": "router reset"}, format="json").json()["results"]
    assert hits[0]["doc_id"] == "manuals/router"


def test_a_code_file_records_its_language(api):
    response = upload_file(api, "app.py", b"def greet(name):\n    return f'hello {name}'\n")

    assert response.status_code == 201
    assert response.json()["document"]["content_type"] == "code"
    assert response.json()["document"]["metadata"] == {"language": "python"}


def test_an_oversized_text_is_413_and_nothing_is_stored(api, tenant, settings):
    settings.KB_MAX_UPLOAD_BYTES = 1000

    response = upload_text(api, text="é" * 501)  # 1002 bytes as UTF-8

    assert response.status_code == 413
    error = error_of(response)
    assert error["code"] == "payload_too_large"
    assert error["message"] == "The document is 1,002 bytes; the limit is 1,000 bytes (KB_MAX_UPLOAD_BYTES)."
    assert error["details"] == {"size_bytes": 1002, "max_bytes": 1000}
    assert not Document.objects.filter(tenant=tenant).exists()


def test_an_oversized_file_is_413_and_nothing_is_stored(api, tenant, settings):
    settings.KB_MAX_UPLOAD_BYTES = 1000

    response = upload_file(api, "big.md", b"# Big\n\n" + b"word " * 300)

    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large"
    assert not Document.objects.filter(tenant=tenant).exists()


def test_a_body_far_over_the_limit_is_refused_before_it_is_parsed(api, settings):
    settings.KB_MAX_UPLOAD_BYTES = 1000
    body = json.dumps({"doc_id": "huge.md", "text": "x" * 200_000})

    response = api.generic("POST", "/api/v1/kb/documents", body, content_type="application/json")

    assert response.status_code == 413
    error = error_of(response)
    assert error["code"] == "payload_too_large"
    assert error["message"].startswith(f"The request body is {len(body):,} bytes")


def test_an_unsupported_file_type_is_415_naming_the_supported_ones(api, tenant):
    response = upload_file(api, "tool.exe", b"MZ\x90\x00")

    assert response.status_code == 415
    error = error_of(response)
    assert error["code"] == "unsupported_file_type"
    assert error["message"].startswith("Cannot index tool.exe: unsupported file type .exe. Supported extensions: ")
    assert ".md" in error["message"]
    assert ".pdf" in error["message"]
    assert not Document.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("latin1.txt", "café".encode("latin-1"), "not valid UTF-8 (byte 0xe9 at offset 3)"),
        ("blob.md", b"# Title\x00\x01", "binary content (NUL byte at offset 7)"),
    ],
)
def test_an_unreadable_file_is_400_with_the_reason(api, tenant, name, content, reason):
    response = upload_file(api, name, content)

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "unreadable_document"
    assert error["message"].startswith(f"Cannot read {name}: {reason}")
    assert not Document.objects.filter(tenant=tenant).exists()


def test_an_unreadable_pdf_ends_failed_with_the_reason_and_nothing_else_changes(
    api, tenant, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = upload_file(api, "broken.pdf", b"%PDF-1.4 this is not a pdf")

    assert response.status_code == 202
    detail = api.get(response["Location"]).json()
    assert detail["status"] == "failed"
    assert detail["error"].startswith("cannot load broken.pdf: broken PDF")
    assert DocumentIndexing.objects.get(document_id=detail["id"]).attempts == 1  # not retried: the file is the fault


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"text": GUIDE}, "doc_id"),
        ({"doc_id": "a.md"}, "text"),
        ({"doc_id": "a.md", "text": GUIDE, "content_type": "pdf"}, "content_type"),
        ({"doc_id": "bad\nid", "text": GUIDE}, "doc_id"),
        ({"doc_id": "x" * 501, "text": GUIDE}, "doc_id"),
    ],
)
def test_invalid_json_uploads_are_400_naming_the_field(api, tenant, payload, field):
    response = api.post("/api/v1/kb/documents", payload, format="json")

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "validation_error"
    assert field in error["details"]
    assert not Document.objects.filter(tenant=tenant).exists()


def test_a_text_with_an_unpaired_surrogate_is_400(api):
    body = '{"doc_id": "a.md", "text": "broken \\ud800 text"}'

    response = api.generic("POST", "/api/v1/kb/documents", body, content_type="application/json")

    assert response.status_code == 400
    assert error_of(response)["details"]["text"] == [
        "A lone surrogate (\\ud800-\\udfff) is not a character; found in text."
    ]


def test_a_multipart_upload_without_a_file_is_400(api):
    response = api.post("/api/v1/kb/documents", {"doc_id": "a.md"}, format="multipart")

    assert response.status_code == 400
    assert "file" in error_of(response)["details"]


def test_the_api_needs_a_key(db):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/kb/documents").status_code == 401
    assert APIClient().post("/api/v1/kb/search", {"query": "x"}, format="json").status_code == 401


# --- list, get, delete --------------------------------------------------------------------------------------------


def test_the_list_pages_through_documents_with_their_chunk_counts(api):
    for name in ["c.md", "a.md", "b.md"]:
        upload_text(api, doc_id=f"docs/{name}")
    upload_text(api, doc_id="other/z.md", text="# Z\n\nzed")

    first = api.get("/api/v1/kb/documents", {"limit": 2}).json()
    second = api.get(first["next"]).json()
    prefixed = api.get("/api/v1/kb/documents", {"path_prefix": "other/"}).json()

    assert [(d["doc_id"], d["chunk_count"]) for d in first["results"]] == [("docs/a.md", 3), ("docs/b.md", 3)]
    assert [(d["doc_id"], d["chunk_count"]) for d in second["results"]] == [("docs/c.md", 3), ("other/z.md", 1)]
    assert second["next"] is None
    assert [d["doc_id"] for d in prefixed["results"]] == ["other/z.md"]


def test_a_document_is_returned_with_its_chunks_in_reading_order(api):
    document_id = upload_text(api).json()["document"]["id"]

    response = api.get(f"/api/v1/kb/documents/{document_id}")

    assert response.status_code == 200
    body = response.json()
    assert body["chunk_count"] == 3
    assert [(c["ordinal"], c["heading_path"], c["line_start"], c["line_end"]) for c in body["chunks"]] == [
        (0, "Guide", 1, 3),
        (1, "Guide > Rate limits", 5, 8),
        (2, "Guide > Support", 10, 12),
    ]
    assert body["chunks"][1]["text"].startswith("## Rate limits\n\nEach key may send 100 requests")


def test_delete_removes_the_document_and_its_chunks(api, tenant):
    document_id = upload_text(api).json()["document"]["id"]

    response = api.delete(f"/api/v1/kb/documents/{document_id}")

    assert response.status_code == 204
    assert not Document.objects.filter(pk=document_id).exists()
    assert not KBChunk.objects.filter(tenant=tenant).exists()
    assert api.get(f"/api/v1/kb/documents/{document_id}").status_code == 404
    assert api.delete(f"/api/v1/kb/documents/{document_id}").status_code == 404


# --- search -------------------------------------------------------------------------------------------------------


def test_search_returns_passages_with_citations_and_score_breakdown(api):
    upload_text(api)
    upload_text(api, doc_id="notes/other.md", text="# Notes\n\n## Lunch\n\nThe canteen opens at noon.\n")

    response = api.post("/api/v1/kb/search", {"query": "requests per minute", "limit": 2}, format="json")

    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == 2
    top = results[0]
    assert (top["doc_id"], top["heading_path"], top["line_start"], top["line_end"]) == (
        "guide.md",
        "Guide > Rate limits",
        5,
        8,
    )
    assert top["citation"] == "doc:guide.md §Guide > Rate limits, lines 5-8"
    assert set(top["scores"]) == {"vector", "keyword", "final"}
    assert top["scores"]["keyword"] == 1.0
    assert top["score"] == top["scores"]["final"] >= results[1]["score"]


def test_a_tenant_without_documents_is_answered_without_embedding_the_query(api, monkeypatch):
    embedded = []
    monkeypatch.setattr(HashEmbedder, "embed", lambda self, texts: embedded.append(texts))

    response = api.post("/api/v1/kb/search", {"query": "requests per minute"}, format="json")

    assert response.status_code == 200
    assert response.json()["results"] == []
    assert response.json()["degraded"] == []
    assert embedded == []  # no provider call for a search with nothing to search


def test_search_filters_by_doc_ids_and_path_prefix(api):
    upload_text(api)
    upload_text(api, doc_id="notes/other.md", text="# Notes\n\n## Limits\n\nNo limits on lunch.\n")

    by_id = api.post("/api/v1/kb/search", {"query": "limits", "doc_ids": ["notes/other.md"]}, format="json")
    by_prefix = api.post("/api/v1/kb/search", {"query": "limits", "path_prefix": "guide"}, format="json")

    assert {hit["doc_id"] for hit in by_id.json()["results"]} == {"notes/other.md"}
    assert {hit["doc_id"] for hit in by_prefix.json()["results"]} == {"guide.md"}


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "query"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": 51}, "limit"),
        ({"query": "x", "doc_ids": []}, "doc_ids"),
        ({"query": "x", "doc_ids": "guide.md"}, "doc_ids"),
    ],
)
def test_invalid_searches_are_400(api, payload, field):
    response = api.post("/api/v1/kb/search", payload, format="json")

    assert response.status_code == 400
    assert field in error_of(response)["details"]


# --- tenant isolation ---------------------------------------------------------------------------------------------


@pytest.fixture
def theirs(other_api):
    """A document of the other tenant, with a term only it contains."""
    return other_api.post(
        "/api/v1/kb/documents",
        {"doc_id": "guide.md", "text": "# Globex guide\n\nGlobex keys send zorblax requests.\n"},
        format="json",
    ).json()["document"]


def test_another_tenants_document_is_404_on_get(api, theirs):
    response = api.get(f"/api/v1/kb/documents/{theirs['id']}")

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_another_tenants_document_is_404_on_delete_and_survives(api, theirs):
    response = api.delete(f"/api/v1/kb/documents/{theirs['id']}")

    assert response.status_code == 404
    assert Document.objects.filter(pk=theirs["id"]).exists()


def test_another_tenants_documents_are_not_listed(api, theirs):
    upload_text(api, doc_id="mine.md")

    listed = api.get("/api/v1/kb/documents").json()["results"]

    assert [document["doc_id"] for document in listed] == ["mine.md"]


def test_another_tenants_documents_are_never_searched(api, theirs):
    upload_text(api)

    anywhere = api.post("/api/v1/kb/search", {"query": "zorblax Globex"}, format="json").json()["results"]
    named = api.post("/api/v1/kb/search", {"query": "zorblax", "doc_ids": ["guide.md"]}, format="json").json()[
        "results"
    ]

    assert anywhere
    assert all("zorblax" not in hit["text"] for hit in anywhere)
    assert named
    assert all(hit["document_id"] != theirs["id"] for hit in named)


def test_uploading_the_same_doc_id_never_touches_another_tenants_document(api, theirs, tenant):
    response = upload_text(api, doc_id="guide.md")

    assert response.status_code == 201  # new for this tenant
    assert response.json()["document"]["id"] != theirs["id"]
    their_document = Document.objects.get(pk=theirs["id"])
    assert their_document.title == "Globex guide"
    assert KBChunk.objects.filter(document=their_document).count() == 1


def test_the_openapi_schema_lists_the_kb_endpoints(db):
    from rest_framework.test import APIClient

    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    assert {"/api/v1/kb/documents", "/api/v1/kb/documents/{document_id}", "/api/v1/kb/search"} <= set(schema["paths"])
    upload = schema["paths"]["/api/v1/kb/documents"]["post"]["requestBody"]["content"]
    assert {"application/json", "multipart/form-data"} <= set(upload)
