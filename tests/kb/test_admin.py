"""Staff look at documents with their chunk counts, re-index them from their files, delete them."""

import pytest

from kb.loaders import load_document
from kb.models import Document, KBChunk
from kb.selectors import document_by_doc_id
from kb.services import document_index, document_index_loaded
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

GUIDE = "# Guide\n\n## Limits\n\n100 requests per minute.\n\n## Support\n\nWrite to ops.\n"


@pytest.fixture
def from_file(tenant, tmp_path):
    path = tmp_path / "guide.md"
    path.write_text(GUIDE)
    result = document_index_loaded(tenant=tenant, doc_id="guide.md", loaded=load_document(path), source_path=str(path))
    return result.document, path


@pytest.fixture
def uploaded(tenant):
    return document_index(tenant=tenant, doc_id="uploaded.md", text="# Up\n\nloaded", content_type="markdown").document


def action(client, name, documents):
    return client.post(
        "/admin/kb/document/", {"action": name, "_selected_action": [d.pk for d in documents]}, follow=True
    )


def test_the_list_shows_chunk_counts_and_only_the_staff_members_tenants(staff_of_acme, from_file, uploaded):
    other = make_tenant("globex")[0]
    document_index(tenant=other, doc_id="globex-secret.md", text="# Secret\n\nplans", content_type="markdown")

    page = staff_of_acme.get("/admin/kb/document/").content.decode()

    assert f'?document__id__exact={from_file[0].pk}">2</a>' in page
    assert f'?document__id__exact={uploaded.pk}">1</a>' in page
    assert "globex-secret.md" not in page


def test_the_chunk_link_lists_the_documents_chunks(staff_of_acme, from_file):
    document, _ = from_file

    response = staff_of_acme.get(f"/admin/kb/kbchunk/?document__id__exact={document.pk}")

    assert response.status_code == 200
    assert "2 KB chunks" in response.content.decode()


def test_reindex_picks_up_an_edited_file_and_reports_documents_without_one(staff_of_acme, tenant, from_file, uploaded):
    document, path = from_file
    path.write_text(GUIDE.replace("100 requests", "500 requests"))

    response = action(staff_of_acme, "reindex", [document, uploaded])

    page = response.content.decode()
    assert "Re-indexed 1 item(s)." in page
    assert "uploaded.md was uploaded, not indexed from a file: nothing to re-read." in page
    texts = KBChunk.objects.filter(tenant=tenant, document=document).values_list("text", flat=True)
    assert any("500 requests" in text for text in texts)


def test_reindex_reports_a_file_that_is_gone(staff_of_acme, from_file):
    document, path = from_file
    path.unlink()

    page = action(staff_of_acme, "reindex", [document]).content.decode()

    assert "Re-indexed 0 item(s)." in page
    assert f"Cannot read {path}: file not found." in page
    assert KBChunk.objects.filter(document=document).count() == 2  # what was indexed stays


def test_deleting_asks_for_confirmation_counting_the_chunks(staff_of_acme, from_file):
    document, _ = from_file

    confirm = staff_of_acme.post(
        "/admin/kb/document/", {"action": "delete_selected", "_selected_action": [document.pk]}
    ).content.decode()
    single = staff_of_acme.get(f"/admin/kb/document/{document.pk}/delete/").content.decode()

    for page in (confirm, single):
        assert "KB chunks: 2" in page
        assert "guide.md" in page
    assert Document.objects.filter(pk=document.pk).exists()


def test_the_delete_action_removes_documents_and_chunks(staff_of_acme, tenant, from_file, uploaded):
    document, _ = from_file

    response = staff_of_acme.post(
        "/admin/kb/document/",
        {"action": "delete_selected", "_selected_action": [document.pk], "post": "yes"},
        follow=True,
    )

    assert response.status_code == 200
    assert document_by_doc_id(tenant=tenant, doc_id="guide.md") is None
    assert not KBChunk.objects.filter(document_id=document.pk).exists()
    assert Document.objects.filter(pk=uploaded.pk).exists()


def test_chunks_are_read_only(staff_of_acme, from_file):
    chunk = KBChunk.objects.filter(document=from_file[0]).first()

    page = staff_of_acme.get(f"/admin/kb/kbchunk/{chunk.pk}/change/")
    staff_of_acme.post(f"/admin/kb/kbchunk/{chunk.pk}/change/", {"text": "rewritten"})

    assert page.status_code == 200
    assert 'name="text"' not in page.content.decode()
    assert KBChunk.objects.get(pk=chunk.pk).text == chunk.text


def test_a_documents_page_only_shows_it(staff_of_acme, from_file):
    document, _ = from_file

    page = staff_of_acme.get(f"/admin/kb/document/{document.pk}/change/")
    saved = staff_of_acme.post(f"/admin/kb/document/{document.pk}/change/", {})

    assert page.status_code == 200
    assert "guide.md" in page.content.decode()
    assert saved.status_code == 403
    assert Document.objects.get(pk=document.pk).updated_at == document.updated_at
