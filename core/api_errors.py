"""One error shape for the whole API: {"error": {"code", "message", "details"}}."""

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from .errors import ApplicationError


def error_body(code: str, message: str, details: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def api_exception_handler(exc, context):
    if isinstance(exc, ApplicationError):
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.status_code)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(_django_validation_details(exc))
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    response = exception_handler(exc, context)
    if response is None:
        return None  # an unexpected error: Django's 500 handling and logging take over

    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body("validation_error", _first_message(exc.detail), _as_details(exc.detail))
    else:
        detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
        response.data = error_body(str(code), str(detail))
    return response


def _django_validation_details(exc: DjangoValidationError):
    if hasattr(exc, "error_dict"):
        return exc.message_dict
    return {"non_field_errors": exc.messages}


def _as_details(detail) -> dict:
    if isinstance(detail, dict):
        return {key: _as_plain(value) for key, value in detail.items()}
    return {"non_field_errors": _as_plain(detail)}


def _as_plain(value):
    if isinstance(value, dict):
        return {key: _as_plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_plain(item) for item in value]
    return str(value)


def _first_message(detail, path: str = "") -> str:
    """The first problem as a sentence naming its field, e.g. "messages[2].content: This field is required."."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key == "non_field_errors":
                return _first_message(value, path)
            if isinstance(key, int):  # DRF reports list items by index
                return _first_message(value, f"{path}[{key}]")
            return _first_message(value, f"{path}.{key}" if path else key)
    if isinstance(detail, list):
        for index, item in enumerate(detail):
            if isinstance(item, dict) and item:
                return _first_message(item, f"{path}[{index}]")
            if item and not isinstance(item, dict):
                return _first_message(item, path)
        return f"{path}: invalid" if path else "invalid"
    return f"{path}: {detail}" if path else str(detail)
