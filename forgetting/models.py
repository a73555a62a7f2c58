from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from tenancy.models import Tenant


class ForgetPolicy(models.Model):
    """How one tenant's memory forgets; a tenant without one follows the FORGET_* settings.

    Unused facts (not used for max_unused_days and used fewer than min_usage_count times) are archived, users
    over max_facts_per_user lose their least valuable facts to the archive, and archived or superseded facts
    older than archive_retention_days are purged. Pinned facts and exempt categories are never forgotten.
    """

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="forget_policy")
    enabled = models.BooleanField(default=True)
    # Empty = no unused-facts rule.
    max_unused_days = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(36500)]
    )
    min_usage_count = models.PositiveIntegerField(default=3)
    # Empty = no cap.
    max_facts_per_user = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    archive_retention_days = models.PositiveIntegerField(default=30, validators=[MaxValueValidator(36500)])
    # Fact categories that are never forgotten, e.g. ["profile", "procedure"].
    exempt_categories = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "forget policies"

    def __str__(self) -> str:
        return f"forget policy of {self.tenant}"


class ForgetRun(models.Model):
    """One application of a tenant's forget policy: what it did (or, for a dry run, would have done)."""

    class Status(models.TextChoices):
        DONE = "done"
        SKIPPED = "skipped"  # another run of the same tenant held the lock
        FAILED = "failed"

    # No index of its own: the table's composite indexes start with tenant.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="forget_runs", db_index=False)
    dry_run = models.BooleanField(default=False)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DONE)
    # The moment the rules were measured against ("unused since ...", "archived before ...").
    as_of = models.DateTimeField()
    archived = models.PositiveIntegerField(default=0)  # unused facts archived
    evicted = models.PositiveIntegerField(default=0)  # facts archived because their user was over the cap
    purged = models.PositiveIntegerField(default=0)  # rows deleted: archived past retention + superseded
    superseded_purged = models.PositiveIntegerField(default=0)  # of which superseded past retention
    # Seconds per stage ({"archive": 0.4, "evict": 0.1, "purge": 1.2}) and the policy that was applied.
    timings = models.JSONField(default=dict, blank=True)
    policy = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["tenant", "-started_at"], name="forgetrun_tenant_started")]

    def __str__(self) -> str:
        kind = "dry run" if self.dry_run else "run"
        return f"forget {kind} of {self.tenant} at {self.started_at:%Y-%m-%d %H:%M}"
