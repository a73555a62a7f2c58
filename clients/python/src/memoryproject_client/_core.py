"""What the sync and async clients share: requests described as data, the retry rule, and the answer handling.

Every operation is written once (in `_operations`) as a function that returns a description of its request; the
two clients only differ in how they send it (`_sync`, `_async`).
"""

from __future__ import annotations

import email.utils
import functools
import inspect
import json
import random
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx2

from .errors import APIConnectionError, MemoryProjectError, error_from_response
from .types import Page, from_json

T = TypeVar("T")
ItemT = TypeVar("ItemT")
MethodT = TypeVar("MethodT", bound=Callable[..., Any])


class _NotGiven:
    """A parameter left out (distinct from None, which some fields accept as a value: "no cap", "no date")."""

    _instance: _NotGiven | None = None

    def __new__(cls) -> _NotGiven:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False


NOT_GIVEN: Any = _NotGiven()

# Statuses that say the server did not act on the request: sending it again is safe whatever the method.
RETRY_STATUSES = frozenset({429, 503})
# Transport failures before the request left: nothing reached the server.
NOT_SENT_ERRORS = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)


@dataclass(frozen=True)
class Request(Generic[T]):
    """One API call: what to send, and how to read a successful answer."""

    method: str
    path: str
    parse: Callable[[httpx2.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = NOT_GIVEN
    content: bytes | None = None
    files: Mapping[str, Any] | None = None
    data: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    # Safe to send again after it may have reached the server (a read, a PUT or DELETE, a POST the server
    # deduplicates). Others are sent again only when the server refused them (429, 503) or never got them.
    idempotent: bool = False
    answers: frozenset[int] = frozenset()  # error statuses that are answers to parse, not errors (health's 503)

    def build(self, http: httpx2.Client | httpx2.AsyncClient) -> httpx2.Request:
        return http.build_request(
            self.method,
            self.path,
            params=self.params,
            json=None if self.json is NOT_GIVEN else self.json,
            content=self.content,
            files=self.files,
            data=self.data,
            headers=self.headers,
        )


@dataclass(frozen=True)
class PageRequest(Generic[ItemT]):
    """The first page of a list; the clients follow its `next` cursors lazily."""

    path: str
    item: type[ItemT]
    params: Mapping[str, Any] = field(default_factory=dict)

    def page(self, cursor: str | None) -> Request[Page[ItemT]]:
        params = dict(self.params)
        if cursor is not None:
            params["cursor"] = cursor
        item = self.item
        return Request("GET", self.path, lambda response: parse_page(response, item), params=params, idempotent=True)


@dataclass(frozen=True)
class LinesRequest:
    """A JSON Lines answer, read line by line as it streams in."""

    request: Request[None]


# A plan makes several requests (a batched import): it yields each request and receives its parsed answer.
Plan = Generator[Request[Any], Any, T]


def parse_page(response: httpx2.Response, item: type[ItemT]) -> Page[ItemT]:
    body = response.json()
    next_link = body.get("next")
    cursor = httpx2.URL(next_link).params.get("cursor") if next_link else None
    return Page([from_json(item, entry) for entry in body.get("results", [])], cursor)


def json_line(line: str) -> dict[str, Any] | None:
    """One record of a JSON Lines answer; None for a blank line."""
    return json.loads(line) if line.strip() else None


def object_of(cls: type[T]) -> Callable[[httpx2.Response], T]:
    return lambda response: from_json(cls, response.json())


def list_of(cls: type[T]) -> Callable[[httpx2.Response], list[T]]:
    return lambda response: [from_json(cls, entry) for entry in response.json()]


def nothing(response: httpx2.Response) -> None:
    return None


# --- building requests -------------------------------------------------------------------------------------------


def segment(value: str | int) -> str:
    """A path segment: a user id may hold "/", "?", "%", spaces or non-ASCII, all percent-encoded ("." and ".."
    too, which an HTTP client would otherwise resolve as relative paths)."""
    text = str(value)
    if text in (".", ".."):
        return text.replace(".", "%2E")
    return quote(text, safe="")


def fields(**values: Any) -> dict[str, Any]:
    """A body or query from keyword arguments: those not given (NOT_GIVEN, or None for optional filters) are left
    out so the server's defaults apply; datetimes become ISO 8601."""
    return {name: _wire(value) for name, value in values.items() if value is not NOT_GIVEN and value is not None}


def patch_fields(**values: Any) -> dict[str, Any]:
    """A PATCH body: only what is given, None included (it clears the field)."""
    return {name: _wire(value) for name, value in values.items() if value is not NOT_GIVEN}


def _wire(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def choices(value: str | Iterable[str] | None) -> str | None:
    """A filter of several values (`status=["active", "pending"]`) as the API reads it: "active,pending"."""
    if value is None or isinstance(value, str):
        return value
    return ",".join(value)


Filter = Mapping[str, Any]  # the filter language: {"metadata.project": "atlas"}, {"AND": [...]}, ... (docs/filters.md)


def filter_text(value: Filter | None) -> str | None:
    """A filter as a query parameter takes it: JSON."""
    return None if value is None else json.dumps(value)


def query_bool(value: bool | None) -> str | None:
    return None if value is None else ("true" if value else "false")


# --- retries -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait: up to `max_retries` more attempts; the server's Retry-After when it sends one,
    else exponential backoff from `backoff` seconds with jitter; never longer than `max_delay` seconds."""

    max_retries: int = 3
    backoff: float = 0.5
    max_delay: float = 30.0

    def after_response(self, request: Request[Any], response: httpx2.Response, attempt: int) -> float | None:
        """Seconds to wait before sending `request` again after this answer, or None to stop here."""
        status = response.status_code
        if attempt >= self.max_retries or status not in RETRY_STATUSES or status in request.answers:
            return None
        wait = retry_after(response)
        return min(wait, self.max_delay) if wait is not None else self._backoff(attempt)

    def after_error(self, request: Request[Any], error: httpx2.TransportError, attempt: int) -> float | None:
        """Seconds to wait before sending `request` again after a transport failure, or None to give up."""
        if attempt >= self.max_retries:
            return None
        if isinstance(error, NOT_SENT_ERRORS) or request.idempotent:
            return self._backoff(attempt)
        return None  # it may have reached the server: sending it again could do it twice

    def _backoff(self, attempt: int) -> float:
        growth: float = 2.0**attempt
        return min(self.backoff * growth * random.uniform(0.5, 1.0), self.max_delay)


def retry_after(response: httpx2.Response) -> float | None:
    """The Retry-After header in seconds (it may also be an HTTP date), or None."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - time.time(), 0.0)


def check(request: Request[Any], response: httpx2.Response) -> None:
    """Raise the API's error for an error answer (the body must have been read)."""
    if response.status_code >= 400 and response.status_code not in request.answers:
        raise error_from_response(response, retry_after=retry_after(response))


def method_like(method: MethodT, operation: Callable[..., Any], returns: str | None = None) -> MethodT:
    """Give a client's `method` the operation's name, docstring and signature (with self), for help() and editors."""
    functools.update_wrapper(method, operation)
    delattr(method, "__wrapped__")  # inspect would otherwise read the operation's signature, which has no self
    signature = inspect.signature(operation)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    annotation = returns or _answer_type(signature.return_annotation)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_parameter, *signature.parameters.values()], return_annotation=annotation
    )
    return method


def _answer_type(annotation: Any) -> Any:
    """ "Request[Fact]" -> "Fact": what the method returns, once the request is sent."""
    text = str(annotation)
    for wrapper in ("Request[", "Plan["):
        if text.startswith(wrapper) and text.endswith("]"):
            return text[len(wrapper) : -1]
    return annotation


def connection_error(request: Request[Any], error: httpx2.TransportError) -> MemoryProjectError:
    kind = type(error).__name__
    failure = APIConnectionError(f"{request.method} {request.path} failed: {kind}: {error}")
    failure.__cause__ = error
    return failure
