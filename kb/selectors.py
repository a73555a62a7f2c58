"""Reads of the knowledge base: documents and their chunks, always within one tenant."""

from pathlib import Path

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from memoryproject.tenancy.models import Tenant

from .models import Document, KBChunk


def documents_list(*, tenant: Tenant) -> QuerySet[Document]:
    """The tenant's documents, by doc id."""
    return Document.objects.filter(tenant=tenant).order_by("doc_id")


def document_get(*, tenant: Tenant, document_id: int) -> Document:
    """One document of `tenant`; a document of any other tenant is indistinguishable from a missing one (404)."""
    return get_object_or_404(Document.objects.filter(tenant=tenant), pk=document_id)


def document_by_doc_id(*, tenant: Tenant, doc_id: str) -> Document | None:
    return Document.objects.filter(tenant=tenant, doc_id=doc_id).first()


def documents_under_root(*, tenant: Tenant, source_root: Path | str) -> QuerySet[Document]:
    """The tenant's documents whose source_path lies inside the directory `source_root` (an absolute path)."""
    prefix = str(source_root).rstrip("/") + "/"  # "/docs" must not match "/docs-old/a.md"
    return Document.objects.filter(tenant=tenant, source_path__startswith=prefix).order_by("doc_id")


def document_chunks(*, tenant: Tenant, document: Document) -> QuerySet[KBChunk]:
    """A document's chunks in reading order."""
    return KBChunk.objects.filter(tenant=tenant, document=document).order_by("ordinal")
