"""Logs: one JSON object per line with the request's context, X-Request-ID in and out, and no memory text."""

import io
import json
import logging
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

from core.logs import JsonFormatter, PlainFormatter, RequestContextFilter

MARKER = "Zebrafish-marker-7Q3 lives in Reykjavik"


@pytest.fixture
def log_lines():
    """Everything logged at DEBUG and up while the test runs, as the JSON formatter writes it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestContextFilter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)
    root.setLevel(level)


def access(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line["logger"] == "access"]


def test_each_request_has_an_access_line_with_its_route_and_context(api, tenant, log_lines):
    created = api.post("/api/v1/facts", {"user_id": "u1", "content": "Prefers tea"}, format="json")
    fact_id = created.json()["fact"]["id"]

    fetched = api.get(f"/api/v1/facts/{fact_id}", HTTP_X_REQUEST_ID="probe-42.a:b_c")

    [post_line, get_line] = access(log_lines())
    assert get_line["route"] == "/api/v1/facts/<int:fact_id>"  # the pattern, not the path with the id
    assert (get_line["method"], get_line["status"], get_line["tenant_id"]) == ("GET", 200, tenant.pk)
    assert get_line["request_id"] == "probe-42.a:b_c" == fetched["X-Request-ID"]
    assert get_line["level"] == "INFO"
    assert isinstance(get_line["latency_ms"], float)
    assert get_line["time"].endswith("+00:00")
    assert get_line["message"].startswith("GET /api/v1/facts/<int:fact_id> 200 ")
    assert post_line["route"] == "/api/v1/facts"
    assert post_line["status"] == 201
    assert post_line["request_id"] == created["X-Request-ID"] != get_line["request_id"]


@pytest.mark.parametrize("sent", ["", "x" * 65, "has space", "semi;colon", "-leading-dash", "é"])
def test_an_unsafe_or_long_request_id_is_replaced(api, sent):
    response = api.get("/api/v1/whoami", HTTP_X_REQUEST_ID=sent)

    returned = response["X-Request-ID"]
    assert returned != sent
    assert len(returned) == 32
    int(returned, 16)


def test_every_response_carries_a_request_id_errors_and_non_api_pages_too(client, db):
    assert client.get("/api/v1/no-such-route")["X-Request-ID"]
    assert client.get("/api/v1/whoami")["X-Request-ID"]  # 401
    assert client.get("/admin/login/")["X-Request-ID"]


def test_lines_logged_during_a_request_carry_its_id_and_tenant(api, tenant, log_lines):
    response = api.post("/api/v1/forget-policy/dry-run")
    assert response.status_code == 201, response.json()

    lines = log_lines()
    [forget] = [line for line in lines if line["logger"] == "forgetting.services"]
    assert forget["request_id"] == response["X-Request-ID"]
    assert forget["tenant_id"] == tenant.pk
    assert forget["route"] == "/api/v1/forget-policy/dry-run"


def test_an_unknown_path_is_logged_without_it(client, db, log_lines):
    client.get("/api/v1/no-such/someone%40example.com")

    lines = log_lines()
    assert lines
    assert all("someone" not in json.dumps(line) for line in lines)
    assert access(lines)[0]["route"] == "(unmatched)"


def test_memory_text_never_reaches_the_logs(api, log_lines, settings):
    settings.FACTS_AUTO_APPROVE_CONFIDENCE = 0.9
    # Given a fact, a search, a context build, an episode and a refused request, all carrying the marker text
    fact = api.post("/api/v1/facts", {"user_id": "u1", "content": MARKER, "confidence": 0.5}, format="json")
    api.post("/api/v1/facts", {"user_id": "u1", "content": MARKER}, format="json")  # a duplicate: merged
    api.post("/api/v1/facts/search", {"user_id": "u1", "query": MARKER}, format="json")
    api.post("/api/v1/context", {"user_id": "u1", "query": MARKER}, format="json")
    api.post(
        "/api/v1/episodes",
        {"user_id": "u1", "session_id": "s1", "messages": [{"role": "user", "content": f"I am {MARKER} now"}]},
        format="json",
    )
    api.post("/api/v1/facts", {"user_id": "u1", "content": MARKER, "bogus": MARKER}, format="json")  # 400
    api.get("/api/v1/facts", {"user_id": "u1", "category": MARKER})  # 400 with the text in the query string
    api.get("/api/v1/kb/search", {"query": MARKER})

    # Then the logs hold lines for all of it, and never the text
    lines = log_lines()
    assert fact.status_code == 201
    assert len(access(lines)) == 8
    text = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines)
    for word in ("Zebrafish", "Reykjavik", "7Q3"):
        assert word not in text


def test_an_unhandled_error_is_one_json_line_with_its_traceback(api, log_lines, monkeypatch):
    import facts.selectors

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(facts.selectors, "facts_search", broken)
    response = api.post("/api/v1/facts/search", {"user_id": "u1", "query": "tea"}, format="json")

    assert response.status_code == 500
    errors = [line for line in log_lines() if line["level"] == "ERROR"]
    [error] = [line for line in errors if "exception" in line]
    assert {line["message"] for line in errors} - {error["message"]} <= {"Internal Server Error: /api/v1/facts/search"}
    assert error["message"] == "Unhandled error on POST /api/v1/facts/search"
    assert "RuntimeError: boom" in error["exception"]
    assert error["request_id"] == response["X-Request-ID"]


def test_plain_lines_carry_the_request_id():
    record = logging.LogRecord("facts", logging.INFO, __file__, 1, "merged %s", (3,), None)
    record.request_id, record.tenant_id = "abc", 7

    assert PlainFormatter().format(record).endswith("INFO facts [abc tenant 7]: merged 3")


@pytest.mark.parametrize(("debug", "expected"), [("false", "json"), ("true", "plain")])
def test_log_format_defaults_to_json_in_production_and_plain_in_development(debug, expected, tmp_path):
    code = "from django.conf import settings; print(settings.LOG_FORMAT, settings.LOGGING['handlers']['console'])"
    done = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        env={
            "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
            "DJANGO_DEBUG": debug,
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "EMBEDDED_PG_DATA_DIR": str(tmp_path),
            "EMBEDDING_PROVIDER": "hash",
        },
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{expected} ")
    assert f"'formatter': '{expected}'" in done.stdout
