"""The relevance floor of /context: a fact or passage less similar to the query than the floor is not injected, an
off-topic question gets nothing, the cold-start hint is unchanged, and what is injected still carries its scores.

The test settings embed with the deterministic hash embedder, whose cosines are on another scale than MiniLM's
(the default floors are chosen for MiniLM: bench/relevance_floor.py); each test sets the floor it means."""

import pytest
from django.test import override_settings

from ai.services import active_embedding_model
from core.quoting import MEMORY_NOTE
from facts.services import fact_remember, facts_import
from kb.services import document_index
from retrieval.context import COLD_START_HINT, DOCUMENTS_HEADING, FACTS_HEADING, MEASURED_FLOORS, context_build

pytestmark = pytest.mark.django_db

FLOOR = 0.3  # separates the questions below from the unrelated facts under the hash embedder
FACTS = [
    "Has a dog named Rex",
    "Deploys the billing service with deployctl",
    "Prefers rollbacks over hotfixes when a deploy fails",
    "Works from Lisbon most of the year",
    "Prefers PostgreSQL for new services because of JSONB",
]
RUNBOOK = """\
# Runbook

## Rollbacks

To roll back a deploy, run deployctl rollback with the previous build number.
Rollbacks take about two minutes and keep the database untouched.
"""
ON_TOPIC = "how do I roll back a deploy with deployctl?"
OFF_TOPIC = "What is the capital of Australia?"


@pytest.fixture
def memory(tenant):
    facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": content} for content in FACTS], actor="test")
    document_index(tenant=tenant, doc_id="ops/runbook.md", text=RUNBOOK, content_type="markdown", title="Runbook")


def build(tenant, query: str, floor: float, user_id: str = "u1"):
    return context_build(
        tenant=tenant, user_id=user_id, query=query, min_fact_similarity=floor, min_document_similarity=floor
    )


def test_an_off_topic_question_injects_no_facts_and_no_passages(tenant, memory):
    unfloored = build(tenant, OFF_TOPIC, floor=0.0)

    context = build(tenant, OFF_TOPIC, floor=FLOOR)

    assert unfloored.facts  # without the floor, search hands back whatever it found
    assert unfloored.documents
    assert context.facts == []
    assert context.documents == []
    assert context.text == ""
    assert not context.cold_start


def test_an_on_topic_question_still_gets_its_facts_and_passage(tenant, memory):
    context = build(tenant, ON_TOPIC, floor=FLOOR)

    injected = {hit.fact.content for hit in context.facts}
    assert "Deploys the billing service with deployctl" in injected
    assert "Has a dog named Rex" not in injected
    assert "Works from Lisbon most of the year" not in injected
    assert [hit.doc_id for hit in context.documents] == ["ops/runbook.md"]
    assert context.text.startswith(FACTS_HEADING)
    assert DOCUMENTS_HEADING in context.text
    assert "deployctl rollback with the previous build number" in context.text


def test_the_floor_setting_decides_what_is_injected(tenant, memory):
    cosines = sorted((hit.vector for hit in build(tenant, ON_TOPIC, floor=0.0).facts), reverse=True)
    floor = (cosines[1] + cosines[2]) / 2  # between the second and the third most similar fact

    with override_settings(CONTEXT_FACTS_MIN_SIMILARITY=floor, CONTEXT_DOCUMENTS_MIN_SIMILARITY=1.0):
        context = context_build(tenant=tenant, user_id="u1", query=ON_TOPIC)
    with override_settings(CONTEXT_FACTS_MIN_SIMILARITY=0.0, CONTEXT_DOCUMENTS_MIN_SIMILARITY=0.0):
        switched_off = context_build(tenant=tenant, user_id="u1", query=ON_TOPIC)

    assert len(cosines) == len(FACTS)
    assert [hit.vector for hit in context.facts] == cosines[:2]
    assert context.documents == []  # no passage is as similar as 1.0
    assert len(switched_off.facts) == len(FACTS)
    assert switched_off.documents


def test_every_injected_hit_carries_its_scores_in_the_answer(api, memory):
    with override_settings(CONTEXT_FACTS_MIN_SIMILARITY=FLOOR, CONTEXT_DOCUMENTS_MIN_SIMILARITY=FLOOR):
        response = api.post("/api/v1/context", {"user_id": "u1", "query": ON_TOPIC}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["facts"]
    assert body["documents"]
    for hit in body["facts"]:
        assert set(hit["scores"]) == {"vector", "keyword", "decay", "final"}
        assert hit["scores"]["vector"] >= FLOOR
        assert hit["score"] == hit["scores"]["final"] > 0
    for hit in body["documents"]:
        assert set(hit["scores"]) == {"vector", "keyword", "final"}
        assert hit["scores"]["vector"] >= FLOOR
        assert hit["score"] == hit["scores"]["final"] > 0


def test_a_new_user_asking_off_topic_gets_the_cold_start_hint_alone(tenant):
    facts_import(tenant=tenant, facts=[{"user_id": "newbie", "content": "Has a dog named Rex"}], actor="test")

    off_topic = build(tenant, OFF_TOPIC, floor=FLOOR, user_id="newbie")
    on_topic = build(tenant, "what is the name of my dog Rex?", floor=FLOOR, user_id="newbie")

    assert off_topic.cold_start
    assert off_topic.facts == []
    assert off_topic.text == f"{FACTS_HEADING}\n{COLD_START_HINT}"
    assert on_topic.cold_start
    assert [hit.fact.content for hit in on_topic.facts] == ["Has a dog named Rex"]
    memory = f"<memory>\n{MEMORY_NOTE}\n- Has a dog named Rex [{_citation(on_topic)}]\n</memory>"
    assert on_topic.text == f"{FACTS_HEADING}\n{memory}\n{COLD_START_HINT}"


def test_a_user_with_enough_facts_asking_off_topic_gets_no_hint(tenant, memory):
    context = build(tenant, OFF_TOPIC, floor=FLOOR)

    assert not context.cold_start
    assert COLD_START_HINT not in context.text


def _citation(context) -> str:
    fact = context.facts[0].fact
    return f"fact:{fact.pk}, {fact.valid_from:%Y-%m-%d}"


def test_a_measured_model_gets_its_floors_by_default_and_an_unmeasured_one_none(tenant, memory, monkeypatch):
    unmeasured = context_build(tenant=tenant, user_id="u1", query=OFF_TOPIC)
    monkeypatch.setitem(MEASURED_FLOORS, active_embedding_model(), (FLOOR, FLOOR))

    measured = context_build(tenant=tenant, user_id="u1", query=OFF_TOPIC)
    with override_settings(CONTEXT_FACTS_MIN_SIMILARITY=0.0):
        facts_switched_off = context_build(tenant=tenant, user_id="u1", query=OFF_TOPIC)

    assert active_embedding_model() == "hash-v2"  # the test settings' embedder, not measured by the bench
    assert unmeasured.facts
    assert unmeasured.documents
    assert (measured.facts, measured.documents) == ([], [])
    assert facts_switched_off.facts
    assert facts_switched_off.documents == []


@pytest.mark.usefixtures("openai_settings")
def test_a_fact_awaiting_its_vector_passes_the_floor_only_by_sharing_a_term(tenant, fake_openai, openai_settings):
    openai_settings.CHAT_PROVIDER = "none"
    fact_remember(tenant=tenant, user_id="u1", content="Has a dog named Rex")  # embedded
    fake_openai.go_down("/v1/embeddings")
    awaiting = fact_remember(tenant=tenant, user_id="u1", content="Owns the deployctl release tooling").fact
    fake_openai.recover()

    sharing = build(tenant, "who owns deployctl?", floor=0.99)
    not_sharing = build(tenant, "what is the capital of Australia?", floor=0.99)

    assert awaiting.embedding is None
    assert [hit.fact.pk for hit in sharing.facts] == [awaiting.pk]
    assert sharing.degraded == []  # the query had its vector: the floor held every other fact's cosine
    assert not_sharing.facts == []
