"""Indexing documents into the knowledge base: chunks stored with citations, incremental re-indexing, pruning."""

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from ai.embedders import HashEmbedder
from kb.models import Document, KBChunk
from kb.selectors import document_by_doc_id, document_chunks, documents_list
from kb.services import CHUNKER_VERSION, document_delete, document_index, documents_prune
from tests.factories import make_tenant

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
def embed_calls(monkeypatch):
    """The texts of every call to the (deterministic) embedder, one list per call."""
    calls: list[list[str]] = []
    embed = HashEmbedder.embed

    def counting_embed(self, texts):
        calls.append(list(texts))
        return embed(self, texts)

    monkeypatch.setattr(HashEmbedder, "embed", counting_embed)
    return calls


@pytest.fixture
def other_tenant(db):
    return make_tenant("globex")[0]


def index_guide(tenant, text=GUIDE, **options):
    return document_index(tenant=tenant, doc_id="guide.md", text=text, content_type="markdown", **options)


def chunk_texts(tenant, doc_id="guide.md") -> list[str]:
    document = document_by_doc_id(tenant=tenant, doc_id=doc_id)
    return [chunk.text for chunk in document_chunks(tenant=tenant, document=document)]


def test_a_new_document_is_stored_with_heading_paths_line_ranges_and_vectors(tenant, embed_calls):
    result = index_guide(tenant, title="Guide", source_path="/srv/docs/guide.md")

    assert (result.outcome, result.chunks, result.written) == ("new", 3, True)
    assert len(embed_calls) == 1  # one call for the whole document
    chunks = list(document_chunks(tenant=tenant, document=result.document))
    assert [(c.ordinal, c.heading_path, c.line_start, c.line_end) for c in chunks] == [
        (0, "Guide", 1, 3),
        (1, "Guide > Rate limits", 5, 8),
        (2, "Guide > Support", 10, 12),
    ]
    rate_limits = chunks[1]
    assert rate_limits.text == "\n".join(GUIDE.split("\n")[4:8])
    assert (rate_limits.tenant_id, rate_limits.embedding_model, len(rate_limits.embedding)) == (
        tenant.pk,
        "hash-v2",
        384,
    )
    assert len(rate_limits.content_hash) == 64
    document = result.document
    assert (document.title, document.source_path, document.size_bytes) == ("Guide", "/srv/docs/guide.md", len(GUIDE))
    assert document.metadata["_chunking"] == {"version": 2, "max_tokens": 400, "overlap_tokens": 50}


def test_indexing_leaves_nothing_pending_in_the_keyword_index(tenant):
    """Every search would scan what is pending (every tenant's new chunks), until a vacuum merged it."""
    for n in range(20):
        document_index(tenant=tenant, doc_id=f"guide-{n}", text=f"{GUIDE}\nEdition {n}.", content_type="markdown")

    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('kbchunk_search_vector_gin'::regclass)")
        assert cursor.fetchone()[0] == 0  # pages it had to merge


def test_indexing_the_same_text_again_embeds_and_writes_nothing(tenant, embed_calls):
    first = index_guide(tenant)
    chunk_ids = list(KBChunk.objects.filter(tenant=tenant).values_list("pk", flat=True))
    embed_calls.clear()

    again = index_guide(tenant)

    assert (again.outcome, again.chunks, again.written) == ("unchanged", 0, False)
    assert embed_calls == []
    assert list(KBChunk.objects.filter(tenant=tenant).values_list("pk", flat=True)) == chunk_ids
    assert Document.objects.get(pk=first.document.pk).updated_at == first.document.updated_at


def test_new_chunking_parameters_rechunk_an_unchanged_text(tenant):
    index_guide(tenant)

    result = index_guide(tenant, max_tokens=20, overlap_tokens=0)

    assert (result.outcome, result.written) == ("changed", True)
    assert result.document.metadata["_chunking"]["max_tokens"] == 20


def test_a_document_cut_by_an_older_chunker_is_rechunked(tenant):
    document = index_guide(tenant).document
    older = {**document.metadata["_chunking"], "version": CHUNKER_VERSION - 1}
    Document.objects.filter(pk=document.pk).update(metadata={**document.metadata, "_chunking": older})

    result = index_guide(tenant)

    assert (result.outcome, result.written) == ("changed", True)
    assert result.document.metadata["_chunking"]["version"] == CHUNKER_VERSION


def test_an_edited_document_replaces_its_chunks(tenant):
    index_guide(tenant)

    result = index_guide(tenant, text=GUIDE.replace("100 requests", "500 requests"))

    assert result.outcome == "changed"
    assert "500 requests" in chunk_texts(tenant)[1]
    assert KBChunk.objects.filter(tenant=tenant).count() == 3
    assert Document.objects.filter(tenant=tenant).count() == 1


def test_an_edit_embeds_only_the_chunks_whose_text_changed(tenant, openai_settings, fake_openai):
    index_guide(tenant)
    fake_openai.requests.clear()

    index_guide(tenant, text=GUIDE.replace("100 requests", "500 requests"))

    sent = [text for request in fake_openai.requests_to("/v1/embeddings") for text in request["body"]["input"]]
    assert sent == [chunk_texts(tenant)[1]]


def test_chunks_embedded_by_another_model_are_reindexed(tenant):
    index_guide(tenant)
    KBChunk.objects.filter(tenant=tenant).update(embedding_model="old-model")

    result = index_guide(tenant)

    assert result.outcome == "changed"
    assert set(KBChunk.objects.filter(tenant=tenant).values_list("embedding_model", flat=True)) == {"hash-v2"}


def test_a_moved_source_updates_the_document_without_reembedding(tenant, embed_calls):
    index_guide(tenant, source_path="/old/guide.md")
    embed_calls.clear()

    result = index_guide(tenant, source_path="/new/guide.md")

    assert (result.outcome, result.written, embed_calls) == ("unchanged", True, [])
    assert document_by_doc_id(tenant=tenant, doc_id="guide.md").source_path == "/new/guide.md"


def test_an_empty_document_is_stored_without_chunks(tenant, embed_calls):
    result = document_index(tenant=tenant, doc_id="empty.txt", text="\n\n", content_type="text")

    assert (result.outcome, result.chunks) == ("new", 0)
    assert document_by_doc_id(tenant=tenant, doc_id="empty.txt") is not None
    assert not KBChunk.objects.filter(tenant=tenant).exists()
    assert document_index(tenant=tenant, doc_id="empty.txt", text="\n\n", content_type="text").outcome == "unchanged"


def test_a_dry_run_reports_the_outcome_but_writes_and_embeds_nothing(tenant, embed_calls):
    result = index_guide(tenant, dry_run=True)

    assert (result.outcome, result.chunks, result.written, result.document) == ("new", 3, False, None)
    assert not Document.objects.exists()
    assert embed_calls == []


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"doc_id": ""}, "doc_id"),
        ({"content_type": "spreadsheet"}, "content_type"),
        ({"text": "a\x00b"}, "text"),
        ({"max_tokens": 5}, "max_tokens"),
        ({"overlap_tokens": 400}, "overlap_tokens"),
    ],
)
def test_invalid_input_is_refused_before_anything_is_embedded(tenant, embed_calls, options, field):
    arguments = {"doc_id": "guide.md", "text": GUIDE, "content_type": "markdown", **options}

    with pytest.raises(ValidationError) as error:
        document_index(tenant=tenant, **arguments)

    assert field in error.value.message_dict
    assert embed_calls == []
    assert not Document.objects.exists()


def test_the_same_doc_id_in_two_tenants_is_two_documents(tenant, other_tenant):
    index_guide(tenant)
    index_guide(other_tenant, text=GUIDE.replace("Guide", "Handbook"))

    assert chunk_texts(tenant)[0].startswith("# Guide")
    assert chunk_texts(other_tenant)[0].startswith("# Handbook")
    assert index_guide(tenant).outcome == "unchanged"


def test_delete_removes_a_document_and_its_chunks_in_one_tenant_only(tenant, other_tenant):
    index_guide(tenant)
    index_guide(other_tenant)

    assert document_delete(tenant=tenant, doc_id="guide.md") is True
    assert document_delete(tenant=tenant, doc_id="guide.md") is False

    assert not KBChunk.objects.filter(tenant=tenant).exists()
    assert document_by_doc_id(tenant=other_tenant, doc_id="guide.md") is not None


def test_prune_deletes_only_unkept_documents_under_the_root_of_that_tenant(tenant, other_tenant):
    for doc_id, source_path in [
        ("a.md", "/srv/docs/a.md"),
        ("gone.md", "/srv/docs/sub/gone.md"),
        ("elsewhere.md", "/srv/docs-old/elsewhere.md"),
        ("uploaded.md", ""),
    ]:
        document_index(tenant=tenant, doc_id=doc_id, text=doc_id, content_type="markdown", source_path=source_path)
    document_index(
        tenant=other_tenant, doc_id="gone.md", text="x", content_type="markdown", source_path="/srv/docs/gone.md"
    )

    would = documents_prune(tenant=tenant, keep_doc_ids=["a.md"], source_root="/srv/docs", dry_run=True)
    removed = documents_prune(tenant=tenant, keep_doc_ids=["a.md"], source_root="/srv/docs")

    assert would == removed == ["gone.md"]
    assert [d.doc_id for d in documents_list(tenant=tenant)] == ["a.md", "elsewhere.md", "uploaded.md"]
    assert document_by_doc_id(tenant=other_tenant, doc_id="gone.md") is not None
