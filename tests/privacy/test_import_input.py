"""What the import takes: Mem0's memories (one a line, a list, {"results": [...]}), the content types, the size limit;
and what it refuses: every malformed line is named by its number, and nothing of such a file is written."""

import json

import pytest

from episodes.models import Episode
from facts.models import Fact, FactEvent

pytestmark = pytest.mark.django_db

NDJSON = "application/x-ndjson"
HEADER = {"type": "header", "format": "memoryproject", "version": 1, "user_id": "alice"}
FACT = {"type": "fact", "id": 1, "content": "Lives in Lisbon"}
MEM0_MEMORIES = [
    {
        "id": "8f0c2c8e-1b1e-4f59-9d2a-5a1c1e2f3a4b",
        "memory": "Is vegetarian",
        "user_id": "alex",
        "hash": "c3a1",
        "metadata": {"source": "onboarding"},
        "categories": ["user_preferences", "food"],
        "created_at": "2024-07-20T10:00:00.123456-07:00",
        "updated_at": "2024-07-21T08:00:00-07:00",
    },
    {
        "id": "0d6b4a10-6c2a-4f7b-8a55-0d9c5e2a7b61",
        "memory": "Works at Acme as a data engineer",
        "user_id": "alex",
        "agent_id": "onboarding-bot",
        "run_id": "run-7",
        "metadata": None,
        "categories": ["professional_details"],
        "created_at": "2024-07-22T09:30:00Z",
        "updated_at": None,
        "score": 0.9,  # fields Mem0 adds over versions are ignored
    },
]


def post_import(api, user_id: str, body: str | bytes, content_type: str = NDJSON):
    data = body.encode() if isinstance(body, str) else body
    return api.generic("POST", f"/api/v1/users/{user_id}/import", data, content_type=content_type)


def jsonl(*records) -> str:
    return "".join((record if isinstance(record, str) else json.dumps(record)) + "\n" for record in records)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (jsonl(*MEM0_MEMORIES), NDJSON),
        (json.dumps(MEM0_MEMORIES, indent=2), "application/json"),
        (json.dumps({"results": MEM0_MEMORIES, "count": 2, "next": None}), "application/json"),
    ],
    ids=["one per line", "a list", "get_all results"],
)
def test_mem0_memories_become_active_facts(api, tenant, body, content_type):
    response = post_import(api, "alex", body, content_type)

    assert response.status_code == 200, response.content
    assert response.json() == {
        "format": "mem0",
        "lines": 2,
        "facts": {"created": 2, "merged": 0, "skipped": 0},
        "episodes": {"created": 0, "skipped": 0},
        "conflicts": {"created": 0},
    }
    vegetarian = Fact.objects.get(tenant=tenant, user_id="alex", content="Is vegetarian")
    assert (vegetarian.status, vegetarian.source, vegetarian.category) == ("active", "import", "preference")
    assert vegetarian.metadata == {
        "source": "onboarding",
        "mem0": {"id": MEM0_MEMORIES[0]["id"], "categories": ["user_preferences", "food"]},
    }
    assert vegetarian.created_at.isoformat() == "2024-07-20T17:00:00.123456+00:00"
    assert vegetarian.valid_from == vegetarian.created_at
    assert vegetarian.embedding is not None
    job = Fact.objects.get(tenant=tenant, user_id="alex", content="Works at Acme as a data engineer")
    assert (job.category, job.agent_id, job.metadata["mem0"]["run_id"]) == ("profile", "onboarding-bot", "run-7")
    assert [event.action for event in FactEvent.objects.filter(fact_id=job.pk)] == ["created"]
    again = post_import(api, "alex", body, content_type).json()
    assert again["facts"] == {"created": 0, "merged": 0, "skipped": 2}


def test_the_target_user_is_the_urls_whatever_the_records_say(api, tenant):
    post_import(api, "sam", jsonl(*MEM0_MEMORIES))

    assert Fact.objects.filter(tenant=tenant, user_id="sam").count() == 2
    assert not Fact.objects.filter(tenant=tenant, user_id="alex").exists()


# (what the bad line is, the line's problem as reported)
BAD_LINES = [
    ('{"type": "fact", "id": 2, "content": "Unclosed"', "Not valid JSON"),
    ({"type": "memory", "id": 2, "content": "x"}, "type: Must be one of: header, fact, episode, conflict."),
    ({"type": "fact", "id": 2}, "content: This field is required."),
    ({"type": "fact", "content": "No id"}, "id: This field is required."),
    ({"type": "fact", "id": 2, "content": "x", "confidence": "high"}, "confidence: Must be a number from 0 to 1."),
    ({"type": "fact", "id": 2, "content": "x", "pinned": "yes"}, "pinned: Must be true or false."),
    ({"type": "fact", "id": 2, "content": "x", "status": "gone"}, "status: Must be one of"),
    ({"type": "fact", "id": 2, "content": "x", "valid_from": "2024-13-01T00:00:00Z"}, "valid_from: Must be an ISO"),
    ({"type": "fact", "id": 2, "content": "x", "superseded_by": 99}, "superseded_by: no fact with id 99"),
    ({"type": "fact", "id": 2, "content": "x", "source_episode": 5}, "source_episode: no episode with id 5"),
    ({"type": "fact", "id": 1, "content": "Same id again"}, "id: The fact id 1 is already used by line 2."),
    ({"type": "fact", "id": 2, "content": "x", "colour": "red"}, "colour: Unknown field."),
    ({"type": "fact", "id": 2, "content": "x", "events": [{"action": "teleported"}]}, "events[0]: action: Must be"),
    (
        {
            "type": "fact",
            "id": 2,
            "content": "x",
            "valid_from": "2024-05-02T00:00:00Z",
            "valid_to": "2024-05-01T00:00Z",
        },
        "valid_to: Must not be before valid_from.",
    ),
    ({"type": "conflict", "id": 1, "existing_fact": 1, "new_fact": 42}, "new_fact: no fact with id 42"),
    ({"type": "episode", "id": 1, "session_id": "s", "messages": [{"role": "robot", "content": "x"}]}, "role"),
    ({"type": "episode", "id": 1, "session_id": "has space", "messages": []}, "session_id: Must be 1-255"),
    ({"type": "fact", "id": 2, "content": "nul \u0000 inside"}, "NUL characters"),
    ([1, 2], "Must be a JSON object."),
]


@pytest.mark.parametrize(("bad", "problem"), BAD_LINES, ids=[problem[:40] for _, problem in BAD_LINES])
def test_a_malformed_line_is_named_by_its_number_and_nothing_is_imported(api, tenant, bad, problem):
    episode = {"type": "episode", "id": "e", "session_id": "kept-out",
               "messages": [{"role": "user", "content": "A good episode before the bad line."}]}  # fmt: skip
    body = jsonl(HEADER, FACT, episode, bad, {"type": "fact", "id": 3, "content": "After the bad line"})

    response = post_import(api, "alice", body)

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert list(error["details"]) == ["line 4"]
    assert problem in error["details"]["line 4"][0]
    assert error["message"].startswith("line 4: ")
    assert not Fact.objects.filter(tenant=tenant).exists()
    assert not Episode.objects.filter(tenant=tenant).exists()


def test_every_bad_line_is_reported_at_once(api):
    body = jsonl(
        HEADER, {"type": "fact", "id": 1}, FACT | {"id": 2}, "not json", {"type": "fact", "id": 2, "content": "x"}
    )

    details = post_import(api, "alice", body).json()["error"]["details"]

    assert list(details) == ["line 2", "line 4", "line 5"]


@pytest.mark.parametrize(
    ("body", "where", "problem"),
    [
        (jsonl(FACT), "line 1", "Neither a memoryproject export"),
        (jsonl({"type": "header", "format": "memoryproject", "version": 2}), "line 1", "version: Must be 1"),
        (jsonl({"type": "header", "format": "zep", "version": 1}), "line 1", 'format: Must be "memoryproject"'),
        (jsonl(HEADER, FACT, HEADER | {"user_id": "bob"}), "line 3", "A second header"),
        (jsonl({"id": "m1", "memory": ""}), "line 1", "memory: Must not be empty."),
        (jsonl(MEM0_MEMORIES[0], {"id": "m2", "memory": "x", "categories": "food"}), "line 2", "categories: Must be"),
        (json.dumps([MEM0_MEMORIES[0], {"memory": "No id"}]), "[1]", "id: This field is required."),
        ("\n\n", "non_field_errors", "The file holds no records."),
    ],
)
def test_files_that_are_not_what_the_import_reads_are_refused(api, body, where, problem):
    content_type = "application/json" if body.startswith("[") else NDJSON

    response = post_import(api, "alice", body, content_type)

    assert response.status_code == 400
    assert problem in response.json()["error"]["details"][where][0]


def test_a_body_that_is_not_utf8_or_not_json_lines_is_refused(api):
    assert "not UTF-8" in post_import(api, "alice", b"\xff\xfe{}").json()["error"]["message"]
    assert post_import(api, "alice", jsonl(HEADER), "text/csv").status_code == 415


def test_a_body_over_the_size_limit_is_refused_before_it_is_read(api, tenant, settings):
    settings.API_MAX_BODY_BYTES = 1000
    body = jsonl(HEADER, *({"type": "fact", "id": n, "content": f"Fact number {n}"} for n in range(100)))

    response = post_import(api, "alice", body)

    assert response.status_code == 413
    assert "API_MAX_BODY_BYTES" in response.json()["error"]["message"]
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_a_header_alone_imports_nothing(api, tenant):
    response = post_import(api, "alice", jsonl(HEADER))

    assert response.status_code == 200
    assert response.json()["lines"] == 1
    assert response.json()["facts"] == {"created": 0, "merged": 0, "skipped": 0}
