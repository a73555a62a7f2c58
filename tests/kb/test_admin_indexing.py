"""Staff see a document's indexing status and error, and queue a failed indexing again through the same service
as the API's retry."""

import pytest

from kb.models import Document, DocumentIndexing
from kb.services import document_index

pytestmark = pytest.mark.django_db

LONG = "# Handbook\n\n" + "On call rotates weekly. " * 60


@pytest.fixture
def failed(tenant):
    document = document_index(
        tenant=tenant, doc_id="handbook.md", text=LONG, content_type="markdown", background=True
    ).document
    Document.objects.filter(pk=document.pk).update(status="failed", error="The embedding endpoint answered 500.")
    DocumentIndexing.objects.filter(pk=document.pk).update(attempts=4)
    return document


@pytest.fixture
def ready(tenant):
    return document_index(tenant=tenant, doc_id="ready.md", text="# Ready\n\nshort", content_type="markdown").document


def test_the_list_and_the_page_show_the_status_and_the_error(staff_of_acme, failed):
    listing = staff_of_acme.get("/admin/kb/document/?status__exact=failed").content.decode()
    page = staff_of_acme.get(f"/admin/kb/document/{failed.pk}/change/").content.decode()

    assert "handbook.md" in listing
    assert "The embedding endpoint answered 500." in page


def test_the_retry_action_queues_failed_documents_and_reports_ready_ones(staff_of_acme, failed, ready):
    response = staff_of_acme.post(
        "/admin/kb/document/", {"action": "retry_indexing", "_selected_action": [failed.pk, ready.pk]}, follow=True
    )

    page = response.content.decode()
    assert "Queued again 1 item(s)." in page
    assert "this document is ready" in page
    failed.refresh_from_db()
    assert (failed.status, failed.error) == ("indexing", "")
    assert DocumentIndexing.objects.get(pk=failed.pk).attempts == 0
