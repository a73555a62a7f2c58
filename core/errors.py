"""Errors that services raise; core.api_errors presents them to API callers."""

from http import HTTPStatus


class ApplicationError(Exception):
    """A business rule said no. Services raise it; the API turns it into a 4xx."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid_request",
        status_code: int = HTTPStatus.BAD_REQUEST,
        details: dict | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status_code = status_code
        self.details = details or {}
