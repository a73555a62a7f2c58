"""The exceptions the client raises: one per kind of answer, each carrying the API's `{"error": {...}}`."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import httpx2


class MemoryProjectError(Exception):
    """The API answered with an error (or, for APIConnectionError, did not answer at all).

    `status` is the HTTP status (0 when no answer came), `code` the API's machine-readable code ("validation_error",
    "not_found", "conflict", ...), `message` its sentence, `details` its details (for a 400: the fields and what is
    wrong with each, e.g. `{"user_id": ["This field is required."]}`).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        response: httpx2.Response | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}" if status else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.response = response


class APIConnectionError(MemoryProjectError):
    """No answer: the server could not be reached, or the connection failed or timed out (after the retries that
    were safe to make). `__cause__` is the underlying httpx2 error."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "connection_error", message)


class ValidationError(MemoryProjectError):
    """400: the request was refused as given; `details` names each field (down to `messages[2].content`)."""


class AuthenticationError(MemoryProjectError):
    """401: no API key, or a wrong or revoked one."""


class PermissionDeniedError(MemoryProjectError):
    """403: the key may not do this."""


class NotFoundError(MemoryProjectError):
    """404: no such object for this tenant (another tenant's object answers 404 too)."""


class ConflictError(MemoryProjectError):
    """409: the object is not in a state that allows this (approving an archived fact, resolving a resolved
    conflict, retrying a ready document)."""


class PayloadTooLargeError(MemoryProjectError):
    """413: the body or the document is over a size limit; `details` says which."""


class UnsupportedMediaTypeError(MemoryProjectError):
    """415: a document type the knowledge base cannot read."""


class RateLimitError(MemoryProjectError):
    """429: too many requests for this key, still refused after the retries; `retry_after` is the server's
    Retry-After in seconds (None when it sent none)."""

    retry_after: float | None = None


class ServerError(MemoryProjectError):
    """5xx: the server failed to answer."""


class UnavailableError(ServerError):
    """503: the server (its database, task queue or a provider) is unavailable for now, still after the retries;
    `retry_after` as for RateLimitError."""

    retry_after: float | None = None


_BY_STATUS: dict[int, type[MemoryProjectError]] = {
    400: ValidationError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    429: RateLimitError,
    503: UnavailableError,
}


def error_from_response(response: httpx2.Response, *, retry_after: float | None = None) -> MemoryProjectError:
    """The exception for an error answer: the API's error body when it sent one, else the status's phrase (a proxy's
    HTML page, an empty body)."""
    code, message, details = _error_fields(response)
    status = response.status_code
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else MemoryProjectError)
    error = cls(status, code, message, details, response=response)
    if isinstance(error, RateLimitError | UnavailableError):
        error.retry_after = retry_after
    return error


def _error_fields(response: httpx2.Response) -> tuple[str, str, dict[str, Any]]:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError, httpx2.ResponseNotRead):
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        details = error.get("details")
        return str(error.get("code") or "error"), error["message"], details if isinstance(details, dict) else {}
    try:
        phrase = HTTPStatus(response.status_code).phrase
    except ValueError:
        phrase = "Error"
    return f"http_{response.status_code}", f"{phrase}.", {}
