from django import forms
from django.contrib import admin
from django.core.exceptions import FieldDoesNotExist
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from core.admin import ServiceFormAdmin, take_saved

from .models import ApiKey, Tenant, TenantMembership
from .scopes import DEFAULT_SCOPES, SCOPE_CHOICES
from .selectors import tenants_visible_to
from .services import (
    api_key_create,
    api_key_revoke,
    api_key_scopes_set,
    tenant_create,
    tenant_membership_add,
    tenant_membership_remove,
    tenant_update,
)


class TenantListFilter(admin.SimpleListFilter):
    """The tenant filter of every admin list: only the tenants the staff user is a member of (all for superusers)."""

    title = "tenant"
    parameter_name = "tenant"

    def lookups(self, request, model_admin):
        return [(tenant.pk, str(tenant)) for tenant in tenants_visible_to(user=request.user).order_by("name")]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        return queryset.filter(tenant=self.value())


class TenantScopedAdmin(admin.ModelAdmin):
    """Staff see and pick only the tenants they are members of, and only those tenants' rows; superusers see all.

    The queryset is scoped, so are the lookups built on it (the raw-id popup's list, the autocomplete view of a
    field pointing at this model); a form field pointing at a tenant or at a tenant's rows offers (and accepts) only
    the visible ones."""

    tenant_field = "tenant"

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{f"{self.tenant_field}__in": tenants_visible_to(user=request.user)})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        related = db_field.related_model
        if related is Tenant:
            kwargs["queryset"] = tenants_visible_to(user=request.user)
        elif _has_tenant(related) and not request.user.is_superuser:
            kwargs["queryset"] = related._default_manager.filter(tenant__in=tenants_visible_to(user=request.user))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


def _has_tenant(model) -> bool:
    try:
        return model._meta.get_field("tenant").related_model is Tenant
    except FieldDoesNotExist:
        return False


@admin.register(Tenant)
class TenantAdmin(ServiceFormAdmin, TenantScopedAdmin):
    tenant_field = "pk"
    list_display = ["name", "is_active", "created_at"]
    search_fields = ["name"]
    readonly_fields = ["created_at"]
    actions = ["issue_api_key"]

    def get_fields(self, request, obj=None):
        return ["name"] if obj is None else ["name", "is_active", "created_at"]

    # Only superusers create tenants: staff see the tenants they are members of, and only superusers add members.
    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return False  # it would take every row of the tenant, past every service and audit: switch it off instead

    def save_model(self, request, obj, form, change):
        if change:
            changes = {name: form.cleaned_data[name] for name in ("name", "is_active") if name in form.changed_data}
            if changes:
                take_saved(obj, tenant_update(tenant=obj, **changes))
            return
        tenant, issued = tenant_create(name=form.cleaned_data["name"])
        take_saved(obj, tenant)
        request.issued_api_keys = [issued]

    def response_add(self, request, obj, post_url_continue=None):
        issued = getattr(request, "issued_api_keys", None)
        if issued:
            return _issued_keys_page(request, self, issued)
        return super().response_add(request, obj, post_url_continue)

    @admin.action(description="Issue a new API key (shown once)", permissions=["change"])
    def issue_api_key(self, request, queryset):
        """A form for the keys' name and scopes first; then the keys, on the page that answers (never in a message,
        which the messages cookie would carry signed but readable)."""
        form = IssueApiKeyForm(request.POST if "issue" in request.POST else None)
        if not form.is_valid():
            context = {
                **self.admin_site.each_context(request),
                "title": "Issue API keys",
                "form": form,
                "tenants": list(queryset),
                "back_url": request.get_full_path(),
            }
            return TemplateResponse(request, "admin/tenancy/issue_api_key.html", context)
        name = form.cleaned_data["name"] or f"admin:{request.user.get_username()}"
        issued = [
            api_key_create(tenant=tenant, name=name, scopes=form.cleaned_data["scopes"])
            for tenant in queryset.order_by("name")
        ]
        return _issued_keys_page(request, self, issued)


class IssueApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, help_text="A label to tell keys apart.")
    scopes = forms.MultipleChoiceField(
        choices=SCOPE_CHOICES,
        initial=list(DEFAULT_SCOPES),
        widget=forms.CheckboxSelectMultiple,
        help_text="review: approve and reject facts, resolve conflicts; admin: settings and keys.",
    )


def _issued_keys_page(request, model_admin, issued) -> TemplateResponse:
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "New API keys",
        "issued_keys": issued,
        "back_url": reverse("admin:tenancy_tenant_changelist"),
    }
    response = TemplateResponse(request, "admin/tenancy/issued_api_keys.html", context)
    add_never_cache_headers(response)  # the clear key must not stay in any cache
    return response


class ApiKeyScopesForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=SCOPE_CHOICES, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = ApiKey
        fields = ["scopes"]


@admin.register(ApiKey)
class ApiKeyAdmin(ServiceFormAdmin, TenantScopedAdmin):
    """Keys are issued from the tenant list (where the clear key can be shown once), revoked here, and their scopes
    changed here: the only field that changes."""

    form = ApiKeyScopesForm
    list_display = ["prefix", "tenant", "name", "scopes_shown", "created_at", "revoked_at"]
    list_filter = [TenantListFilter, "revoked_at"]
    fields = ["tenant", "name", "prefix", "scopes", "created_at", "revoked_at"]
    readonly_fields = ["tenant", "name", "prefix", "created_at", "revoked_at"]
    actions = ["revoke"]

    @admin.display(description="scopes")
    def scopes_shown(self, obj) -> str:
        return ", ".join(obj.scopes)

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.is_revoked:
            return [*self.readonly_fields, "scopes"]
        return self.readonly_fields

    def save_model(self, request, obj, form, change):
        if "scopes" in form.changed_data:
            take_saved(obj, api_key_scopes_set(api_key=obj, scopes=form.cleaned_data["scopes"]))

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # a key is revoked, and the record of it stays

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke(self, request, queryset):
        for api_key in queryset:
            api_key_revoke(api_key=api_key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")


@admin.register(TenantMembership)
class TenantMembershipAdmin(ServiceFormAdmin, TenantScopedAdmin):
    list_display = ["user", "tenant", "created_at"]
    list_filter = [TenantListFilter]
    fields = ["tenant", "user"]
    autocomplete_fields = ["user"]

    # Only superusers hand out (or take back) access to tenants; a membership is given or taken back, never moved.
    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def save_model(self, request, obj, form, change):
        take_saved(obj, tenant_membership_add(tenant=obj.tenant, user=obj.user))

    def delete_model(self, request, obj):
        tenant_membership_remove(tenant=obj.tenant, user=obj.user)

    def delete_queryset(self, request, queryset):
        for membership in queryset.select_related("tenant", "user").order_by("pk"):
            tenant_membership_remove(tenant=membership.tenant, user=membership.user)
