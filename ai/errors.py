from http import HTTPStatus

from core.errors import ApplicationError


class AIProviderError(ApplicationError):
    """An embedding or chat call failed for good (after retries), or answered something unusable."""

    def __init__(self, message: str, *, code: str = "ai_provider_error", upstream_status: int | None = None):
        super().__init__(message, code=code, status_code=HTTPStatus.SERVICE_UNAVAILABLE)
        self.upstream_status = upstream_status  # the endpoint's HTTP status, when it answered one
