"""The filter language: every random filter selects, in the database, exactly the facts a brute-force evaluation
of the same filter in Python selects; bad filters are refused naming the path; GET /facts takes them."""

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ai.services import active_embedding_model
from facts.models import Fact
from facts.selectors import FACT_FILTER_FIELDS, fact_filters_parse, facts_list, facts_search
from search.filters import MAX_CONDITIONS, MAX_DEPTH, FilterError, filter_matches
from tests.factories import make_fact, make_tenant

pytestmark = pytest.mark.django_db

START = datetime(2024, 1, 1, tzinfo=UTC)
METADATA_VALUES = [
    {},
    {"priority": 1},
    {"priority": 2, "team": "ops"},
    {"priority": 3.5, "team": "Ops", "tags": ["a", "b"]},
    {"priority": "high", "tags": ["b"], "nested": {"level": 2, "name": "x"}},
    {"priority": True, "team": "dev", "nested": {"level": 3}},
    {"team": "ops-east", "tags": [], "nested": {"name": "yz"}, "flag": None},
    {"priority": 0, "tags": ["a", 1, True], "nested": {"level": "2"}},
    {"team": "", "priority": -1},
]


def the_facts(tenant) -> list[Fact]:
    facts = []
    for n in range(27):
        facts.append(
            make_fact(
                tenant=tenant,
                user_id="u1",
                content=f"Fact {n}",
                category=Fact.Category.values[n % 6],
                agent_id=["", "coder", "billing"][n % 3],
                source=Fact.Source.values[n % 4],
                status=Fact.Status.values[n % 4],
                pinned=n % 5 == 0,
                confidence=round((n % 10) / 10, 1),
                usage_count=n % 7,
                occurred_at=None if n % 4 == 0 else START + timedelta(days=n),
                last_used_at=None if n % 3 == 0 else START + timedelta(hours=n),
                metadata=METADATA_VALUES[n % len(METADATA_VALUES)],
                embedding=np.random.default_rng(n).normal(size=384).astype(np.float32),
                embedding_model=active_embedding_model(),
            )
        )
    return facts


def row_of(fact: Fact) -> dict:
    return {name: getattr(fact, field.column) for name, field in FACT_FILTER_FIELDS.items()}


SCALARS = st.one_of(
    st.integers(-2, 4),
    st.sampled_from([0.5, 3.5, 2.0]),
    st.booleans(),
    st.sampled_from(["ops", "Ops", "a", "b", "", "high", "x", "2"]),
)
ORDERABLE = st.one_of(st.integers(-2, 4), st.sampled_from([0.5, 3.5, 2.0, "ops", "Ops", "a", "", "x"]))
MOMENTS = st.integers(0, 40).map(lambda days: (START + timedelta(days=days)).isoformat()) | st.integers(0, 40).map(
    lambda days: (START + timedelta(days=days)).date().isoformat()  # a date alone: its midnight, UTC
)


def conditions():
    metadata_key = st.sampled_from(["metadata.priority", "metadata.team", "metadata.tags", "metadata.nested.level",
                                    "metadata.nested.name", "metadata.flag", "metadata.missing"])  # fmt: skip
    metadata = st.tuples(
        metadata_key,
        st.one_of(
            SCALARS,
            st.lists(SCALARS, max_size=3),
            st.dictionaries(st.sampled_from(["eq", "ne", "contains"]), SCALARS, min_size=1, max_size=2),
            st.fixed_dictionaries({"icontains": st.sampled_from(["OPS", "a", "Y", "-e"])}),
            st.dictionaries(st.sampled_from(["gt", "gte", "lt", "lte"]), ORDERABLE, min_size=1, max_size=2),
            st.dictionaries(st.sampled_from(["in", "nin"]), st.lists(SCALARS, min_size=1, max_size=3), min_size=1),
            st.dictionaries(st.just("exists"), st.booleans(), min_size=1),
        ),
    )
    declared = st.one_of(
        st.tuples(st.just("category"), st.one_of(st.sampled_from(Fact.Category.values),
                  st.fixed_dictionaries({"in": st.lists(st.sampled_from(Fact.Category.values), min_size=1)}),
                  st.fixed_dictionaries({"contains": st.sampled_from(["pref", "ro", "zz"])}))),
        st.tuples(st.just("agent_id"), st.one_of(st.sampled_from(["", "coder", "billing"]),
                  st.fixed_dictionaries({"contains": st.sampled_from(["od", "b", "x"])}),
                  st.fixed_dictionaries({"icontains": st.sampled_from(["OD", "Bill", "x"])}))),
        st.tuples(st.just("pinned"), st.booleans()),
        st.tuples(st.just("confidence"), st.dictionaries(st.sampled_from(["gt", "gte", "lt", "lte", "ne"]),
                  st.sampled_from([0.0, 0.3, 0.5, 0.9]), min_size=1, max_size=2)),
        st.tuples(st.just("usage_count"), st.one_of(
            st.integers(0, 7), st.fixed_dictionaries({"nin": st.lists(st.integers(0, 7), min_size=1)}))),
        st.tuples(st.sampled_from(["occurred_at", "last_used_at"]), st.one_of(
            st.dictionaries(st.sampled_from(["gt", "lte"]), MOMENTS, min_size=1),
            st.fixed_dictionaries({"exists": st.booleans()}))),
        st.tuples(st.just("status"), st.sampled_from(Fact.Status.values)),
    )  # fmt: skip
    return st.one_of(metadata, declared).map(lambda pair: {pair[0]: pair[1]})


FILTERS = st.recursive(
    conditions(),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"AND": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"OR": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"NOT": inner}),
    ),
    max_leaves=8,
)


@pytest.fixture
def stored(db):
    tenant, _ = make_tenant("acme")
    return tenant, the_facts(tenant)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=FILTERS)
def test_every_filter_selects_in_the_database_what_python_selects(stored, raw):
    tenant, facts = stored
    try:
        node = fact_filters_parse(raw)
    except FilterError as error:  # a chain of NOTs deeper than the grammar allows (refused: tested below)
        assume("deeper than" not in error.reason)
        raise

    found = set(facts_list(tenant=tenant, user_id="u1", validity="all", filters=node).values_list("pk", flat=True))

    assert found == {fact.pk for fact in facts if filter_matches(node, row_of(fact))}, json.dumps(raw)


def test_some_filters_select_what_a_person_expects(stored):
    tenant, facts = stored

    def ids(raw):
        node = fact_filters_parse(raw)
        return {fact.content for fact in facts_list(tenant=tenant, user_id="u1", validity="all", filters=node)}

    assert ids({"metadata.priority": {"gte": 2}}) == {f"Fact {n}" for n in range(27) if n % 9 in (2, 3)}
    assert ids({"metadata.tags": {"contains": "a"}}) == {f"Fact {n}" for n in range(27) if n % 9 in (3, 7)}
    assert ids({"metadata.team": {"contains": "ops"}}) == {f"Fact {n}" for n in range(27) if n % 9 in (2, 6)}
    assert ids({"metadata.team": {"icontains": "OPS"}}) == {f"Fact {n}" for n in range(27) if n % 9 in (2, 3, 6)}
    assert ids({"occurred_at": {"lte": "2024-01-03"}}) == {"Fact 1", "Fact 2"}  # Fact 2 at its midnight
    assert ids({"metadata.priority": True}) == {f"Fact {n}" for n in range(27) if n % 9 == 5}  # not 1
    assert ids({"metadata.priority": {"in": [1, True]}}) == {f"Fact {n}" for n in range(27) if n % 9 in (1, 5)}
    assert ids({"metadata.priority": {"in": [True, 1]}}) == {f"Fact {n}" for n in range(27) if n % 9 in (1, 5)}
    assert ids({"metadata.flag": {"exists": True}}) == {f"Fact {n}" for n in range(27) if n % 9 == 6}  # null is there
    assert ids({"NOT": {"metadata.team": "ops"}}) == {f"Fact {n}" for n in range(27) if n % 9 != 2}


@pytest.mark.parametrize(
    ("raw", "path", "message"),
    [
        ({"AND": [{"category": "preference"}, {"metadata.priority": {"gte": [1]}}]},
         "filters.AND[1].metadata.priority.gte", "expected a string, a number or true / false"),
        ({"colour": "red"}, "filters.colour", "unknown field or operator"),
        ({"category": {"like": "pre%"}}, "filters.category.like", "unknown operator; category takes eq, ne"),
        ({"category": "hobby"}, "filters.category", "expected one of preference"),
        ({"category": {"in": ["profile", "hobby"]}}, "filters.category.in[1]", "expected one of preference"),
        ({"confidence": {"gt": "high"}}, "filters.confidence.gt", "expected a number"),
        ({"metadata.priority": {"gt": True}}, "filters.metadata.priority.gt", "expected a number or a string"),
        ({"created_at": {"gte": "yesterday"}}, "filters.created_at.gte", "expected an ISO 8601"),
        ({"pinned": {"gt": True}}, "filters.pinned.gt", "unknown operator"),
        ({"OR": []}, "filters.OR", "expected a non-empty list"),
        ({"metadata": 1}, "filters.metadata", "name a metadata key"),
        ({"metadata.team": {"name": "x"}}, "filters.metadata.team.name", "unknown operator; metadata.team takes eq"),
        ({"metadata.team": {"in": []}}, "filters.metadata.team.in", "expected a non-empty list"),
        ({"metadata.team": "x" * 5000}, "filters.metadata.team", "over 4096 bytes"),
        ([{"category": "preference"}], "filters", "expected an object"),
    ],
)  # fmt: skip
def test_bad_filters_are_refused_naming_the_path(raw, path, message):
    with pytest.raises(FilterError) as raised:
        fact_filters_parse(raw)

    assert raised.value.path == path
    assert message in raised.value.reason
    assert isinstance(raised.value, ValidationError)


def test_depth_and_width_are_bounded():
    deep: dict = {"category": "preference"}
    for _ in range(MAX_DEPTH):
        deep = {"NOT": deep}
    wide = {"OR": [{"usage_count": n} for n in range(MAX_CONDITIONS + 1)]}

    with pytest.raises(FilterError, match=f"deeper than {MAX_DEPTH}"):
        fact_filters_parse(deep)
    with pytest.raises(FilterError, match=f"more than {MAX_CONDITIONS} conditions"):
        fact_filters_parse(wide)


def test_get_facts_takes_a_filter_and_names_the_path_of_a_bad_one(api, tenant):
    for priority in (1, 5):
        make_fact(tenant=tenant, user_id="alice", content=f"priority {priority}", metadata={"priority": priority})
    make_fact(tenant=tenant, user_id="bob", content="someone else", metadata={"priority": 9})
    wanted = json.dumps({"AND": [{"metadata.priority": {"gte": 2}}, {"NOT": {"category": "profile"}}]})

    listed = api.get("/api/v1/facts", {"user_id": "alice", "filters": wanted})
    refused = api.get(
        "/api/v1/facts", {"user_id": "alice", "filters": json.dumps({"AND": [{"metadata.x": {"gt": []}}]})}
    )
    not_json = api.get("/api/v1/facts", {"user_id": "alice", "filters": "{category"})

    assert listed.status_code == 200
    assert [fact["content"] for fact in listed.json()["results"]] == ["priority 5"]
    assert refused.status_code == 400
    assert (
        refused.json()["error"]["message"]
        == "filters.AND[0].metadata.x.gt: expected a string, a number or true / false"
    )
    assert not_json.status_code == 400
    assert "filters" in not_json.json()["error"]["details"]


def test_nothing_of_a_filter_reaches_the_sql_but_parameters(stored):
    tenant, _ = stored
    hostile = "x'); DROP TABLE facts_fact; --"
    node = fact_filters_parse({"OR": [{"metadata.team": hostile}, {"agent_id": {"contains": hostile}}]})

    sql, params = facts_list(tenant=tenant, user_id="u1", filters=node).query.sql_with_params()

    assert "DROP" not in sql
    assert any(hostile in str(param) for param in params)
    assert list(facts_list(tenant=tenant, user_id="u1", filters=node)) == []


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, json.dumps({"agent_id": "a\u0000b"}), '{"confidence": NaN}'])
def test_hostile_filter_text_is_a_400(api, text):
    response = api.get("/api/v1/facts", {"user_id": "alice", "filters": text})

    assert response.status_code == 400


def test_a_delete_by_filter_deletes_exactly_what_the_filter_selects_of_that_user(api, tenant):
    doomed = make_fact(tenant=tenant, user_id="alice", content="from the CRM", metadata={"source": "crm-sync"})
    kept = make_fact(tenant=tenant, user_id="alice", content="said in chat", metadata={"source": "chat"})
    other_user = make_fact(tenant=tenant, user_id="bob", content="bob's CRM", metadata={"source": "crm-sync"})
    other_tenant = make_fact(tenant=make_tenant("globex")[0], user_id="alice", metadata={"source": "crm-sync"})

    response = api.post(
        "/api/v1/facts/delete", {"user_id": "alice", "filters": {"metadata.source": "crm-sync"}}, format="json"
    )

    assert response.status_code == 200
    assert response.json() == {"deleted": 1, "fact_ids": [doomed.pk]}
    assert set(Fact.objects.values_list("pk", flat=True)) == {kept.pk, other_user.pk, other_tenant.pk}


def test_a_delete_needs_a_valid_filter(api, tenant):
    make_fact(tenant=tenant, user_id="alice", content="kept")

    missing = api.post("/api/v1/facts/delete", {"user_id": "alice"}, format="json")
    bad = api.post("/api/v1/facts/delete", {"user_id": "alice", "filters": {"colour": "red"}}, format="json")

    assert (missing.status_code, bad.status_code) == (400, 400)
    assert bad.json()["error"]["message"].startswith("filters.colour: unknown field or operator")
    assert Fact.objects.filter(tenant=tenant).count() == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=FILTERS, keyword_only=st.booleans())
def test_a_filtered_search_finds_exactly_the_searchable_facts_the_filter_selects(stored, raw, keyword_only):
    tenant, facts = stored
    try:
        node = fact_filters_parse(raw)
    except FilterError as error:
        assume("deeper than" not in error.reason)
        raise

    hits = facts_search(
        tenant=tenant, user_id="u1", query="fact", limit=100, include_pending=True, filters=node,
        keyword_only=keyword_only, vector=None if keyword_only else np.ones(384, dtype=np.float32) / np.sqrt(384),
    )  # fmt: skip

    searchable = [fact for fact in facts if fact.status in ("active", "pending") and fact.valid_to is None]
    assert searchable, "the stored facts include searchable ones"
    assert {hit.fact.pk for hit in hits} == {fact.pk for fact in searchable if filter_matches(node, row_of(fact))}


def test_search_answers_the_same_with_a_filter_that_selects_everything(stored):
    tenant, _ = stored
    everything = fact_filters_parse({"OR": [{"pinned": True}, {"pinned": False}]})

    def ranked(**filters):
        return [hit.fact.pk for hit in facts_search(tenant=tenant, user_id="u1", query="fact 12", limit=5,
                                                     keyword_only=True, **filters)]  # fmt: skip

    assert ranked(filters=everything) == ranked()
    assert ranked(filters=fact_filters_parse({"id": {"ne": ranked()[0]}}))[0] != ranked()[0]
