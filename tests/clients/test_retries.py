"""The client's retries against a real local HTTP server that answers from a script (429, 503, an error, a dropped
connection, then success): what is sent again, after how long, and what is never sent twice."""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memoryproject_client import (
    APIConnectionError,
    AsyncMemoryClient,
    MemoryClient,
    RateLimitError,
    ServerError,
    UnavailableError,
    ValidationError,
)

WHOAMI = {"tenant": "acme", "key_prefix": "mp_abc", "key_name": "default"}
FACT = {"id": 7, "user_id": "alice", "content": "Prefers tea", "status": "active"}
DROP = "drop"  # read the request, then close the connection without answering


@dataclass
class Answer:
    status: int = 200
    body: object = None
    headers: dict = field(default_factory=dict)


@dataclass
class ScriptedServer:
    """Answers each request with the next scripted answer (the last one again once the script runs out) and records
    what it received and when."""

    script: list
    received: list = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address
        return f"http://{host}:{port}"

    def next_answer(self, method: str, path: str, body: bytes):
        with self._lock:
            self.received.append({"at": time.monotonic(), "method": method, "path": path, "body": body})
            return self.script[min(len(self.received), len(self.script)) - 1]

    def gaps(self) -> list[float]:
        times = [request["at"] for request in self.received]
        return [later - earlier for earlier, later in zip(times, times[1:], strict=False)]


def _handler_for(server: ScriptedServer):
    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answer = server.next_answer(self.command, self.path, body)
            if answer == DROP:
                self.close_connection = True
                return
            data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
            self.send_response(answer.status)
            headers = {"Content-Type": "application/json", **answer.headers}
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer  # noqa: N815 - the http.server API

        def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
            pass

    return Handler


@pytest.fixture
def scripted():
    servers = []

    def start(*script) -> ScriptedServer:
        server = ScriptedServer(list(script))
        server._thread.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server._server.shutdown()
        server._server.server_close()


def error(status: int, code: str, message: str, details=None, **headers) -> Answer:
    return Answer(status, {"error": {"code": code, "message": message, "details": details or {}}}, headers)


def test_a_429_with_retry_after_is_waited_out_then_answered(scripted):
    server = scripted(error(429, "throttled", "Request was throttled.", **{"Retry-After": "1"}), Answer(200, WHOAMI))

    with MemoryClient(server.url, "mp_key", retry_backoff=0.01) as client:
        who = client.whoami()

    assert who.tenant == "acme"
    assert len(server.received) == 2
    assert 0.9 <= server.gaps()[0] < 5  # the server's second, not the 10 ms backoff


def test_a_refused_post_is_sent_again_with_the_same_body(scripted):
    # 429 and 503 mean the server did not act on the request: even a POST that creates something is safe to resend.
    remembered = {"outcome": "created", "fact": FACT, "superseded_ids": [], "conflict_ids": []}
    server = scripted(
        error(503, "database_unavailable", "Retry shortly."),
        error(429, "throttled", "Slow down."),
        Answer(201, remembered),
    )

    with MemoryClient(server.url, "mp_key", retry_backoff=0.01) as client:
        result = client.facts.remember("alice", "Prefers tea")

    assert (result.outcome, result.fact.id) == ("created", 7)
    assert [request["method"] for request in server.received] == ["POST"] * 3
    assert len({request["body"] for request in server.received}) == 1
    assert json.loads(server.received[0]["body"]) == {"user_id": "alice", "content": "Prefers tea"}


def test_a_400_is_raised_at_once_with_the_fields(scripted):
    details = {"confidence": ["Ensure this value is less than or equal to 1.0."]}
    server = scripted(error(400, "validation_error", "confidence: Ensure this value ...", details), Answer(201, {}))

    with MemoryClient(server.url, "mp_key", retry_backoff=0.01) as client, pytest.raises(ValidationError) as refused:
        client.facts.remember("alice", "Prefers tea", confidence=2)

    assert len(server.received) == 1
    assert (refused.value.status, refused.value.code, refused.value.details) == (400, "validation_error", details)


def test_retries_stop_after_max_retries_with_the_servers_wait(scripted):
    server = scripted(error(429, "throttled", "Slow down.", **{"Retry-After": "0"}))

    with MemoryClient(server.url, "mp_key", max_retries=2) as client, pytest.raises(RateLimitError) as refused:
        client.whoami()

    assert len(server.received) == 3
    assert (refused.value.status, refused.value.code, refused.value.retry_after) == (429, "throttled", 0.0)


def test_a_long_retry_after_is_capped(scripted):
    server = scripted(error(503, "queue_unavailable", "Later.", **{"Retry-After": "120"}), Answer(200, WHOAMI))

    with MemoryClient(server.url, "mp_key", max_retry_delay=0.2) as client:
        client.whoami()

    assert 0.15 <= server.gaps()[0] < 3


def test_a_dropped_connection_is_retried_for_a_read_but_never_for_a_post(scripted):
    reads = scripted(DROP, Answer(200, FACT))
    writes = scripted(DROP, Answer(201, {"outcome": "created", "fact": FACT}))

    with MemoryClient(reads.url, "mp_key", retry_backoff=0.01) as client:
        fact = client.facts.get(7)
    with MemoryClient(writes.url, "mp_key", retry_backoff=0.01) as client, pytest.raises(APIConnectionError) as failed:
        client.facts.remember("alice", "Prefers tea")

    assert fact.content == "Prefers tea"
    assert len(reads.received) == 2
    assert len(writes.received) == 1  # it may have been stored: sending it again could store it twice
    assert (failed.value.status, failed.value.code) == (0, "connection_error")


def test_an_error_page_that_is_not_json_still_raises_with_its_status(scripted):
    server = scripted(Answer(502, b"<html>Bad gateway</html>", {"Content-Type": "text/html"}))

    with MemoryClient(server.url, "mp_key") as client, pytest.raises(ServerError) as failed:
        client.whoami()

    assert (failed.value.status, failed.value.code, failed.value.message) == (502, "http_502", "Bad Gateway.")
    assert len(server.received) == 1  # only 429 and 503 say "try again"


@pytest.mark.anyio
async def test_the_async_client_waits_out_retry_after_too(scripted):
    server = scripted(error(503, "database_unavailable", "Retry.", **{"Retry-After": "1"}), Answer(200, WHOAMI))

    async with AsyncMemoryClient(server.url, "mp_key", retry_backoff=0.01) as client:
        who = await client.whoami()
    failing = scripted(error(503, "database_unavailable", "Retry.", **{"Retry-After": "0"}))
    async with AsyncMemoryClient(failing.url, "mp_key", max_retries=1) as client:
        with pytest.raises(UnavailableError) as refused:
            await client.facts.search("alice", "tea")

    assert who.tenant == "acme"
    assert 0.9 <= server.gaps()[0] < 5
    assert len(failing.received) == 2
    assert refused.value.retry_after == 0.0
