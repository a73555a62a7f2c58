from collections import defaultdict

from django.contrib import admin
from django.utils.html import format_html

from core.admin import apply_to_each, staff_actor
from tenancy.admin import TenantListFilter, TenantScopedAdmin

from . import services
from .models import Fact, FactConflict, FactEvent


@admin.register(Fact)
class FactAdmin(TenantScopedAdmin):
    list_display = ["id", "content", "user_id", "category", "status", "confidence", "usage_count", "valid_to", "tenant"]
    list_filter = ["status", "category", "source", "pinned", TenantListFilter]
    search_fields = ["content", "user_id"]
    readonly_fields = [
        "embedding_model",
        "usage_count",
        "last_used_at",
        "reviewed_at",
        "archived_at",
        "created_at",
        "updated_at",
    ]
    exclude = ["embedding"]
    raw_id_fields = ["source_episode", "superseded_by"]
    actions = ["approve", "reject", "restore"]

    # Deleting (the built-in action and the delete button) goes through the same service as the API, with its event.
    def delete_model(self, request, obj):
        services.fact_delete(tenant=obj.tenant, fact_id=obj.pk, actor=staff_actor(request))

    def delete_queryset(self, request, queryset):
        by_tenant = defaultdict(list)
        for fact in queryset.select_related("tenant").order_by("pk"):
            by_tenant[fact.tenant].append(fact.pk)
        for tenant, ids in by_tenant.items():
            services.facts_delete(tenant=tenant, fact_ids=ids, actor=staff_actor(request))

    @admin.action(description="Approve selected facts")
    def approve(self, request, queryset):
        actor = staff_actor(request)
        apply_to_each(
            self,
            request,
            queryset,
            "Approved",
            lambda fact: services.fact_approve(tenant=fact.tenant, fact_id=fact.pk, actor=actor),
        )

    @admin.action(description="Reject selected facts")
    def reject(self, request, queryset):
        actor = staff_actor(request)
        apply_to_each(
            self,
            request,
            queryset,
            "Rejected",
            lambda fact: services.fact_reject(tenant=fact.tenant, fact_id=fact.pk, actor=actor),
        )

    @admin.action(description="Restore selected archived facts")
    def restore(self, request, queryset):
        actor = staff_actor(request)
        apply_to_each(
            self,
            request,
            queryset,
            "Restored",
            lambda fact: services.fact_restore(tenant=fact.tenant, fact_id=fact.pk, actor=actor),
        )


@admin.register(FactEvent)
class FactEventAdmin(TenantScopedAdmin):
    list_display = ["created_at", "fact_id", "action", "actor", "user_id", "tenant"]
    list_filter = ["action", TenantListFilter]
    search_fields = ["user_id", "=fact_id"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # the audit trail is append-only


@admin.register(FactConflict)
class FactConflictAdmin(TenantScopedAdmin):
    list_display = ["id", "existing", "new", "reason", "status", "resolution", "user_id", "tenant"]
    list_filter = ["status", TenantListFilter]
    list_select_related = ["existing_fact", "new_fact"]
    raw_id_fields = ["existing_fact", "new_fact"]
    actions = ["keep_new", "keep_old", "keep_both"]

    @admin.display(description="Existing fact")
    def existing(self, conflict):
        return format_html("#{} {}", conflict.existing_fact_id, conflict.existing_fact.content)

    @admin.display(description="New fact")
    def new(self, conflict):
        return format_html("#{} {}", conflict.new_fact_id, conflict.new_fact.content)

    def _resolve(self, request, queryset, resolution: str):
        actor = staff_actor(request)
        apply_to_each(
            self,
            request,
            queryset,
            f"Resolved ({resolution})",
            lambda conflict: services.conflict_resolve(
                tenant=conflict.tenant, conflict_id=conflict.pk, resolution=resolution, actor=actor
            ),
        )

    @admin.action(description="Resolve: keep the new fact (supersede the old)")
    def keep_new(self, request, queryset):
        self._resolve(request, queryset, FactConflict.Resolution.KEEP_NEW)

    @admin.action(description="Resolve: keep the old fact (reject the new)")
    def keep_old(self, request, queryset):
        self._resolve(request, queryset, FactConflict.Resolution.KEEP_OLD)

    @admin.action(description="Resolve: keep both")
    def keep_both(self, request, queryset):
        self._resolve(request, queryset, FactConflict.Resolution.KEEP_BOTH)
