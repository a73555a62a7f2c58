"""Odd and hostile input to the API: every answer a JSON error naming the problem, and nothing stored or changed."""

import json

import pytest
from django.test import Client

from episodes.models import Episode
from facts.models import Fact, FactEvent
from tests.factories import make_fact

pytestmark = pytest.mark.django_db

NUL = "\\u0000"  # as JSON escapes: the test client would refuse the real characters
SURROGATE = "\\ud800"


def post_raw(api, path: str, body: str, method: str = "POST"):
    return api.generic(method, path, body, content_type="application/json")


def error_of(response) -> dict:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    return response.json()["error"]


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- what PostgreSQL or Python cannot take ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (f'{{"user_id": "u1", "content": "likes tea", "metadata": {{"note": "a{NUL}b"}}}}', "metadata.note"),
        (f'{{"user_id": "u1", "content": "likes tea", "metadata": {{"k{NUL}": 1}}}}', "metadata.k\x00"),
        (
            f'{{"user_id": "u1", "content": "likes tea", "metadata": {{"tags": ["x", "{SURROGATE}"]}}}}',
            "metadata.tags[1]",
        ),
        (f'{{"user_id": "u1", "content": "likes {NUL} tea"}}', "content"),
    ],
)
def test_nul_and_lone_surrogates_in_a_new_fact_are_400_naming_the_field(api, tenant, body, field):
    response = post_raw(api, "/api/v1/facts", body)

    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "validation_error"
    assert field in error["details"]
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_nul_in_the_metadata_of_an_edit_is_400_and_the_fact_is_unchanged(api, tenant):
    fact = make_fact(tenant=tenant, metadata={"note": "kept"})

    response = post_raw(api, f"/api/v1/facts/{fact.pk}", f'{{"metadata": {{"note": "x{NUL}"}}}}', method="PATCH")

    assert response.status_code == 400
    assert "metadata.note" in error_of(response)["details"]
    fact.refresh_from_db()
    assert fact.metadata == {"note": "kept"}


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (f'{{"user_id": "u1", "content": "a{NUL}b"}}', "facts[0].content"),
        (f'{{"user_id": "u1", "content": "ok", "metadata": {{"a": "{SURROGATE}"}}}}', "facts[0].metadata.a"),
    ],
)
def test_nul_and_surrogates_in_import_items_are_400(api, tenant, item, field):
    response = post_raw(api, "/api/v1/facts/import", f'{{"facts": [{item}]}}')

    assert response.status_code == 400
    assert field in error_of(response)["details"]
    assert not Fact.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize("moment", ["0000-01-01T00:00:00Z", "2024-13-01T00:00:00Z", "10000-01-01T00:00:00Z"])
def test_impossible_dates_in_an_import_are_400_naming_the_field(api, tenant, moment):
    response = api.post(
        "/api/v1/facts/import", {"facts": [{"user_id": "u1", "content": "x", "occurred_at": moment}]}, format="json"
    )

    assert response.status_code == 400
    assert "facts[0].occurred_at" in error_of(response)["details"]
    assert not Fact.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize("path", ["/api/v1/facts", "/api/v1/episodes", "/api/v1/context", "/api/v1/kb/search"])
def test_json_nested_10000_deep_is_400_not_a_recursion_error(api, path):
    response = post_raw(api, path, f'{{"metadata": {nested(10000)}}}')

    assert response.status_code == 400
    assert "Nested deeper than" in error_of(response)["message"]


def test_the_nesting_limit_is_the_documented_setting(api, tenant, settings):
    settings.API_MAX_JSON_DEPTH = 4
    shallow = {"user_id": "u1", "content": "likes tea", "metadata": {"a": {"b": 1}}}  # 3 levels
    deep = {"user_id": "u1", "content": "likes coffee", "metadata": {"a": {"b": {"c": [1]}}}}  # 5 levels

    assert api.post("/api/v1/facts", shallow, format="json").status_code == 201
    response = api.post("/api/v1/facts", deep, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {"metadata.a.b.c": ["Nested deeper than 4 levels."]}


def test_invalid_json_is_400_in_the_error_shape(api):
    response = post_raw(api, "/api/v1/facts", '{"user_id": "u1", "content": ')

    assert response.status_code == 400
    assert error_of(response)["code"] == "parse_error"


def test_nan_is_not_json(api):
    response = post_raw(api, "/api/v1/facts", '{"user_id": "u1", "content": "x", "confidence": NaN}')

    assert response.status_code == 400


# --- text that says nothing, and text that is not text -------------------------------------------------------------


@pytest.mark.parametrize("content", ["\u200b\u200b", "\u200d \ufeff", "\u2060", "   "])
def test_a_fact_without_visible_characters_is_refused(api, tenant, content):
    response = api.post("/api/v1/facts", {"user_id": "u1", "content": content}, format="json")

    assert response.status_code == 400
    assert "content" in error_of(response)["details"]
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_an_import_item_without_visible_characters_is_refused(api, tenant):
    response = api.post("/api/v1/facts/import", {"facts": [{"user_id": "u1", "content": "\u200b"}]}, format="json")

    assert response.status_code == 400
    assert "facts[0].content" in error_of(response)["details"]


@pytest.mark.parametrize("path", ["/api/v1/facts/search", "/api/v1/context"])
def test_a_query_of_zero_width_characters_is_refused(api, path):
    response = api.post(path, {"user_id": "u1", "query": "\u200b\u200c"}, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"]["query"] == ["Must contain visible characters."]


def test_a_message_or_a_document_without_visible_characters_is_refused(api, tenant):
    body = {"user_id": "u1", "session_id": "s1", "messages": [{"role": "user", "content": " \u200b "}]}

    episode = api.post("/api/v1/episodes", body, format="json")
    document = api.post("/api/v1/kb/documents", {"doc_id": "a.md", "text": "\n\ufeff\n"}, format="json")

    assert episode.status_code == 400
    assert error_of(episode)["details"] == {"messages": {"0": {"content": ["Must contain visible characters."]}}}
    assert document.status_code == 400
    assert error_of(document)["details"] == {"text": ["Must contain visible characters."]}
    assert not Episode.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize("content", [42, 4.5, True, ["likes tea"], {"text": "likes tea"}])
def test_content_that_is_not_a_string_is_refused(api, tenant, content):
    response = api.post("/api/v1/facts", {"user_id": "u1", "content": content}, format="json")

    assert response.status_code == 400
    assert "content" in error_of(response)["details"]
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_an_import_item_with_numeric_content_is_refused(api, tenant):
    response = api.post("/api/v1/facts/import", {"facts": [{"user_id": "u1", "content": 42}]}, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {"facts[0].content": ["Must be text."]}


def test_a_message_that_is_a_number_is_refused(api, tenant):
    body = {"user_id": "u1", "session_id": "s1", "messages": [{"role": "user", "content": 7}]}

    response = api.post("/api/v1/episodes", body, format="json")

    assert response.status_code == 400
    assert "messages" in error_of(response)["details"]
    assert not Episode.objects.filter(tenant=tenant).exists()


# --- nothing the caller sends is silently ignored ------------------------------------------------------------------


@pytest.mark.parametrize("body", [{"colour": "red"}, {"status": "archived"}, {"content": "x", "user_id": "other"}])
def test_a_patch_with_a_field_it_cannot_change_is_400_and_writes_nothing(api, tenant, body):
    fact = make_fact(tenant=tenant)
    events = FactEvent.objects.filter(fact_id=fact.pk).count()

    response = api.patch(f"/api/v1/facts/{fact.pk}", body, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"][next(name for name in body if name != "content")] == ["Unknown field."]
    assert FactEvent.objects.filter(fact_id=fact.pk).count() == events
    fact.refresh_from_db()
    assert (fact.status, fact.content) == ("active", "prefers PostgreSQL")


def test_a_patch_that_changes_nothing_writes_no_event(api, tenant):
    fact = make_fact(tenant=tenant, category="preference")
    updated_at = fact.updated_at
    events = FactEvent.objects.filter(fact_id=fact.pk).count()

    same = api.patch(
        f"/api/v1/facts/{fact.pk}", {"content": "prefers  PostgreSQL", "category": "preference"}, format="json"
    )
    changed = api.patch(f"/api/v1/facts/{fact.pk}", {"agent_id": "planner"}, format="json")

    assert same.status_code == 200
    fact.refresh_from_db()
    assert FactEvent.objects.filter(fact_id=fact.pk).count() == events + 1  # only the agent_id change
    assert fact.agent_id == "planner"
    assert changed.json()["agent_id"] == "planner"
    assert fact.updated_at > updated_at


def test_an_unknown_field_in_a_new_fact_is_400(api, tenant):
    response = api.post("/api/v1/facts", {"user_id": "u1", "content": "likes tea", "importance": 5}, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {"importance": ["Unknown field."]}
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_an_unknown_field_in_a_message_or_an_import_item_is_400(api, tenant):
    message = {"role": "user", "content": "hi", "name": "Ana"}
    episode = api.post("/api/v1/episodes", {"user_id": "u1", "session_id": "s", "messages": [message]}, format="json")
    imported = api.post("/api/v1/facts/import", {"facts": [{"user_id": "u1", "content": "x", "tag": 1}]}, format="json")

    assert episode.status_code == 400
    assert "messages" in error_of(episode)["details"]
    assert imported.status_code == 400
    assert error_of(imported)["details"] == {"facts[0].tag": ["Unknown field."]}


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59-12:00"])
def test_moments_at_the_edge_of_the_calendar_are_400_not_an_overflow(api, moment):
    dry_run = api.post("/api/v1/forget-policy/dry-run", {"as_of": moment}, format="json")
    search = api.post("/api/v1/facts/search", {"user_id": "u1", "query": "tea", "as_of": moment}, format="json")

    assert dry_run.status_code == 400
    assert error_of(dry_run)["details"] == {"as_of": ["Must be between the years 1000 and 9000."]}
    assert search.status_code == 400


def test_a_forget_dry_run_refuses_a_body_it_would_ignore(api):
    response = api.post("/api/v1/forget-policy/dry-run", {"max_unused_days": 10}, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {"max_unused_days": ["Unknown field."]}


def test_an_operation_without_a_body_refuses_one(api, tenant):
    fact = make_fact(tenant=tenant, status="pending")

    with_body = api.post(f"/api/v1/facts/{fact.pk}/approve", {"content": "edited"}, format="json")
    empty = api.post(f"/api/v1/facts/{fact.pk}/approve", {}, format="json")

    assert with_body.status_code == 400
    assert error_of(with_body)["message"] == "This operation takes no request body."
    assert empty.status_code == 200
    assert empty.json()["content"] == "prefers PostgreSQL"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=abc", "limit"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("cursor=not-a-cursor", "cursor"),
        ("colour=red", "colour"),
        ("status=active&status=pending", "status"),
    ],
)
def test_malformed_or_unknown_query_parameters_are_400(api, tenant, query, field):
    response = api.get(f"/api/v1/facts?user_id=u1&{query}")

    assert response.status_code == 400
    assert field in error_of(response)["details"]


def test_limit_and_cursor_page_through_a_list(api, tenant):
    for index in range(3):
        make_fact(tenant=tenant, user_id="u1", content=f"fact {index}")

    first = api.get("/api/v1/facts?user_id=u1&limit=2").json()
    second = api.get(first["next"]).json()

    assert len(first["results"]) == 2
    assert len(second["results"]) == 1


@pytest.mark.parametrize(
    "path",
    ["/api/v1/whoami?verbose=1", "/api/v1/forget-policy?x=1", "/api/v1/kb/documents?user_id=u1"],
)
def test_query_parameters_an_operation_does_not_read_are_400(api, path):
    response = api.get(path)

    assert response.status_code == 400
    assert error_of(response)["code"] == "validation_error"


def test_query_parameters_on_a_post_are_400(api):
    response = api.post("/api/v1/facts?dry_run=1", {"user_id": "u1", "content": "likes tea"}, format="json")

    assert response.status_code == 400
    assert error_of(response)["details"] == {"dry_run": ["Unknown query parameter."]}


# --- one error shape for everything under /api/ -------------------------------------------------------------------


@pytest.fixture(params=[False, True], ids=["debug-off", "debug-on"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


@pytest.mark.parametrize("path", ["/api/v1/facts/abc", "/api/v1/nope", "/api/nothing", "/api/v1/users/"])
def test_unknown_routes_are_json_404_without_the_url_list(api, debug, path):
    response = api.get(path)

    assert response.status_code == 404
    assert error_of(response) == {"code": "not_found", "message": "No such resource or route.", "details": {}}
    assert b"urlpatterns" not in response.content
    assert b"api/v1/" not in response.content


def test_an_unexpected_error_is_a_json_500_without_a_traceback(api, tenant, debug, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr("facts.selectors.fact_get", broken)
    fact = make_fact(tenant=tenant)
    api.raise_request_exception = False

    response = api.get(f"/api/v1/facts/{fact.pk}")

    assert response.status_code == 500
    assert error_of(response)["code"] == "server_error"
    assert b"secret internals" not in response.content
    assert b"Traceback" not in response.content


def test_a_bad_host_header_is_a_json_400(tenant_and_key, debug):
    response = Client(HTTP_HOST="evil.example").get("/api/v1/whoami")

    assert response.status_code == 400
    assert error_of(response)["code"] == "bad_request"


def test_method_not_allowed_and_unsupported_media_type_are_in_the_shape(api):
    not_allowed = api.put("/api/v1/facts", {}, format="json")
    unsupported = api.generic("POST", "/api/v1/facts", "user_id=u1", content_type="text/plain")

    assert not_allowed.status_code == 405
    assert error_of(not_allowed)["code"] == "method_not_allowed"
    assert unsupported.status_code == 415
    assert error_of(unsupported)["code"] == "unsupported_media_type"


def test_a_missing_key_is_a_json_401(db):
    response = Client().get("/api/v1/whoami")

    assert response.status_code == 401
    assert error_of(response)["code"] in {"not_authenticated", "authentication_failed"}


# --- body limits ----------------------------------------------------------------------------------------------------


def test_a_body_over_the_api_limit_is_413_before_it_is_read(api, tenant, settings):
    settings.API_MAX_BODY_BYTES = 1000
    body = json.dumps({"user_id": "u1", "content": "x" * 2000})

    response = post_raw(api, "/api/v1/facts", body)

    assert response.status_code == 413
    error = error_of(response)
    assert error["code"] == "payload_too_large"
    assert error["details"] == {"max_bytes": 1000, "size_bytes": len(body)}
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_an_episode_body_over_its_documented_limits_is_413_not_django_400(api, tenant):
    message = {"role": "user", "content": "word " * 3000}  # 15,000 characters
    body = {"user_id": "u1", "session_id": "s1", "messages": [message] * 200}  # 3 MB, over 200,000 characters

    response = api.post("/api/v1/episodes", body, format="json")

    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large"
    assert not Episode.objects.filter(tenant=tenant).exists()


def test_a_kb_document_of_4_mb_sent_as_json_is_taken(api, tenant):
    text = "\n\n".join(f"## Section {index}\n\n" + "Lorem ipsum dolor sit amet. " * 140 for index in range(1000))
    assert 3_500_000 < len(text.encode()) < 5 * 1024 * 1024

    response = api.post("/api/v1/kb/documents", {"doc_id": "big.md", "text": text}, format="json")

    assert response.status_code == 202, response.content[:300]  # taken, and left to the worker (issue 17)
    assert response.json()["document"]["size_bytes"] == len(text.encode())
