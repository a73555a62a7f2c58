"""GET /api/v1/tools and POST /api/v1/tools/call: the definitions a model is given, and each tool run through the
API as a model would call it. A wrong call is a 200 with is_error and a message, never a 400 or 500."""

import json

import jsonschema
import pytest

from facts.models import Fact, FactEvent
from kb.services import document_index
from tests.factories import client_with_key, make_fact, make_tenant

pytestmark = pytest.mark.django_db

TOOL_NAMES = [
    "memory_add",
    "memory_update",
    "memory_delete",
    "memory_search",
    "memory_load",
    "memory_clear",
    "kb_search",
]


def call(api, name, arguments=None, user_id="alice", **envelope):
    body = {"user_id": user_id, "name": name, **envelope}
    if arguments is not None:
        body["arguments"] = arguments
    response = api.post("/api/v1/tools/call", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def ok(api, name, arguments=None, **envelope):
    result = call(api, name, arguments, **envelope)
    assert result["is_error"] is False, result["content"]
    return result


def add(api, content, user_id="alice", **arguments):
    return ok(api, "memory_add", {"content": content, **arguments}, user_id=user_id)["data"]["fact"]["id"]


# --- definitions ----------------------------------------------------------------------------------------------------


def test_the_openai_definitions_are_functions_with_valid_json_schemas(api):
    response = api.get("/api/v1/tools")

    assert response.status_code == 200
    tools = response.json()["tools"]
    assert [tool["function"]["name"] for tool in tools] == TOOL_NAMES
    for tool in tools:
        assert tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        parameters = tool["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)  # raises on an invalid schema
        assert parameters["type"] == "object"
        assert parameters["additionalProperties"] is False
        assert len(tool["function"]["description"]) > 80, tool["function"]["name"]  # says when, not only what


def test_the_anthropic_definitions_are_the_same_tools_in_anthropics_shape(api):
    listed = api.get("/api/v1/tools?format=openai").json()["tools"]
    openai = {tool["function"]["name"]: tool["function"] for tool in listed}

    response = api.get("/api/v1/tools?format=anthropic")

    assert response.status_code == 200
    tools = response.json()["tools"]
    assert [tool["name"] for tool in tools] == TOOL_NAMES
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        jsonschema.Draft202012Validator.check_schema(tool["input_schema"])
        assert tool["input_schema"] == openai[tool["name"]]["parameters"]
        assert tool["description"] == openai[tool["name"]]["description"]


def test_the_schemas_bound_limits_and_confidence_and_enumerate_the_categories(api):
    tools = {tool["name"]: tool["input_schema"] for tool in api.get("/api/v1/tools?format=anthropic").json()["tools"]}

    add_properties = tools["memory_add"]["properties"]
    assert add_properties["category"]["enum"] == Fact.Category.values
    assert (add_properties["confidence"]["minimum"], add_properties["confidence"]["maximum"]) == (0, 1)
    assert tools["memory_add"]["required"] == ["content"]
    for name in ("memory_search", "memory_load", "kb_search"):
        limit = tools[name]["properties"]["limit"]
        assert limit["type"] == "integer"
        assert limit["minimum"] == 1
        assert limit["maximum"] <= 100
    assert tools["memory_clear"]["required"] == ["confirm"]


@pytest.mark.parametrize("query", ["format=gemini", "format=openai&format=anthropic", "verbose=1"])
def test_an_unknown_format_or_parameter_is_400(api, query):
    response = api.get(f"/api/v1/tools?{query}")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"


# --- each tool does what it says ------------------------------------------------------------------------------------


def test_a_fact_added_is_found_by_search_with_its_id_and_score(api, tenant):
    added = ok(api, "memory_add", {"content": "Prefers PostgreSQL for new projects", "category": "preference"})
    add(api, "Has a cat named Miso", category="profile")
    add(api, "Prefers PostgreSQL for everything", user_id="bob")

    found = ok(api, "memory_search", {"query": "which database does she prefer?", "limit": 1})

    fact = Fact.objects.get(pk=added["data"]["fact"]["id"])
    assert added["data"]["outcome"] == "created"
    assert f"fact {fact.pk}" in added["content"]
    assert (fact.tenant, fact.user_id, fact.source, fact.category) == (tenant, "alice", "agent", "preference")
    assert fact.content == "Prefers PostgreSQL for new projects"
    [result] = found["data"]["results"]
    assert result["id"] == fact.pk
    assert set(result) == {"id", "content", "category", "score", "valid_from"}
    assert result["score"] > 0
    assert found["data"]["degraded"] == []
    assert found["content"].startswith("Found 1 fact(s)")
    assert f"1. [fact {fact.pk}] Prefers PostgreSQL for new projects (preference, since " in found["content"]


def test_arguments_given_as_a_json_string_as_openai_hands_them_over(api):
    result = ok(api, "memory_add", json.dumps({"content": "Lives in Lisbon", "category": "profile"}))

    assert Fact.objects.get(pk=result["data"]["fact"]["id"]).content == "Lives in Lisbon"


def test_a_search_with_no_match_says_so(api):
    result = ok(api, "memory_search", {"query": "zebra"})

    assert result["data"]["results"] == []
    assert result["content"] == "No stored fact about this user matches."


def test_a_search_counts_a_use_of_each_fact_it_shows_the_model(api):
    fact_id = add(api, "Prefers PostgreSQL for new projects")

    ok(api, "memory_search", {"query": "PostgreSQL"})

    assert Fact.objects.get(pk=fact_id).usage_count == 1


def test_update_changes_only_the_fields_given(api):
    fact_id = add(api, "Works at Initech", category="profile", confidence=0.9)

    result = ok(api, "memory_update", {"fact_id": fact_id, "content": "Works at Globex", "pinned": True})

    fact = Fact.objects.get(pk=fact_id)
    assert (fact.content, fact.pinned, fact.category, fact.confidence) == ("Works at Globex", True, "profile", 0.9)
    assert result["data"]["fact"]["content"] == "Works at Globex"
    assert result["content"] == f"Updated fact {fact_id}: Works at Globex"
    assert FactEvent.objects.filter(fact_id=fact_id, action="updated").exists()  # the history keeps the old text


def test_delete_removes_the_fact(api):
    fact_id = add(api, "Works at Initech")

    result = ok(api, "memory_delete", {"fact_id": fact_id})

    assert result["content"] == f"Deleted fact {fact_id}."
    assert not Fact.objects.filter(pk=fact_id).exists()
    assert ok(api, "memory_search", {"query": "Initech"})["data"]["results"] == []


def test_load_gives_pinned_facts_first_then_the_most_used_and_only_current_active_ones(api, tenant):
    plain = make_fact(tenant=tenant, user_id="alice", content="Has a cat")
    used = make_fact(tenant=tenant, user_id="alice", content="Prefers tea", usage_count=12)
    pinned = make_fact(tenant=tenant, user_id="alice", content="Allergic to shellfish", pinned=True)
    unsure = make_fact(tenant=tenant, user_id="alice", content="Maybe vegan", confidence=0.2, usage_count=12)
    make_fact(tenant=tenant, user_id="alice", content="Waits for review", status=Fact.Status.PENDING)
    make_fact(tenant=tenant, user_id="alice", content="Forgotten", status=Fact.Status.ARCHIVED)
    retired = make_fact(tenant=tenant, user_id="alice", content="Lived in Lisbon")
    Fact.objects.filter(pk=retired.pk).update(valid_to=retired.valid_from)
    make_fact(tenant=tenant, user_id="bob", content="Bob's own", pinned=True)

    result = ok(api, "memory_load", {})

    assert [fact["id"] for fact in result["data"]["facts"]] == [pinned.pk, used.pk, unsure.pk, plain.pk]
    first = f"1. [fact {pinned.pk}, pinned] Allergic to shellfish (other, since {pinned.valid_from:%Y-%m-%d})"
    assert result["content"].splitlines()[1] == "<memory>"
    assert result["content"].splitlines()[3] == first
    assert [fact["id"] for fact in ok(api, "memory_load", {"limit": 2})["data"]["facts"]] == [pinned.pk, used.pk]
    assert Fact.objects.get(pk=used.pk).usage_count == 12  # a load is not a use


def test_load_for_a_new_user_says_nothing_is_known(api):
    result = ok(api, "memory_load")

    assert result == {"content": "Nothing is stored about this user yet.", "data": {"facts": []}, "is_error": False}


def test_clear_is_refused_without_confirm_and_deletes_every_fact_of_the_user_with_it(api, tenant):
    add(api, "Prefers tea")
    make_fact(tenant=tenant, user_id="alice", content="Waits for review", status=Fact.Status.PENDING)
    kept = add(api, "Prefers coffee", user_id="bob")

    refused = call(api, "memory_clear", {"confirm": False})
    assert refused["is_error"] is True
    assert "confirm: true" in refused["content"]
    assert Fact.objects.filter(tenant=tenant, user_id="alice").count() == 2

    done = ok(api, "memory_clear", {"confirm": True})

    assert done["content"] == "Deleted all 2 fact(s) of this user."
    assert not Fact.objects.filter(tenant=tenant, user_id="alice").exists()
    assert Fact.objects.filter(pk=kept).exists()
    assert ok(api, "memory_clear", {"confirm": True})["content"] == "There was nothing to delete."


def test_kb_search_finds_a_passage_of_the_tenants_documents(api, tenant):
    document_index(
        tenant=tenant,
        doc_id="guides/deploy.md",
        text="# Deploying\n\n## Rolling back\n\nRun `make rollback` to return to the previous release.\n",
        content_type="markdown",
    )

    result = ok(api, "kb_search", {"query": "how do I roll back a release?", "limit": 3})

    hit = result["data"]["results"][0]
    assert hit["doc_id"] == "guides/deploy.md"
    assert "make rollback" in hit["text"]
    assert hit["citation"] in result["content"]
    assert "make rollback" in result["content"]


def test_an_agent_id_narrows_the_tools_to_that_agents_facts(api):
    ok(api, "memory_add", {"content": "Prefers dark mode in the IDE"}, agent_id="coder")

    fact = Fact.objects.get(content="Prefers dark mode in the IDE")
    assert fact.agent_id == "coder"
    assert ok(api, "memory_search", {"query": "dark mode"}, agent_id="coder")["data"]["results"]
    assert ok(api, "memory_search", {"query": "dark mode"}, agent_id="writer")["data"]["results"] == []
    assert call(api, "memory_delete", {"fact_id": fact.pk}, agent_id="writer")["is_error"] is True
    assert ok(api, "memory_search", {"query": "dark mode"})["data"]["results"]  # no agent: all of the user's


# --- bad calls are tool errors --------------------------------------------------------------------------------------

BAD_CALLS = [
    ("memory_forget", {}, "Unknown tool 'memory_forget'. The tools are: memory_add, memory_update"),
    ("memory_add", {}, "Invalid arguments for memory_add: 'content' is a required property."),
    ("memory_add", {"content": "x", "mood": "happy"}, "Additional properties are not allowed ('mood' was unexpected)"),
    ("memory_add", {"content": 42}, "content: 42 is not of type 'string'"),
    ("memory_add", {"content": ""}, "content: '' should be non-empty"),
    ("memory_add", {"content": "   "}, "content: Must not be empty."),
    ("memory_add", {"content": "x", "confidence": 1.5}, "confidence: 1.5 is greater than the maximum of 1"),
    ("memory_add", {"content": "x", "category": "gossip"}, "category: 'gossip' is not one of ['preference'"),
    # (a NUL in an object argument is refused by the API's body parser already: 400)
    ("memory_add", '{"content": "a\\u0000b"}', "content: NUL characters (\\u0000) cannot be stored"),
    ("memory_add", '{"content": "x"', "The arguments of memory_add are not valid JSON"),
    ("memory_add", '{"content": "x", "confidence": NaN}', "The arguments of memory_add are not valid JSON"),
    ("memory_add", "[1, 2]", "The arguments of memory_add must be a JSON object, not an array."),
    ("memory_search", {"query": "tea", "limit": 500}, "limit: 500 is greater than the maximum of 50"),
    ("memory_search", {"query": "tea", "limit": True}, "limit: True is not of type 'integer'"),
    ("memory_search", {"query": "\u200b"}, "query: must contain visible characters."),
    ("memory_update", {"fact_id": 1}, "memory_update needs at least one of content, category, confidence, pinned"),
    ("memory_delete", {"fact_id": 99999999}, "Fact 99999999 not found for this user."),
    ("memory_delete", {"fact_id": 2**70}, "is greater than the maximum of 9223372036854775807"),
    ("memory_delete", {"fact_id": "7"}, "fact_id: '7' is not of type 'integer'"),
    ("memory_clear", {}, "'confirm' is a required property"),
    ("memory_clear", {"confirm": "yes"}, "confirm: 'yes' is not of type 'boolean'"),
    ("kb_search", {"query": "x" * 4001}, "query: 'xxxxxxxx"),
]


@pytest.mark.parametrize(("name", "arguments", "message"), BAD_CALLS)
def test_a_bad_tool_call_is_an_error_result_that_says_what_was_wrong(api, tenant, name, arguments, message):
    make_fact(tenant=tenant, user_id="alice", content="Prefers tea")
    before = Fact.objects.count()

    result = call(api, name, arguments)

    assert result["is_error"] is True
    assert result["data"] is None
    assert result["content"].startswith("Error: ")
    assert message in result["content"]
    assert Fact.objects.count() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "memory_load"}, "user_id"),
        ({"user_id": "alice"}, "name"),
        ({"user_id": "alice", "name": 42}, "name"),
        ({"user_id": "alice", "name": "memory_load", "session": "x"}, "session"),
        ({"user_id": "alice", "name": "memory_load", "arguments": 42}, "arguments"),
        ({"user_id": "alice", "name": "memory_load", "arguments": [1]}, "arguments"),
        ({"user_id": "al ice", "name": "memory_load"}, "user_id"),
        ({"user_id": "alice", "name": "memory_load", "agent_id": "a" * 256}, "agent_id"),
    ],
)
def test_a_malformed_envelope_is_a_json_400_naming_the_field(api, body, field):
    response = api.post("/api/v1/tools/call", body, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert field in error["details"]


def test_without_a_key_the_call_is_401(db):
    response = client_with_key("mp_wrong").post(
        "/api/v1/tools/call", {"user_id": "alice", "name": "memory_load"}, format="json"
    )

    assert response.status_code == 401


# --- another user's or tenant's facts -------------------------------------------------------------------------------


@pytest.fixture
def strangers_facts(tenant):
    other_tenant, _ = make_tenant("globex")
    return {
        "another user": make_fact(tenant=tenant, user_id="bob", content="Bob prefers MySQL"),
        "another tenant": make_fact(tenant=other_tenant, user_id="alice", content="Globex's Alice prefers MySQL"),
    }


@pytest.mark.parametrize("whose", ["another user", "another tenant"])
@pytest.mark.parametrize(
    ("name", "arguments"),
    [("memory_update", {"content": "Prefers SQLite", "pinned": True}), ("memory_delete", {})],
)
def test_a_fact_of_another_user_or_tenant_is_not_found_and_unchanged(api, strangers_facts, whose, name, arguments):
    fact = strangers_facts[whose]

    result = call(api, name, {"fact_id": fact.pk, **arguments})

    assert result["is_error"] is True
    assert result["content"] == f"Error: Fact {fact.pk} not found for this user."
    unchanged = Fact.objects.get(pk=fact.pk)
    assert (unchanged.content, unchanged.pinned, unchanged.updated_at) == (fact.content, False, fact.updated_at)


def test_search_load_and_clear_never_reach_another_users_or_tenants_facts(api, strangers_facts):
    assert ok(api, "memory_search", {"query": "prefers MySQL"})["data"]["results"] == []
    assert ok(api, "memory_load")["data"]["facts"] == []
    ok(api, "memory_clear", {"confirm": True})

    assert Fact.objects.filter(pk__in=[fact.pk for fact in strangers_facts.values()]).count() == 2
