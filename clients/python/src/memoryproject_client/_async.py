"""The asynchronous client: AsyncMemoryClient, on an httpx2.AsyncClient, with the same resources and methods as
MemoryClient (each a coroutine; lists and exports are async iterators)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast

import anyio
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


def _call(operation: Callable[P, Request[T] | Plan[T]]) -> Callable[Concatenate[Any, P], Awaitable[T]]:
    """A coroutine method that sends what `operation` describes and returns the parsed answer."""

    async def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await _client_of(self)._run(operation(*args, **kwargs))

    return method_like(method, operation)


def _paged(operation: Callable[P, PageRequest[ItemT]]) -> Callable[Concatenate[Any, P], AsyncPager[ItemT]]:
    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> AsyncPager[ItemT]:
        return AsyncPager(_client_of(self), operation(*args, **kwargs))

    return method_like(method, operation, returns="AsyncPager")


def _streamed(operation: Callable[P, LinesRequest]) -> Callable[Concatenate[Any, P], AsyncIterator[dict[str, Any]]]:
    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[dict[str, Any]]:
        return _client_of(self)._lines(operation(*args, **kwargs))

    return method_like(method, operation, returns="AsyncIterator[dict]")


def _client_of(owner: Any) -> AsyncMemoryClient:
    return owner if isinstance(owner, AsyncMemoryClient) else owner._client


class AsyncMemoryClient:
    """MemoryClient's asynchronous twin: the same arguments, resources and methods, awaited.

    async with AsyncMemoryClient("http://localhost:8000", "mp_...") as client:
        await client.facts.remember("alice", "prefers PostgreSQL", category="preference")
        async for fact in client.facts.list("alice"):
            print(fact.content)
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
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        settings = client_settings(base_url, api_key, headers)
        self.base_url = settings.base_url
        self.retry = RetryPolicy(max_retries=max_retries, backoff=retry_backoff, max_delay=max_retry_delay)
        self._owns_http = http_client is None
        self._http = http_client or httpx2.AsyncClient(timeout=timeout)
        self._http.base_url = httpx2.URL(settings.base_url)
        self._http.headers.update(settings.headers)

        self.facts = AsyncFacts(self)
        self.episodes = AsyncEpisodes(self)
        self.kb = AsyncKnowledgeBase(self)
        self.conflicts = AsyncConflicts(self)
        self.forget_policy = AsyncForgetPolicies(self)
        self.forget_runs = AsyncForgetRuns(self)
        self.users = AsyncUsers(self)
        self.tools = AsyncTools(self)

    context = _call(ops.context_build)
    whoami = _call(ops.whoami)
    health = _call(ops.health)
    embedding_cache = _call(ops.embedding_cache)

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    def __repr__(self) -> str:
        return f"AsyncMemoryClient({self.base_url!r})"

    # --- sending (as MemoryClient's, awaited) --------------------------------------------------------------------

    async def _send(self, request: Request[Any]) -> httpx2.Response:
        attempt = 0
        while True:
            try:
                response = await self._http.send(request.build(self._http), stream=True)
            except httpx2.TransportError as error:
                delay = self.retry.after_error(request, error, attempt)
                if delay is None:
                    raise connection_error(request, error) from error
            else:
                delay = self.retry.after_response(request, response, attempt)
                if delay is None:
                    return response
                await response.aclose()
            await anyio.sleep(delay)
            attempt += 1

    async def _request(self, request: Request[T]) -> T:
        response = await self._send(request)
        try:
            await response.aread()
        except httpx2.TransportError as error:
            raise connection_error(request, error) from error
        finally:
            await response.aclose()
        check(request, response)
        return request.parse(response)

    async def _run(self, operation: Request[T] | Plan[T]) -> T:
        if isinstance(operation, Request):
            return await self._request(operation)
        answer: Any = None
        try:
            while True:
                answer = await self._request(operation.send(answer))
        except StopIteration as done:
            return cast(T, done.value)

    async def _pages(self, first: PageRequest[ItemT]) -> AsyncIterator[Page[ItemT]]:
        cursor: str | None = None
        while True:
            page = await self._request(first.page(cursor))
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def _lines(self, operation: LinesRequest) -> AsyncIterator[dict[str, Any]]:
        request = operation.request
        response = await self._send(request)
        try:
            if response.status_code >= 400:
                await response.aread()
                check(request, response)
            try:
                async for line in response.aiter_lines():
                    record = json_line(line)
                    if record is not None:
                        yield record
            except httpx2.TransportError as error:
                raise connection_error(request, error) from error
        finally:
            await response.aclose()


class AsyncPager(Generic[ItemT]):
    """A list's items, fetched a page at a time as they are iterated (`async for`); `pages()` gives the pages."""

    def __init__(self, client: AsyncMemoryClient, first: PageRequest[ItemT]) -> None:
        self._client = client
        self._first = first

    async def __aiter__(self) -> AsyncIterator[ItemT]:
        async for page in self.pages():
            for item in page.items:
                yield item

    def pages(self) -> AsyncIterator[Page[ItemT]]:
        return self._client._pages(self._first)


class _AsyncResource:
    def __init__(self, client: AsyncMemoryClient) -> None:
        self._client = client


class AsyncFacts(_AsyncResource):
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


class AsyncEpisodes(_AsyncResource):
    store = _call(ops.episodes_store)
    list = _paged(ops.episodes_list)
    get = _call(ops.episodes_get)
    search = _call(ops.episodes_search)
    retry = _call(ops.episodes_retry)


class AsyncKnowledgeBase(_AsyncResource):
    upload = _call(ops.kb_upload)
    list = _paged(ops.kb_list)
    get = _call(ops.kb_get)
    delete = _call(ops.kb_delete)
    retry = _call(ops.kb_retry)
    search = _call(ops.kb_search)


class AsyncConflicts(_AsyncResource):
    list = _paged(ops.conflicts_list)
    resolve = _call(ops.conflicts_resolve)


class AsyncForgetPolicies(_AsyncResource):
    get = _call(ops.forget_policy_get)
    replace = _call(ops.forget_policy_replace)
    update = _call(ops.forget_policy_update)
    delete = _call(ops.forget_policy_delete)
    dry_run = _call(ops.forget_policy_dry_run)


class AsyncForgetRuns(_AsyncResource):
    list = _paged(ops.forget_runs_list)
    get = _call(ops.forget_runs_get)


class AsyncUsers(_AsyncResource):
    erase = _call(ops.users_erase)
    export = _streamed(ops.users_export)
    import_ = _call(ops.users_import)


class AsyncTools(_AsyncResource):
    list = _call(ops.tools_list)
    call = _call(ops.tools_call)
