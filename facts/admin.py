from django.contrib import admin
from django.utils.html import format_html

from core.admin import apply_to_each, staff_actor
from tenancy.admin import TenantScopedAdmin

from . import services
from .models import Fact, FactConflict, FactEvent


@admin.register(Fact)
class FactAdmin(TenantScopedAdmin):
    list_display = ["id", "content", "user_id", "category", "status", "confidence", "usage_count", "valid_to", "tenant"]
    list_filter = ["status", "category", "source", "pinned", "tenant"]
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
            lambda fact: fact_restore(tenant=fact.tenant, fact_id=fact.pk, actor=actor),
        )


@admin.register(FactEvent)
class FactEventAdmin(TenantScopedAdmin):
    list_display = ["created_at", "fact_id", "action", "actor", "user_id", "tenant"]
    list_filter = ["action", "tenant"]
    search_fields = ["user_id", "=fact_id"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # the audit trail is append-only


@admin.register(FactConflict)
class FactConflictAdmin(TenantScopedAdmin):
    list_display = ["id", "existing", "new", "reason", "status", "resolution", "user_id", "tenant"]
    list_filter = ["status", "tenant"]
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


# --- forgetting ---------------------------------------------------------------------------------
# Imported here to keep this section in one piece; they can move to the top of the file.
from django import forms  # noqa: E402

from .forgetting import fact_restore, forget_policy_apply, forget_policy_set  # noqa: E402
from .forgetting_selectors import POLICY_FIELDS, forget_policy_defaults  # noqa: E402
from .models import ForgetPolicy, ForgetRun  # noqa: E402


class ForgetPolicyForm(forms.ModelForm):
    exempt_categories = forms.MultipleChoiceField(
        choices=Fact.Category.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Facts of these categories are never forgotten (nor are pinned facts).",
    )

    class Meta:
        model = ForgetPolicy
        fields = ["tenant", *POLICY_FIELDS]
        help_texts = {
            "max_unused_days": "Archive facts neither used nor written for this many days (empty: rule off)…",
            "min_usage_count": "…and used fewer than this many times.",
            "max_facts_per_user": "Above this many live facts, the least valuable are archived (empty: no cap).",
            "archive_retention_days": "Archived facts, and facts superseded, longer ago than this are deleted.",
        }


@admin.register(ForgetPolicy)
class ForgetPolicyAdmin(TenantScopedAdmin):
    form = ForgetPolicyForm
    list_display = [
        "tenant", "enabled", "max_unused_days", "min_usage_count", "max_facts_per_user", "archive_retention_days",
        "exempt_categories", "updated_at",
    ]  # fmt: skip
    list_filter = ["enabled"]
    actions = ["preview"]

    def get_readonly_fields(self, request, obj=None):
        return ["tenant"] if obj is not None else []

    def get_changeform_initial_data(self, request):
        return {**forget_policy_defaults(), **super().get_changeform_initial_data(request)}

    def save_model(self, request, obj, form, change):
        # Through the same service as the API, so both validate alike.
        saved = forget_policy_set(tenant=obj.tenant, **{name: getattr(obj, name) for name in POLICY_FIELDS})
        obj.pk, obj.created_at, obj.updated_at = saved.pk, saved.created_at, saved.updated_at

    @admin.action(description="Preview (dry run): count what the policy would forget now")
    def preview(self, request, queryset):
        for policy in queryset.select_related("tenant").order_by("pk"):
            report = forget_policy_apply(tenant=policy.tenant, dry_run=True)
            self.message_user(
                request,
                f"Dry run for {policy.tenant}: would archive {report.archived} unused, evict {report.evicted} "
                f"over the cap, purge {report.purged} ({report.superseded_purged} superseded).",
            )


@admin.register(ForgetRun)
class ForgetRunAdmin(TenantScopedAdmin):
    list_display = [
        "started_at", "tenant", "dry_run", "status", "archived", "evicted", "purged", "superseded_purged",
        "duration_ms",
    ]  # fmt: skip
    list_filter = ["status", "dry_run", "tenant"]
    date_hierarchy = "started_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # a record of what happened
