"""context_build draws its "relevant documents" section from the knowledge base, within the same token budget."""

import pytest

from core.text import estimate_tokens
from facts.services import facts_import
from kb.services import document_index
from retrieval.context import DOCUMENTS_HEADING, context_build
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

RUNBOOK = """\
# Runbook

## Rollbacks

To roll back a release, run deployctl rollback with the previous build number.
Rollbacks take about two minutes and keep the database untouched.

## Paging

The on-call engineer is paged through the escalation rota after five minutes.
"""
STYLE = """\
# Style guide

## Naming

Services are named after rivers, in lower case.
"""


@pytest.fixture
def knowledge_base(tenant):
    document_index(tenant=tenant, doc_id="ops/runbook.md", text=RUNBOOK, content_type="markdown", title="Runbook")
    document_index(tenant=tenant, doc_id="style.md", text=STYLE, content_type="markdown", title="Style guide")


@pytest.fixture
def facts(tenant):
    facts_import(
        tenant=tenant,
        facts=[
            {"user_id": "u1", "content": content}
            for content in ["Deploys the billing service", "Prefers rollbacks over hotfixes", "Works in Lisbon"]
        ],
        actor="test",
    )


def test_the_context_cites_the_passages_that_answer_the_query(tenant, facts, knowledge_base):
    context = context_build(tenant=tenant, user_id="u1", query="how do I roll back a release with deployctl?")

    top = context.documents[0]
    assert (top.doc_id, top.heading_path, top.line_start, top.line_end) == (
        "ops/runbook.md",
        "Runbook > Rollbacks",
        3,
        6,
    )
    assert top.citation == "doc:ops/runbook.md §Runbook > Rollbacks, lines 3-6"
    documents_section = context.text.split(DOCUMENTS_HEADING, 1)[1]
    assert "- [doc:ops/runbook.md §Runbook > Rollbacks, lines 3-6]\n## Rollbacks" in documents_section
    assert "run deployctl rollback with the previous build number" in documents_section
    assert context.facts  # facts come first, documents after them
    assert context.text.index(context.facts[0].fact.content) < context.text.index(DOCUMENTS_HEADING)


def test_documents_stay_within_the_token_budget(tenant, facts, knowledge_base):
    generous = context_build(tenant=tenant, user_id="u1", query="rollback deployctl paging rota", max_tokens=2000)
    tight = context_build(tenant=tenant, user_id="u1", query="rollback deployctl paging rota", max_tokens=230)

    assert len(generous.documents) == 3
    assert estimate_tokens(generous.text) > 230
    assert len(tight.facts) == len(generous.facts)  # facts are served first
    assert 0 < len(tight.documents) < len(generous.documents)
    assert tight.documents == generous.documents[: len(tight.documents)]  # the best passages kept
    assert estimate_tokens(tight.text) <= 230
    assert tight.token_count == estimate_tokens(tight.text)


def test_include_documents_false_leaves_them_out(tenant, facts, knowledge_base):
    context = context_build(tenant=tenant, user_id="u1", query="roll back a release", include_documents=False)

    assert context.documents == []
    assert DOCUMENTS_HEADING not in context.text
    assert "deployctl" not in context.text


def test_another_tenants_documents_never_reach_the_context(tenant, facts, knowledge_base):
    other = make_tenant("globex")[0]
    document_index(tenant=other, doc_id="globex.md", text="# Globex\n\nRoll back with globexctl undo.\n",
                   content_type="markdown")  # fmt: skip

    mine = context_build(tenant=tenant, user_id="u1", query="globexctl roll back")
    theirs = context_build(tenant=other, user_id="u1", query="globexctl roll back")

    assert mine.documents
    assert all(hit.doc_id != "globex.md" for hit in mine.documents)
    assert "globexctl" not in mine.text
    assert [hit.doc_id for hit in theirs.documents] == ["globex.md"]


def test_the_context_api_returns_documents_with_citations(api, facts, knowledge_base):
    response = api.post(
        "/api/v1/context", {"user_id": "u1", "query": "deployctl rollback", "document_limit": 1}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert [document["citation"] for document in body["documents"]] == [
        "doc:ops/runbook.md §Runbook > Rollbacks, lines 3-6"
    ]
    assert "doc:ops/runbook.md §Runbook > Rollbacks, lines 3-6" in body["text"]
