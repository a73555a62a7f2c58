from django.contrib import admin

from memoryproject.tenancy.admin import TenantScopedAdmin

from .models import Document, KBChunk


@admin.register(Document)
class DocumentAdmin(TenantScopedAdmin):
    list_display = ["doc_id", "title", "content_type", "size_bytes", "updated_at", "tenant"]
    list_filter = ["tenant", "content_type"]
    search_fields = ["doc_id", "title"]


@admin.register(KBChunk)
class KBChunkAdmin(TenantScopedAdmin):
    list_display = ["document", "ordinal", "heading_path", "line_start", "line_end", "tenant"]
    list_filter = ["tenant"]
    search_fields = ["text", "heading_path"]
    exclude = ["embedding"]
    raw_id_fields = ["document"]
