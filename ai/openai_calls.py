"""One place that turns the openai client's exceptions into clear AIProviderErrors."""

from collections.abc import Callable
from typing import TypeVar

import openai

from .errors import AIProviderError

T = TypeVar("T")


def call_openai(what: str, client: openai.OpenAI, request: Callable[[], T]) -> T:
    """Run `request`; the client itself retries 429, 5xx and timeouts with backoff, up to its max_retries."""
    endpoint = str(client.base_url).rstrip("/")
    try:
        return request()
    except openai.AuthenticationError:
        raise AIProviderError(
            f"The {what} endpoint {endpoint} rejected the API key (401): check OPENAI_API_KEY.", upstream_status=401
        ) from None
    except openai.APITimeoutError:
        raise AIProviderError(
            f"The {what} endpoint {endpoint} timed out after {client.max_retries} retries "
            f"(OPENAI_TIMEOUT={client.timeout}s)."
        ) from None
    except openai.APIConnectionError as exc:
        raise AIProviderError(f"Could not reach the {what} endpoint {endpoint}: {exc}.") from None
    except openai.APIStatusError as exc:
        retried = f" after {client.max_retries} retries" if exc.status_code == 429 or exc.status_code >= 500 else ""
        raise AIProviderError(
            f"The {what} endpoint {endpoint} answered {exc.status_code}{retried}: {_message(exc)}",
            upstream_status=exc.status_code,
        ) from None


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    return str(body.get("message") or exc.message)
