from collections import defaultdict

from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from core.admin import ActionsOnlyAdmin, ServiceFormAdmin, apply_to_each, staff_actor, take_saved
from tenancy.admin import TenantListFilter, TenantScopedAdmin

from . import services
from .models import Fact, FactConflict, FactEvent

# What a person writes; the rest of a fact is the services' bookkeeping, shown read only.
EDITABLE_FIELDS = list(services.UPDATABLE_FIELDS)
REVIEW_FIELDS = [
    "status", "hold_reason", "source", "source_episode", "superseded_by", "valid_from", "valid_to", "usage_count",
    "last_used_at", "reviewed_at", "archived_at", "embedding_model", "embedding_summary", "created_at", "updated_at",
]  # fmt: skip


@admin.register(Fact)
class FactAdmin(ServiceFormAdmin, TenantScopedAdmin):
    """Added through fact_remember (embedded, deduplicated), edited through fact_update (re-embedded), reviewed
    through the actions, deleted through the deletion service: each with its event naming the staff user."""

    list_display = ["id", "content", "user_id", "category", "status", "confidence", "usage_count", "valid_to", "tenant"]
    list_filter = ["status", "category", "source", "pinned", TenantListFilter]
    search_fields = ["content", "user_id"]
    actions = ["approve", "reject", "restore"]

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [(None, {"fields": ["tenant", "user_id", *EDITABLE_FIELDS]})]
        return [
            (None, {"fields": ["tenant", "user_id", *EDITABLE_FIELDS]}),
            (
                "Review and history",
                {"fields": REVIEW_FIELDS, "description": "Changed by the review actions and the services only."},
            ),
        ]

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else ["tenant", "user_id", *REVIEW_FIELDS]

    @admin.display(description="embedding")
    def embedding_summary(self, fact):
        if fact.embedding_pending:
            return "pending: the embedding provider failed; found by keywords until it is embedded (retried)"
        if fact.embedding is None:
            return "none: search and deduplication do not see this fact"
        return f"{len(fact.embedding)} dimensions"

    def save_model(self, request, obj, form, change):
        actor = staff_actor(request)
        if change:
            changes = {name: form.cleaned_data[name] for name in EDITABLE_FIELDS if name in form.changed_data}
            if changes:
                take_saved(obj, services.fact_update(tenant=obj.tenant, fact_id=obj.pk, actor=actor, **changes))
            return
        data = form.cleaned_data
        result = services.fact_remember(
            tenant=data["tenant"],
            user_id=data["user_id"],
            source=Fact.Source.MANUAL,
            actor=actor,
            **{name: data[name] for name in EDITABLE_FIELDS},
        )
        take_saved(obj, result.fact)
        obj.remembered = result

    def log_addition(self, request, obj, message):
        if obj.remembered.outcome == "merged":  # nothing was added: the fact it merged into changed
            return self.log_change(request, obj, "Merged a duplicate added in the admin.")
        return super().log_addition(request, obj, message)

    def response_add(self, request, obj, post_url_continue=None):
        result = obj.remembered
        if result.outcome == "merged":
            url = reverse("admin:facts_fact_change", args=[obj.pk])
            self.message_user(
                request,
                format_html('Already known: merged into fact <a href="{}">#{}</a> “{}”.', url, obj.pk, obj.content),
                messages.WARNING,
            )
            return HttpResponseRedirect(url)
        response = super().response_add(request, obj, post_url_continue)
        if result.superseded_ids:
            self.message_user(request, f"It supersedes fact(s) {_ids(result.superseded_ids)}.")
        if result.conflict_ids:
            self.message_user(
                request,
                f"It contradicts what is known: it waits for review in conflict(s) {_ids(result.conflict_ids)}.",
                messages.WARNING,
            )
        return response

    # Deleting (the built-in action and the delete button) goes through the same service as the API, with its event.
    def delete_model(self, request, obj):
        services.fact_delete(tenant=obj.tenant, fact_id=obj.pk, actor=staff_actor(request))

    def delete_queryset(self, request, queryset):
        by_tenant = defaultdict(list)
        for fact in queryset.select_related("tenant").order_by("pk"):
            by_tenant[fact.tenant].append(fact.pk)
        for tenant, ids in by_tenant.items():
            services.facts_delete(tenant=tenant, fact_ids=ids, actor=staff_actor(request))

    def get_deleted_objects(self, objs, request):
        # A fact's conflicts go with it (the deletion service), though no one deletes a conflict on its own.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(FactConflict._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    @admin.action(description="Approve selected facts", permissions=["change"])
    def approve(self, request, queryset):
        actor = staff_actor(request)
        apply_to_each(
            self,
            request,
            queryset,
            "Approved",
            lambda fact: services.fact_approve(tenant=fact.tenant, fact_id=fact.pk, actor=actor),
        )

    @admin.action(description="Reject selected facts", permissions=["change"])
    def reject(self, request, queryset):
        actor = staff_actor(request)
        apply_to_each(
            self,
            request,
            queryset,
            "Rejected",
            lambda fact: services.fact_reject(tenant=fact.tenant, fact_id=fact.pk, actor=actor),
        )

    @admin.action(description="Restore selected archived facts", permissions=["change"])
    def restore(self, request, queryset):
        actor = staff_actor(request)
        apply_to_each(
            self,
            request,
            queryset,
            "Restored",
            lambda fact: services.fact_restore(tenant=fact.tenant, fact_id=fact.pk, actor=actor),
        )


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{pk}" for pk in ids)


@admin.register(FactEvent)
class FactEventAdmin(TenantScopedAdmin):
    """The audit trail: append-only, for superusers too; newest first."""

    list_display = ["created_at", "fact_id", "action", "actor", "user_id", "tenant"]
    list_filter = ["action", TenantListFilter]
    search_fields = ["user_id", "=fact_id"]
    ordering = ["-created_at", "-id"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(FactConflict)
class FactConflictAdmin(ActionsOnlyAdmin, TenantScopedAdmin):
    """Conflicts are opened by fact_remember and settled by the resolution actions (conflict_resolve) only."""

    list_display = ["id", "existing", "new", "reason", "status", "resolution", "user_id", "tenant"]
    list_filter = ["status", TenantListFilter]
    list_select_related = ["existing_fact", "new_fact"]
    fields = [
        "tenant", "user_id", "existing_fact", "new_fact", "reason", "status", "resolution", "resolved_by",
        "resolved_at", "created_at",
    ]  # fmt: skip
    actions = ["keep_new", "keep_old", "keep_both"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # a conflict is resolved; it goes with its facts when one of them is deleted

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

    @admin.action(description="Resolve: keep the new fact (supersede the old)", permissions=["change"])
    def keep_new(self, request, queryset):
        self._resolve(request, queryset, FactConflict.Resolution.KEEP_NEW)

    @admin.action(description="Resolve: keep the old fact (reject the new)", permissions=["change"])
    def keep_old(self, request, queryset):
        self._resolve(request, queryset, FactConflict.Resolution.KEEP_OLD)

    @admin.action(description="Resolve: keep both", permissions=["change"])
    def keep_both(self, request, queryset):
        self._resolve(request, queryset, FactConflict.Resolution.KEEP_BOTH)
