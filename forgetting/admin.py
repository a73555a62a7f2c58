from django import forms
from django.contrib import admin

from core.admin import ServiceFormAdmin, take_saved
from facts.models import Fact
from tenancy.admin import TenantListFilter, TenantScopedAdmin

from .models import ForgetPolicy, ForgetRun
from .selectors import POLICY_FIELDS, forget_policy_defaults
from .services import forget_policy_apply, forget_policy_reset, forget_policy_set


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
class ForgetPolicyAdmin(ServiceFormAdmin, TenantScopedAdmin):
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
        take_saved(obj, forget_policy_set(tenant=obj.tenant, **{name: getattr(obj, name) for name in POLICY_FIELDS}))

    # Deleting a tenant's policy is resetting it: the tenant follows the FORGET_* settings again.
    def delete_model(self, request, obj):
        forget_policy_reset(tenant=obj.tenant)

    def delete_queryset(self, request, queryset):
        for policy in queryset.select_related("tenant").order_by("pk"):
            forget_policy_reset(tenant=policy.tenant)

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
    list_filter = ["status", "dry_run", TenantListFilter]
    date_hierarchy = "started_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # a record of what happened

    def has_delete_permission(self, request, obj=None):
        return False
