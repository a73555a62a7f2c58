"""mem0api.translation, table by table: Mem0 parameters and filters in our terms, our facts and events in Mem0's."""

from datetime import UTC, datetime
from types import SimpleNamespace

import hypothesis
import pytest
from django.core.exceptions import ValidationError
from hypothesis import strategies as st

from core.errors import ApplicationError
from facts.selectors import fact_filters_parse
from mem0api.translation import (
    EventRow,
    Scope,
    accepted,
    add_ids,
    field_names,
    filters_from_query,
    history_entries,
    memory_of,
    moment_of,
    only_fields,
    scope_of,
)
from search.filters import All, Any_, Not


def where(value: dict):
    """The filter language's tree of `value`, to compare a translation with."""
    return fact_filters_parse(value)


def refusal(call) -> tuple[str, str]:
    """(code, field) of what `call` raised: an ApplicationError's code, or validation_error, and the field named."""
    with pytest.raises((ApplicationError, ValidationError)) as raised:
        call()
    error = raised.value
    if isinstance(error, ApplicationError):
        return error.code, next(iter(error.details))
    return "validation_error", next(iter(error.message_dict))


# --- parameters ---------------------------------------------------------------------------------------------------

READS = frozenset({"query", "filters"})


@pytest.mark.parametrize(
    ("data", "kept"),
    [
        pytest.param({"query": "q", "filters": {}}, {"query": "q", "filters": {}}, id="what the operation reads"),
        pytest.param({"query": "q", "rerank": True, "version": "v2"}, {"query": "q"}, id="no-effect knobs dropped"),
        pytest.param({"query": "q", "org_id": "acme", "project_id": "default"}, {"query": "q"}, id="org and project"),
        pytest.param({"query": "q", "enable_graph": False, "app_id": None}, {"query": "q"}, id="features not asked"),
        pytest.param({"query": "q", "output_format": "v1.1", "latest_only": True}, {"query": "q"}, id="our defaults"),
    ],
)
def test_accepted_keeps_what_the_operation_reads_and_drops_what_asks_for_nothing(data, kept):
    assert accepted(data, reads=READS) == kept


@pytest.mark.parametrize(
    ("data", "refused"),
    [
        pytest.param({"enable_graph": True}, ("not_supported", "enable_graph"), id="graph memory"),
        pytest.param({"app_id": "shop"}, ("not_supported", "app_id"), id="apps"),
        pytest.param({"run_id": "r1"}, ("not_supported", "run_id"), id="runs where not read"),
        pytest.param({"output_format": "v1.0"}, ("not_supported", "output_format"), id="an older output format"),
        pytest.param({"latest_only": False}, ("not_supported", "latest_only"), id="older versions"),
        pytest.param({"expiration_date": "2030-01-01"}, ("not_supported", "expiration_date"), id="expiry"),
        pytest.param({"metadata": {"topic": "food"}}, ("not_supported", "metadata"), id="metadata filter"),
        pytest.param({"custom_categories": [{"food": "..."}]}, ("not_supported", "custom_categories"), id="categories"),
        pytest.param({"quary": "typo"}, ("validation_error", "quary"), id="an unknown name"),
    ],
)
def test_accepted_refuses_features_it_lacks_by_name(data, refused):
    assert refusal(lambda: accepted(data, reads=READS)) == refused


def test_accepted_refuses_a_body_that_is_not_an_object():
    assert refusal(lambda: accepted(["query"], reads=READS)) == ("validation_error", "non_field_errors")


# --- filters ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "given", "scope"),
    [
        pytest.param({"user_id": "alice"}, {}, Scope("alice"), id="a user"),
        pytest.param({"user_id": "alice", "agent_id": "travel"}, {}, Scope("alice", "travel"), id="user and agent"),
        pytest.param({"AND": [{"user_id": "alice"}, {"agent_id": "travel"}]}, {}, Scope("alice", "travel"), id="AND"),
        pytest.param(
            {"AND": [{"user_id": "alice"}, {"AND": [{"agent_id": "travel"}]}]},
            {},
            Scope("alice", "travel"),
            id="nested",
        ),
        pytest.param({"OR": [{"user_id": "alice"}]}, {}, Scope("alice"), id="OR of one branch"),
        pytest.param({"OR": [{"user_id": "alice"}, {"user_id": "alice"}]}, {}, Scope("alice"), id="OR of the same"),
        pytest.param({"user_id": {"eq": "alice"}}, {}, Scope("alice"), id="eq"),
        pytest.param({"user_id": {"in": ["alice"]}}, {}, Scope("alice"), id="in with one id"),
        pytest.param(
            {"user_id": "alice", "categories": {"in": ["preference", "profile"]}},
            {},
            Scope("alice", categories=("preference", "profile")),
            id="categories in",
        ),
        pytest.param(
            {"user_id": "alice", "categories": {"contains": "project"}},
            {},
            Scope("alice", categories=("project",)),
            id="categories contains",
        ),
        pytest.param(None, {"user_id": "alice", "agent_id": "travel"}, Scope("alice", "travel"), id="v1 top level"),
        pytest.param({"user_id": "alice"}, {"user_id": "alice"}, Scope("alice"), id="both, the same"),
        pytest.param(None, {"user_id": "张伟"}, Scope("张伟"), id="a Chinese user id"),
        pytest.param(
            None,
            {"user_id": "alice", "categories": ["decision"]},
            Scope("alice", categories=("decision",)),
            id="top-level categories",
        ),
        pytest.param(
            {"AND": [{"user_id": "alice"}, {"OR": [{"agent_id": "a"}, {"agent_id": "b"}]}]},
            {},
            Scope("alice", filters=Any_((where({"agent_id": "a"}), where({"agent_id": "b"})))),
            id="OR across agents",
        ),
        pytest.param(
            {"OR": [{"user_id": "alice", "agent_id": "a"}, {"user_id": "alice", "agent_id": "b"}]},
            {},
            Scope("alice", filters=Any_((where({"agent_id": "a"}), where({"agent_id": "b"})))),
            id="OR of one user's agents",
        ),
        pytest.param(
            {"OR": [{"user_id": "alice"}, {"user_id": "alice", "agent_id": "b"}]},
            {},
            Scope("alice"),
            id="OR holding the whole user",
        ),
        pytest.param(
            {"user_id": "alice", "agent_id": "*"},
            {},
            Scope("alice", filters=where({"agent_id": {"ne": ""}})),
            id="any agent",
        ),
        pytest.param(
            {"user_id": "alice", "created_at": {"gte": "2024-01-01"}},
            {},
            Scope("alice", filters=where({"created_at": {"gte": "2024-01-01T00:00:00Z"}})),
            id="dates",
        ),
        pytest.param(
            {"user_id": "alice", "metadata": {"a": 1, "b": {"c": {"in": ["x", "y"]}}, "d": "*"}},
            {},
            Scope(
                "alice",
                filters=where({"metadata.a": 1, "metadata.b.c": {"in": ["x", "y"]}, "metadata.d": {"exists": True}}),
            ),
            id="metadata",
        ),
        pytest.param(
            {"user_id": "alice", "NOT": {"categories": {"in": ["profile"]}}, "memory_ids": ["12", 13]},
            {},
            Scope(
                "alice", filters=All((Not(where({"category": {"in": ["profile"]}})), where({"id": {"in": [12, 13]}})))
            ),
            id="NOT and memory ids",
        ),
        pytest.param(
            {"user_id": "alice", "keywords": {"icontains": "Pizza"}},
            {},
            Scope("alice", filters=where({"content": {"icontains": "Pizza"}})),
            id="keywords",
        ),
        pytest.param({"user_id": "alice"}, {}, Scope("alice"), id="filters with the user alone"),
        pytest.param(
            None,
            {"user_id": "alice", "categories": {"nin": ["profile"]}},
            Scope("alice", filters=where({"category": {"nin": ["profile"]}})),
            id="top-level categories with another operator",
        ),
    ],
)
def test_filters_name_one_scope(filters, given, scope):
    assert scope_of(filters, **given) == scope


@pytest.mark.parametrize(
    ("filters", "given", "refused"),
    [
        pytest.param({}, {}, ("user_id_required", "user_id"), id="nobody"),
        pytest.param({"agent_id": "travel"}, {}, ("user_id_required", "user_id"), id="an agent alone"),
        pytest.param(
            {"OR": [{"user_id": "alice"}, {"user_id": "bob"}]},
            {},
            ("not_supported", "filters.OR"),
            id="OR across users",
        ),
        pytest.param({"NOT": {"user_id": "bob"}}, {}, ("not_supported", "filters.NOT"), id="NOT"),
        pytest.param({"user_id": {"in": ["alice", "bob"]}}, {}, ("not_supported", "filters.user_id.in"), id="in many"),
        pytest.param({"user_id": {"icontains": "ali"}}, {}, ("not_supported", "filters.user_id.icontains"), id="like"),
        pytest.param({"user_id": "*"}, {}, ("not_supported", "filters.user_id"), id="wildcard user"),
        pytest.param({"user_id": "alice", "run_id": "r1"}, {}, ("not_supported", "filters.run_id"), id="run"),
        pytest.param({"user_id": "alice", "app_id": "shop"}, {}, ("not_supported", "filters.app_id"), id="app"),
        pytest.param({"user_id": "alice", "colour": "red"}, {}, ("validation_error", "filters.colour"), id="unknown"),
        pytest.param(
            {"OR": [{"user_id": "alice"}, {"agent_id": "b"}]},
            {},
            ("not_supported", "filters.OR"),
            id="OR beyond the user",
        ),
        pytest.param(
            {"user_id": "alice", "metadata": {"priority": {"gte": [1]}}},
            {},
            ("validation_error", "filters.metadata.priority.gte"),
            id="a metadata value of the wrong type",
        ),
        pytest.param(
            {"user_id": "alice", "created_at": {"gte": "last week"}},
            {},
            ("validation_error", "filters.created_at.gte"),
            id="not a date",
        ),
        pytest.param(
            {"user_id": "alice", "memory_ids": ["x1"]}, {}, ("validation_error", "filters.memory_ids"), id="ids"
        ),
        pytest.param(
            None,
            {"user_id": "alice", "categories": {"in": ["profile"], "like": "x"}},
            ("validation_error", "categories.like"),
            id="top-level categories with an unknown operator",
        ),
        pytest.param({"user_id": "alice"}, {"user_id": "bob"}, ("validation_error", "filters.user_id"), id="two users"),
        pytest.param(
            {"AND": [{"user_id": "alice"}, {"user_id": "bob"}]},
            {},
            ("validation_error", "filters.AND[1].user_id"),
            id="AND of two users",
        ),
        pytest.param({"user_id": "al ice"}, {}, ("validation_error", "filters.user_id"), id="a space in the id"),
        pytest.param({"user_id": "alice\n"}, {}, ("validation_error", "filters.user_id"), id="a trailing newline"),
        pytest.param({"user_id": 42}, {}, ("validation_error", "filters.user_id"), id="a number"),
        pytest.param(
            {"user_id": "alice", "agent_id": "a\x00b"},
            {},
            ("validation_error", "filters.agent_id"),
            id="NUL in the agent",
        ),
        pytest.param(
            {"user_id": "alice", "categories": ["food"]},
            {},
            ("validation_error", "filters.categories"),
            id="a category of Mem0's",
        ),
        pytest.param({"AND": {"user_id": "alice"}}, {}, ("validation_error", "filters.AND"), id="AND of an object"),
        pytest.param({"AND": []}, {}, ("validation_error", "filters.AND"), id="AND of nothing"),
        pytest.param(["alice"], {}, ("validation_error", "filters"), id="a list"),
    ],
)
def test_filters_refuse_what_has_no_single_scope_or_a_feature_we_lack(filters, given, refused):
    assert refusal(lambda: scope_of(filters, **given)) == refused


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.sampled_from(["alice", "*", "preference"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["AND", "OR", "NOT", "user_id", "agent_id", "categories", "in", "eq", "run_id", "x"]),
            children,
            max_size=3,
        )
    ),
    max_leaves=12,
)


@hypothesis.given(filters=json_values)
@hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
def test_any_filters_are_a_scope_or_a_400_never_another_error(filters):
    try:
        scope = scope_of(filters)
    except ValidationError:
        return
    except ApplicationError as error:
        status = error.status_code
    else:
        status = 200
        assert isinstance(scope.user_id, str)
    assert status in (200, 400)


@pytest.mark.parametrize(
    ("body", "ids"),
    [
        pytest.param({"user_id": "alice"}, (Scope("alice"), None), id="top level, as Mem0's add documents"),
        pytest.param({"filters": {"user_id": "alice", "run_id": "s1"}}, (Scope("alice"), "s1"), id="in filters"),
        pytest.param({"user_id": "alice", "agent_id": "bot", "run_id": "s1"}, (Scope("alice", "bot"), "s1"), id="all"),
    ],
)
def test_an_add_names_its_user_agent_and_run(body, ids):
    assert add_ids(body) == ids


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        pytest.param({"agent_id": "bot"}, ("user_id_required", "user_id"), id="no user"),
        pytest.param({"user_id": "alice", "run_id": "s 1"}, ("validation_error", "run_id"), id="a bad run id"),
        pytest.param(
            {"user_id": "alice", "run_id": "a", "filters": {"run_id": "b"}},
            ("validation_error", "filters.run_id"),
            id="two runs",
        ),
        pytest.param({"filters": "alice"}, ("validation_error", "filters"), id="filters not an object"),
        pytest.param(
            {"filters": {"user_id": "alice", "metadata": {"a": 1}}},
            ("validation_error", "filters"),
            id="a filter an add cannot honour",
        ),
    ],
)
def test_an_add_without_one_user_is_refused(body, refused):
    assert refusal(lambda: add_ids(body)) == refused


@pytest.mark.parametrize(
    ("text", "filters"),
    [
        pytest.param('{"user_id": "alice"}', {"user_id": "alice"}, id="JSON"),
        pytest.param(
            "{'user_id': 'alice', 'agent_id': 'bot'}",
            {"user_id": "alice", "agent_id": "bot"},
            id="the Python repr mem0ai's client sends",
        ),
    ],
)
def test_filters_in_a_query_string_are_json_or_a_python_dict(text, filters):
    assert filters_from_query(text) == filters


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("alice", id="not a literal"),
        pytest.param("['alice']", id="a list"),
        pytest.param("__import__('os').system('true')", id="code is never run"),
        pytest.param("{'user_id': 'a\\x00b'}", id="NUL"),
        pytest.param("[" * 5000, id="too long"),
    ],
)
def test_filters_in_a_query_string_that_are_no_object_are_refused(text):
    with pytest.raises((ValidationError, ApplicationError)):
        filters_from_query(text)


@pytest.mark.parametrize(
    ("value", "moment"),
    [
        pytest.param(None, None, id="none"),
        pytest.param(1714573800, datetime(2024, 5, 1, 14, 30, tzinfo=UTC), id="Unix seconds"),
        pytest.param(1714573800.5, datetime(2024, 5, 1, 14, 30, 0, 500000, tzinfo=UTC), id="with a fraction"),
        pytest.param("2024-05-01T16:30:00+02:00", datetime(2024, 5, 1, 14, 30, tzinfo=UTC), id="ISO 8601"),
    ],
)
def test_mem0_timestamps_are_unix_seconds_or_iso_text(value, moment):
    assert moment_of(value, field="timestamp") == moment


@pytest.mark.parametrize("value", [True, "yesterday", 10**20, -(10**15), [1]])
def test_a_timestamp_that_names_no_moment_is_refused(value):
    assert refusal(lambda: moment_of(value, field="timestamp")) == ("validation_error", "timestamp")


# --- answers ------------------------------------------------------------------------------------------------------

CREATED = datetime(2024, 5, 1, 14, 30, tzinfo=UTC)


def a_fact(**fields):
    values = {"pk": 42, "content": "Prefers PostgreSQL", "user_id": "alice", "agent_id": "", "metadata": {},
              "category": "preference", "created_at": CREATED, "updated_at": CREATED} | fields  # fmt: skip
    return SimpleNamespace(**values)


def test_a_fact_is_a_mem0_memory():
    memory = memory_of(a_fact(agent_id="travel", metadata={"topic": "db"}), score=0.5)

    assert memory == {
        "id": "42", "memory": "Prefers PostgreSQL", "hash": "8de9113693473f83c89b2c15985e64b0", "user_id": "alice",
        "agent_id": "travel", "app_id": None, "run_id": None, "metadata": {"topic": "db"},
        "categories": ["preference"], "immutable": False, "expiration_date": None,
        "created_at": "2024-05-01T14:30:00Z", "updated_at": "2024-05-01T14:30:00Z", "score": 0.5,
    }  # fmt: skip


def test_a_fact_without_agent_or_score_says_so():
    memory = memory_of(a_fact())

    assert memory["agent_id"] is None
    assert "score" not in memory


def test_fields_keep_only_what_was_asked_and_refuse_unknown_names():
    memory = memory_of(a_fact(), score=0.5)

    asked = field_names(["id", "memory", "score"])
    assert only_fields(memory, asked) == {"id": "42", "memory": "Prefers PostgreSQL", "score": 0.5}
    assert only_fields(memory, field_names(None)) is memory
    assert refusal(lambda: field_names(["id", "text"])) == ("validation_error", "fields")


# --- history ------------------------------------------------------------------------------------------------------


def snapshot(content: str, status: str = "active", **fields) -> dict:
    return {"content": content, "category": "other", "confidence": 1.0, "status": status, "pinned": False,
            "valid_to": None, "superseded_by": None, "occurred_at": None, "metadata": {}} | fields  # fmt: skip


def events(*rows) -> list[EventRow]:
    return [
        EventRow(id=index, fact_id=7, user_id="alice", action=action, before=before, after=after, created_at=CREATED)
        for index, (action, before, after) in enumerate(rows, start=1)
    ]


IMPORTED = {"source": "import", "status": "active"}
RETIRED = "2024-06-01T00:00:00Z"


@pytest.mark.parametrize(
    ("rows", "current", "entries"),
    [
        pytest.param([("created", None, snapshot("A"))], "A", [("ADD", None, "A")], id="created active"),
        pytest.param([("created", None, IMPORTED)], "A", [("ADD", None, "A")], id="imported: the content of now"),
        pytest.param(
            [("created", None, IMPORTED), ("updated", snapshot("A"), snapshot("B"))],
            "B",
            [("ADD", None, "A"), ("UPDATE", "A", "B")],
            id="imported then edited: the content before the edit",
        ),
        pytest.param(
            [("created", None, IMPORTED), ("deleted", snapshot("A"), None)],
            None,
            [("ADD", None, "A"), ("DELETE", "A", None)],
            id="imported then deleted",
        ),
        pytest.param(
            [("created", None, snapshot("A")), ("updated", snapshot("A"), snapshot("A", metadata={"k": 1}))],
            "A",
            [("ADD", None, "A"), ("UPDATE", "A", "A")],
            id="metadata edited",
        ),
        pytest.param(
            [
                ("created", None, snapshot("A")),
                ("merged", snapshot("A"), snapshot("A", confidence=1.0) | {"merged": "A"}),
                ("updated", snapshot("A"), snapshot("A", pinned=True)),
            ],
            "A",
            [("ADD", None, "A")],
            id="bookkeeping (a duplicate merged in, a pin) left out",
        ),
        pytest.param(
            [
                ("created", None, snapshot("A", "pending")),
                ("updated", snapshot("A", "pending"), snapshot("A2", "pending")),
                ("approved", snapshot("A2", "pending"), snapshot("A2")),
            ],
            "A2",
            [("ADD", None, "A2")],
            id="a memory once approved",
        ),
        pytest.param(
            [
                ("created", None, snapshot("A", "pending")),
                ("rejected", snapshot("A", "pending"), snapshot("A", "rejected")),
            ],
            "A",
            [],
            id="pending then rejected: never a memory",
        ),
        pytest.param(
            [
                ("created", None, snapshot("A")),
                ("superseded", snapshot("A"), snapshot("A", valid_to=RETIRED) | {"reason": "moved"}),
            ],
            "A",
            [("ADD", None, "A"), ("DELETE", "A", None)],
            id="superseded by a newer fact",
        ),
        pytest.param(
            [
                ("created", None, snapshot("A")),
                ("conflict_opened", None, {"conflict": 1}),
                ("archived", {"status": "active"}, {"status": "archived"}),
                ("restored", snapshot("A", "archived"), snapshot("A")),
            ],
            "A",
            [("ADD", None, "A"), ("DELETE", "A", None), ("ADD", None, "A")],
            id="a conflict changes nothing; forgotten then restored",
        ),
        pytest.param(
            [("created", None, None), ("archived", None, None), ("purged", None, None)],
            None,
            [],
            id="purged: the purge emptied every event, nothing of what it said is kept",
        ),
    ],
)
def test_our_events_are_mem0_history(rows, current, entries):
    history = history_entries(events(*rows), current_content=current)

    assert [(entry["event"], entry["old_memory"], entry["new_memory"]) for entry in history] == entries
    assert all(entry["memory_id"] == "7" and entry["user_id"] == "alice" for entry in history)
    assert [entry["is_deleted"] for entry in history] == [kind == "DELETE" for kind, _, _ in entries]
