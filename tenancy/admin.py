from django.contrib import admin, messages

from .models import ApiKey, Tenant, TenantMembership
from .selectors import tenants_visible_to
from .services import api_key_create, api_key_revoke


class TenantScopedAdmin(admin.ModelAdmin):
    """Staff see and pick only the tenants they are members of; superusers see all."""

    tenant_field = "tenant"

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{f"{self.tenant_field}__in": tenants_visible_to(user=request.user)})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant":
            kwargs["queryset"] = tenants_visible_to(user=request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    tenant_field = "pk"
    list_display = ["name", "is_active", "created_at"]
    search_fields = ["name"]
    actions = ["issue_api_key"]

    @admin.action(description="Issue a new API key (shown once)")
    def issue_api_key(self, request, queryset):
        for tenant in queryset:
            issued = api_key_create(tenant=tenant, name=f"admin:{request.user.get_username()}")
            self.message_user(
                request,
                f"New API key for {tenant}: {issued.key} — copy it now, it is not shown again.",
                messages.WARNING,
            )


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdmin):
    list_display = ["prefix", "tenant", "name", "created_at", "revoked_at"]
    list_filter = ["tenant", "revoked_at"]
    readonly_fields = ["tenant", "prefix", "key_hash", "created_at", "revoked_at"]
    fields = ["tenant", "name", "prefix", "key_hash", "created_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # keys are issued from the tenant list, where the clear key can be shown once

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset):
        for api_key in queryset:
            api_key_revoke(api_key=api_key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")


@admin.register(TenantMembership)
class TenantMembershipAdmin(TenantScopedAdmin):
    list_display = ["user", "tenant", "created_at"]
    list_filter = ["tenant"]
    autocomplete_fields = ["user"]

    # Only superusers hand out (or take back) access to tenants.
    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser
