from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from .scopes import SCOPE_CHOICES, default_scopes


class Tenant(models.Model):
    """A customer of the service; every stored row belongs to exactly one."""

    name = models.CharField(max_length=100, unique=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ApiKey(models.Model):
    """An agent's credential. Only the SHA-256 of the key is stored; the key itself is shown once."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    # The first characters of the key, kept in clear so people can tell keys apart.
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    # What the key may do (tenancy.scopes): memory:read, memory:write, review, admin.
    scopes = ArrayField(models.CharField(max_length=20, choices=SCOPE_CHOICES), default=default_scopes)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.tenant})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class TenantMembership(models.Model):
    """Gives a staff user the admin view of one tenant's data."""

    # No index of its own: the table's composite indexes start with tenant.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tenant_memberships")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user"], name="tenancy_membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.tenant}"
