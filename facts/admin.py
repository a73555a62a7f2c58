from django.contrib import admin

from memoryproject.tenancy.admin import TenantScopedAdmin

from .models import Fact, FactConflict, FactEvent


@admin.register(Fact)
class FactAdmin(TenantScopedAdmin):
    list_display = ["id", "content", "user_id", "category", "status", "confidence", "usage_count", "tenant"]
    list_filter = ["status", "category", "source", "pinned", "tenant"]
    search_fields = ["content", "user_id"]
    readonly_fields = ["embedding_model", "usage_count", "last_used_at", "created_at", "updated_at"]
    exclude = ["embedding"]
    raw_id_fields = ["source_episode", "superseded_by"]


@admin.register(FactEvent)
class FactEventAdmin(TenantScopedAdmin):
    list_display = ["created_at", "fact_id", "action", "actor", "user_id", "tenant"]
    list_filter = ["action", "tenant"]
    search_fields = ["user_id", "=fact_id"]

    def has_change_permission(self, request, obj=None):
        return False  # the audit trail is append-only


@admin.register(FactConflict)
class FactConflictAdmin(TenantScopedAdmin):
    list_display = ["id", "existing_fact", "new_fact", "status", "resolution", "user_id", "tenant"]
    list_filter = ["status", "tenant"]
    raw_id_fields = ["existing_fact", "new_fact"]
