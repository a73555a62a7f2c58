"""Helpers of every app's admin: who the staff actor is, bulk actions that call one service per row, forms that
save through a service, and change forms that only show."""

from collections.abc import Callable

from django.contrib import messages
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
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


class ServiceFormAdmin:
    """Mixin of a ModelAdmin whose save_model writes through a service: what the service refuses
    (ApplicationError, ValidationError) is shown on the form like any other validation error, and nothing is saved.

    A POST runs without the admin's own transaction: the service is all or nothing by itself, and it embeds and
    judges before it opens its transaction, which an outer one would hold open across those slow calls. A refused
    write has written nothing; the form is then validated again, this time with the service's reasons attached,
    and shown as an invalid form is."""

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        if request.method != "POST":
            return super().changeform_view(request, object_id, form_url, extra_context)
        try:
            return self._changeform_view(request, object_id, form_url, extra_context)
        except (ApplicationError, ValidationError) as exc:
            request.service_refusal = exc
            return self._changeform_view(request, object_id, form_url, extra_context)

    def get_form(self, request, obj=None, change=False, **kwargs):
        form_class = super().get_form(request, obj, change=change, **kwargs)
        refusal = getattr(request, "service_refusal", None)
        if refusal is None:
            return form_class

        class RefusedForm(form_class):
            def clean(self):
                cleaned_data = super().clean()
                for field, errors in service_errors(refusal):
                    if field is not None and field not in self.fields:
                        field, errors = None, [f"{field}: {error}" for error in errors]
                    self.add_error(field, errors)
                return cleaned_data

        return RefusedForm


def service_errors(exc: ApplicationError | ValidationError) -> list[tuple[str | None, list[str]]]:
    """A service's refusal as (field or None, messages) pairs."""
    if isinstance(exc, ApplicationError):
        return [(None, [exc.message])]
    if hasattr(exc, "error_dict"):
        return [(None if field == "__all__" else field, errors) for field, errors in exc.message_dict.items()]
    return [(None, exc.messages)]


class ActionsOnlyAdmin:
    """Mixin of a ModelAdmin whose rows change only through its actions (each one a service): the change form of a
    row is view only, for superusers too; the actions still ask for the change permission on the model."""

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request)


def take_saved(obj, saved) -> None:
    """Make the admin's unsaved instance `obj` the row a service saved (`saved`), for the admin's log and
    redirect."""
    for field in saved._meta.concrete_fields:
        setattr(obj, field.attname, getattr(saved, field.attname))
    obj._state.adding, obj._state.db = False, saved._state.db
