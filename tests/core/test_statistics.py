"""A tenant whose rows arrived after its tables' last ANALYZE gets the statistics refreshed once it holds enough rows
(core.statistics): after a facts import, after an export brought back, and after a knowledge-base document is
indexed."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

import core.statistics
from core.statistics import tenant_statistics_refresh
from facts.models import Fact
from facts.services import facts_import
from kb.models import KBChunk
from kb.services import document_index
from tests.factories import make_tenant

# UNKNOWN_TENANT_ROWS in these tests: a newcomer holds this many rows after its second write. Above 64: the search
# entries' table, in 64 partitions, estimates any tenant at one row a partition at least.
ENOUGH = 100


@pytest.fixture(autouse=True)
def enough_rows(monkeypatch):
    monkeypatch.setattr(core.statistics, "UNKNOWN_TENANT_ROWS", ENOUGH)


def estimated_rows(table: str, tenant) -> int:
    """The planner's estimate of the tenant's rows in `table`."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {table} WHERE tenant_id = %s", [tenant.pk])
        return cursor.fetchone()[0][0]["Plan"]["Plan Rows"]


def analyze(*tables: str) -> None:
    """Statistics of tables holding the `tenant` fixture alone: any other tenant is estimated at one row."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"ANALYZE {table}")


def store(tenant, count: int, start: int = 0) -> None:
    facts_import(
        tenant=tenant,
        facts=[{"user_id": "u1", "content": f"Fact {n} about tea and cake"} for n in range(start, start + count)],
        actor="test",
    )


def test_a_facts_import_refreshes_the_statistics_once_a_new_tenant_holds_enough_facts(
    tenant, django_capture_on_commit_callbacks
):
    store(tenant, 300)
    analyze("facts_fact", "facts_factsearchentry")
    newcomer, _ = make_tenant("newcomer")

    with django_capture_on_commit_callbacks(execute=True):
        store(newcomer, ENOUGH // 2)
    too_few = {table: estimated_rows(table, newcomer) for table in ("facts_fact", "facts_factsearchentry")}
    with django_capture_on_commit_callbacks(execute=True):
        store(newcomer, ENOUGH // 2, start=ENOUGH // 2)

    assert too_few == {"facts_fact": 1, "facts_factsearchentry": 64}  # not analyzed for fewer than enough
    assert estimated_rows("facts_fact", newcomer) >= ENOUGH
    assert estimated_rows("facts_factsearchentry", newcomer) >= ENOUGH
    assert estimated_rows("facts_fact", tenant) >= 300  # the tenant the statistics knew, still known


def test_a_tenant_still_estimated_low_after_its_analyze_is_not_analyzed_again_by_the_process(tenant, monkeypatch):
    # As in a table of many tenants, where one outside the statistics' common values stays estimated low.
    store(tenant, 300)
    analyze("facts_fact")
    newcomer, _ = make_tenant("newcomer")
    store(newcomer, ENOUGH)
    assert tenant_statistics_refresh(models=[Fact], tenant_id=newcomer.pk) == ["facts_fact"]
    store(newcomer, 10, start=ENOUGH)
    monkeypatch.setattr(core.statistics, "UNKNOWN_TENANT_ROWS", ENOUGH + 10)  # above the estimate, now reached
    assert estimated_rows("facts_fact", newcomer) < ENOUGH + 10

    assert tenant_statistics_refresh(models=[Fact], tenant_id=newcomer.pk) == []


def test_an_indexed_document_refreshes_the_chunks_statistics_once_a_new_tenant_holds_enough(
    tenant, django_capture_on_commit_callbacks
):
    def index(owner, doc_id: str, rules: int) -> None:
        text = "\n\n".join(f"## Rule {n}\n\nShipping rule {n} covers parcels of case {n * 7}." for n in range(rules))
        document_index(tenant=owner, doc_id=doc_id, text=text, content_type="markdown", max_tokens=20, overlap_tokens=0)

    index(tenant, "settled.md", 200)
    analyze("kb_kbchunk", "kb_document")
    newcomer, _ = make_tenant("newcomer")

    with django_capture_on_commit_callbacks(execute=True):
        index(newcomer, "first.md", ENOUGH // 2)
    too_few = estimated_rows("kb_kbchunk", newcomer)
    with django_capture_on_commit_callbacks(execute=True):
        index(newcomer, "second.md", ENOUGH // 2)

    assert too_few == 1
    assert KBChunk.objects.filter(tenant=newcomer).count() >= ENOUGH
    assert estimated_rows("kb_kbchunk", newcomer) >= ENOUGH
    assert estimated_rows("kb_document", newcomer) == 1  # two documents: fewer than enough, not analyzed for


def test_memories_brought_back_from_an_export_refresh_the_statistics_of_a_new_tenant(
    tenant, tmp_path, django_capture_on_commit_callbacks
):
    store(tenant, ENOUGH)
    analyze("facts_fact", "facts_factsearchentry")
    call_command("export_memories", "--tenant", tenant.name, "--output", str(tmp_path / "export.jsonl"))
    newcomer, _ = make_tenant("newcomer")

    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_memories", "--tenant", newcomer.name, str(tmp_path / "export.jsonl"), stdout=StringIO())

    assert Fact.objects.filter(tenant=newcomer).count() == ENOUGH
    assert estimated_rows("facts_fact", newcomer) >= ENOUGH
    assert estimated_rows("facts_factsearchentry", newcomer) >= ENOUGH
