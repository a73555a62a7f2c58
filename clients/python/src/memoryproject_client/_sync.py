"""The synchronous client: MemoryClient, on an httpx2.Client."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast

import httpx2

from . import _operations as ops
from ._config import client_settings
from ._core import (
    LinesRequest,
    PageRequest,
    Plan,
    Request,
    RetryPolicy,
    check,
    connection_error,
    json_line,
    method_like,
)
from .types import Page

P = ParamSpec("P")
T = TypeVar("T")
ItemT = TypeVar("ItemT")


def _call(operation: Callable[P, Request[T] | Plan[T]]) -> Callable[Concatenate[Any, P], T]:
    """A method that sends what `operation` describes and returns the parsed answer."""

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return _client_of(self)._run(operation(*args, **kwargs))

    return method_like(method, operation)


def _paged(operation: Callable[P, PageRequest[ItemT]]) -> Callable[Concatenate[Any, P], Pager[ItemT]]:
    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> Pager[ItemT]:
        return Pager(_client_of(self), operation(*args, **kwargs))

    return method_like(method, operation, returns="Pager")


def _streamed(operation: Callable[P, LinesRequest]) -> Callable[Concatenate[Any, P], Iterator[dict[str, Any]]]:
    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[dict[str, Any]]:
        return _client_of(self)._lines(operation(*args, **kwargs))

    return method_like(method, operation, returns="Iterator[dict]")


def _client_of(owner: Any) -> MemoryClient:
    return owner if isinstance(owner, MemoryClient) else owner._client


class MemoryClient:
    """A client of the memoryproject API.

    `base_url` and `api_key` default to the MEMORYPROJECT_URL and MEMORYPROJECT_API_KEY environment variables.
    Requests refused with 429 or 503 are sent again up to `max_retries` times, after the server's Retry-After (at
    most `max_retry_delay` seconds) or an exponential backoff from `retry_backoff` seconds; so are reads after a
    connection failure. Use it as a context manager, or call close().

        with MemoryClient("http://localhost:8000", "mp_...") as client:
            client.facts.remember("alice", "prefers PostgreSQL", category="preference")
            print(client.context("alice", query="which database?").text)
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx2.Timeout = 30.0,
        max_retries: int = 3,
        retry_backoff: float = 0.5,
        max_retry_delay: float = 30.0,
        headers: dict[str, str] | None = None,
        http_client: httpx2.Client | None = None,
    ) -> None:
        settings = client_settings(base_url, api_key, headers)
        self.base_url = settings.base_url
        self.retry = RetryPolicy(max_retries=max_retries, backoff=retry_backoff, max_delay=max_retry_delay)
        self._owns_http = http_client is None
        self._http = http_client or httpx2.Client(timeout=timeout)
        self._http.base_url = httpx2.URL(settings.base_url)
        self._http.headers.update(settings.headers)

        self.facts = Facts(self)
        self.episodes = Episodes(self)
        self.kb = KnowledgeBase(self)
        self.conflicts = Conflicts(self)
        self.forget_policy = ForgetPolicies(self)
        self.forget_runs = ForgetRuns(self)
        self.users = Users(self)
        self.tools = Tools(self)

    context = _call(ops.context_build)
    whoami = _call(ops.whoami)
    health = _call(ops.health)
    embedding_cache = _call(ops.embedding_cache)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __repr__(self) -> str:
        return f"MemoryClient({self.base_url!r})"

    # --- sending ------------------------------------------------------------------------------------------------

    def _send(self, request: Request[Any]) -> httpx2.Response:
        """Send `request`, again while the retry rule says so; the answer's body is not read yet."""
        attempt = 0
        while True:
            try:
                response = self._http.send(request.build(self._http), stream=True)
            except httpx2.TransportError as error:
                delay = self.retry.after_error(request, error, attempt)
                if delay is None:
                    raise connection_error(request, error) from error
            else:
                delay = self.retry.after_response(request, response, attempt)
                if delay is None:
                    return response
                response.close()
            time.sleep(delay)
            attempt += 1

    def _request(self, request: Request[T]) -> T:
        response = self._send(request)
        try:
            response.read()
        except httpx2.TransportError as error:
            raise connection_error(request, error) from error
        finally:
            response.close()
        check(request, response)
        return request.parse(response)

    def _run(self, operation: Request[T] | Plan[T]) -> T:
        if isinstance(operation, Request):
            return self._request(operation)
        answer: Any = None
        try:
            while True:
                answer = self._request(operation.send(answer))
        except StopIteration as done:
            return cast(T, done.value)

    def _pages(self, first: PageRequest[ItemT]) -> Iterator[Page[ItemT]]:
        cursor: str | None = None
        while True:
            page = self._request(first.page(cursor))
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def _lines(self, operation: LinesRequest) -> Generator[dict[str, Any], None, None]:
        request = operation.request
        response = self._send(request)
        try:
            if response.status_code >= 400:
                response.read()
                check(request, response)
            try:
                for line in response.iter_lines():
                    record = json_line(line)
                    if record is not None:
                        yield record
            except httpx2.TransportError as error:
                raise connection_error(request, error) from error
        finally:
            response.close()


class Pager(Generic[ItemT]):
    """A list's items, fetched a page at a time as they are iterated; `pages()` gives the pages themselves."""

    def __init__(self, client: MemoryClient, first: PageRequest[ItemT]) -> None:
        self._client = client
        self._first = first

    def __iter__(self) -> Iterator[ItemT]:
        for page in self.pages():
            yield from page.items

    def pages(self) -> Iterator[Page[ItemT]]:
        return self._client._pages(self._first)


class _Resource:
    def __init__(self, client: MemoryClient) -> None:
        self._client = client


class Facts(_Resource):
    """`client.facts`: save, list, read, change, review and search a user's facts."""

    remember = _call(ops.facts_remember)
    list = _paged(ops.facts_list)
    get = _call(ops.facts_get)
    update = _call(ops.facts_update)
    delete = _call(ops.facts_delete)
    delete_where = _call(ops.facts_delete_where)
    history = _call(ops.facts_history)
    approve = _call(ops.facts_approve)
    reject = _call(ops.facts_reject)
    restore = _call(ops.facts_restore)
    undo_supersession = _call(ops.facts_undo_supersession)
    import_ = _call(ops.facts_import)
    search = _call(ops.facts_search)


class Episodes(_Resource):
    """`client.episodes`: store conversations, list, read and search them."""

    store = _call(ops.episodes_store)
    list = _paged(ops.episodes_list)
    get = _call(ops.episodes_get)
    search = _call(ops.episodes_search)
    retry = _call(ops.episodes_retry)


class KnowledgeBase(_Resource):
    """`client.kb`: the tenant's documents, shared by its users."""

    upload = _call(ops.kb_upload)
    list = _paged(ops.kb_list)
    get = _call(ops.kb_get)
    delete = _call(ops.kb_delete)
    retry = _call(ops.kb_retry)
    search = _call(ops.kb_search)


class Conflicts(_Resource):
    """`client.conflicts`: contradictions between facts waiting for a resolution."""

    list = _paged(ops.conflicts_list)
    resolve = _call(ops.conflicts_resolve)


class ForgetPolicies(_Resource):
    """`client.forget_policy`: the tenant's forgetting rules."""

    get = _call(ops.forget_policy_get)
    replace = _call(ops.forget_policy_replace)
    update = _call(ops.forget_policy_update)
    delete = _call(ops.forget_policy_delete)
    dry_run = _call(ops.forget_policy_dry_run)


class ForgetRuns(_Resource):
    """`client.forget_runs`: what the forget policy did (and what dry runs would have done)."""

    list = _paged(ops.forget_runs_list)
    get = _call(ops.forget_runs_get)


class Users(_Resource):
    """`client.users`: one end user's memory as a whole: erase, export, import."""

    erase = _call(ops.users_erase)
    export = _streamed(ops.users_export)
    import_ = _call(ops.users_import)


class Tools(_Resource):
    """`client.tools`: the memory tools for a model's function calling, and running the calls it makes."""

    list = _call(ops.tools_list)
    call = _call(ops.tools_call)
