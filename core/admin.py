"""Helpers of every app's admin: who the staff actor is, and bulk actions that call one service per row."""

from collections.abc import Callable

from django.contrib import messages
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import QuerySet

from .errors import ApplicationError


def staff_actor(request) -> str:
    """How audit records name a staff user."""
    return f"staff:{request.user.pk}"


def apply_to_each(modeladmin, request, queryset, label: str, call: Callable) -> None:
    """Run one service per selected row (the same service the API uses) and report what happened."""
    done, failed = 0, []
    for row in queryset.order_by("pk"):
        try:
            call(row)
            done += 1
        except ApplicationError as exc:
            failed.append(f"#{row.pk}: {exc.message}")
    modeladmin.message_user(request, f"{label} {done} item(s).")
    if failed:
        modeladmin.message_user(request, "Not changed: " + "; ".join(failed), messages.WARNING)


def admin_log_entries(model, ids) -> QuerySet[LogEntry]:
    """The admin's log lines about rows of `model` (they hold each row's text as it was shown)."""
    content_type = ContentType.objects.get_for_model(model)
    return LogEntry.objects.filter(content_type=content_type, object_id__in=[str(pk) for pk in ids])
