from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html

from core.admin import ActionsOnlyAdmin, apply_to_each
from tenancy.admin import TenantListFilter, TenantScopedAdmin

from . import services
from .models import Document, KBChunk


@admin.register(Document)
class DocumentAdmin(ActionsOnlyAdmin, TenantScopedAdmin):
    """Documents are written by indexing (index_docs, the API); here they are looked at, re-indexed, deleted."""

    list_display = ["doc_id", "title", "content_type", "status", "chunks", "size_bytes", "updated_at", "tenant"]
    list_filter = [TenantListFilter, "status", "content_type"]
    search_fields = ["doc_id", "title"]
    fields = [
        "tenant", "doc_id", "title", "content_type", "source_path", "content_hash", "size_bytes", "metadata",
        "status", "error", "created_at", "updated_at",
    ]  # fmt: skip
    actions = ["reindex", "retry_indexing"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(chunk_count=Count("chunks"))

    def has_add_permission(self, request):
        return False

    @admin.display(description="Chunks", ordering="chunk_count")
    def chunks(self, document):
        url = reverse("admin:kb_kbchunk_changelist") + f"?document__id__exact={document.pk}"
        return format_html('<a href="{}">{}</a>', url, document.chunk_count)

    @admin.action(description="Re-index selected documents from their source files", permissions=["change"])
    def reindex(self, request, queryset):
        apply_to_each(
            self,
            request,
            queryset,
            "Re-indexed",
            lambda document: services.document_reindex(tenant=document.tenant, document_id=document.pk),
        )

    @admin.action(description="Retry the indexing of selected failed documents", permissions=["change"])
    def retry_indexing(self, request, queryset):
        apply_to_each(
            self,
            request,
            queryset,
            "Queued again",
            lambda document: services.document_index_retry(tenant=document.tenant, document_id=document.pk),
        )

    def get_deleted_objects(self, objs, request):
        # Chunks go with their document: the confirmation page counts them instead of listing each one, and
        # deleting a document needs no permission on chunks (their admin is read only).
        documents = list(objs)
        chunks = KBChunk.objects.filter(document__in=documents).count()
        counts = {Document._meta.verbose_name_plural: len(documents), KBChunk._meta.verbose_name_plural: chunks}
        return [str(document) for document in documents], counts, set(), []

    # Deleting (the built-in action and the delete button) goes through the same service as the API.
    def delete_model(self, request, obj):
        services.document_delete_by_id(tenant=obj.tenant, document_id=obj.pk)

    def delete_queryset(self, request, queryset):
        for document in queryset.select_related("tenant").order_by("pk"):
            services.document_delete_by_id(tenant=document.tenant, document_id=document.pk)


@admin.register(KBChunk)
class KBChunkAdmin(TenantScopedAdmin):
    """Read only: chunks change only when their document is re-indexed."""

    list_display = ["document", "ordinal", "heading_path", "line_start", "line_end", "token_count", "tenant"]
    list_filter = [TenantListFilter]
    list_select_related = ["document", "tenant"]
    search_fields = ["text", "heading_path", "document__doc_id"]
    exclude = ["embedding", "search_text"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
