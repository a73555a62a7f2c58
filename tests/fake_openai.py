"""A real HTTP server speaking the OpenAI embeddings and chat-completions wire format, for tests and benchmarks.

Vectors are deterministic (feature hashing of the input); chat replies are scripted (text, or tool calls:
`tool_calls_reply`); every request is recorded with its body (`requests_to`); failures (status codes,
delays, wrong vector sizes) can be queued for the next requests; an outage (every request to some paths fails
until recovered) can be switched on; chat replies can be held on a gate until released.
"""

import base64
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from ai.embedders import HashEmbedder

API_KEY = "sk-test-fake"


@dataclass
class Failure:
    status: int = 500
    delay: float = 0.0  # seconds to wait before answering (longer than the client's timeout = a timeout)
    wrong_dimensions: bool = False


@dataclass
class FakeOpenAI:
    dimensions: int = 384
    requests: list[dict] = field(default_factory=list)
    failures: deque = field(default_factory=deque)
    chat_replies: deque = field(default_factory=deque)
    outage: dict[str, int] = field(default_factory=dict)  # path -> the status every request to it gets, until recovered

    def __post_init__(self):
        self._chat_gate = threading.Event()
        self._chat_gate.set()  # open: chat replies go at once
        self.chat_waiting = threading.Event()  # set when a chat request is held at the closed gate
        self._embedder = HashEmbedder(self.dimensions)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address
        return f"http://{host}:{port}/v1"

    def start(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail_next(self, *failures: Failure) -> None:
        self.failures.extend(failures)

    def go_down(self, *paths: str, status: int = 503) -> None:
        """Every request to `paths` (default: embeddings) fails with `status` until recover() (retries included)."""
        for path in paths or ("/v1/embeddings",):
            self.outage[path] = status

    def recover(self) -> None:
        self.outage.clear()

    def hold_chat(self) -> None:
        """Chat requests wait at a gate (chat_waiting is set when one does) until release_chat()."""
        self.chat_waiting.clear()
        self._chat_gate.clear()

    def release_chat(self) -> None:
        self._chat_gate.set()

    def reply_next(self, *replies: str | dict) -> None:
        """Queue chat replies, one per chat request: the assistant message's content, or a whole assistant message
        (e.g. `tool_calls_reply(...)`)."""
        self.chat_replies.extend(replies)

    def requests_to(self, path: str) -> list[dict]:
        return [request for request in self.requests if request["path"] == path]

    # --- answers --------------------------------------------------------------------------------

    def answer(self, path: str, headers, body: dict) -> tuple[int, dict]:
        self.requests.append({"path": path, "body": body})
        if headers.get("Authorization") != f"Bearer {API_KEY}":
            return 401, _error("Incorrect API key provided.", "invalid_api_key")
        if path in self.outage:
            return self.outage[path], _error(f"outage: {path} is down", "outage")
        failure = self.failures.popleft() if self.failures else None
        if failure and failure.delay:
            time.sleep(failure.delay)
        if failure and not failure.wrong_dimensions:
            return failure.status, _error(f"scripted failure {failure.status}", "scripted")
        if path == "/v1/embeddings":
            return 200, self._embeddings(body, wrong_dimensions=bool(failure))
        if path == "/v1/chat/completions":
            if not self._chat_gate.is_set():
                self.chat_waiting.set()
                self._chat_gate.wait(30)
            return self._chat()
        return 404, _error(f"no route {path}", "not_found")

    def _embeddings(self, body: dict, *, wrong_dimensions: bool) -> dict:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = self._embedder.embed(texts)
        if wrong_dimensions:
            vectors = np.hstack([vectors, np.zeros((len(texts), 1), dtype=np.float32)])
        data = []
        for index, vector in enumerate(vectors):
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(vector.astype("<f4").tobytes()).decode()
            else:
                encoded = vector.tolist()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        return {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }

    def _chat(self) -> tuple[int, dict]:
        if not self.chat_replies:
            return 500, _error("no scripted chat reply left", "scripted")
        reply = self.chat_replies.popleft()
        message = reply if isinstance(reply, dict) else {"role": "assistant", "content": reply}
        return 200, {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "fake-chat",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


def tool_calls_reply(*calls: tuple[str, dict], content: str | None = None) -> dict:
    """An assistant message that calls tools: `calls` are (name, arguments) pairs, given ids call_1, call_2, ..."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": f"call_{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            for number, (name, arguments) in enumerate(calls, 1)
        ],
    }


def _error(message: str, code: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def _handler_for(fake: FakeOpenAI):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server API
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            status, payload = fake.answer(self.path, self.headers, body)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("retry-after-ms", "10")  # keep the client's backoff short in tests
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout) before we answered

        def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
            pass

    return Handler
