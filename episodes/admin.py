from django.contrib import admin

from memoryproject.tenancy.admin import TenantScopedAdmin

from .models import Episode


@admin.register(Episode)
class EpisodeAdmin(TenantScopedAdmin):
    list_display = ["id", "user_id", "session_id", "extraction_status", "created_at", "tenant"]
    list_filter = ["extraction_status", "tenant"]
    search_fields = ["user_id", "session_id", "summary"]
    exclude = ["embedding"]
