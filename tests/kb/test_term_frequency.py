"""kb_search's BM25 statistics kept by kb_kbchunk's triggers, and its keyword side bounded by them: reading a common
term's chunks only where they can rank must find exactly what reading every chunk finds."""

import importlib
import threading

import pytest
from django.db import connection

from kb.models import KBChunk, KBTermFrequency
from kb.selectors import kb_search
from kb.services import document_delete, document_index
from tests.factories import make_tenant
from tests.kb.plans import search_plans

pytestmark = pytest.mark.django_db


def index(tenant, doc_id, text, title=""):
    return document_index(tenant=tenant, doc_id=doc_id, text=text, content_type="markdown", title=title)


def counted(tenant) -> dict[str, int]:
    """What the triggers keep for `tenant` (rows counted down to 0 are the same as none)."""
    rows = KBTermFrequency.objects.filter(tenant=tenant).exclude(chunks=0)
    return dict(rows.values_list("lexeme", "chunks"))


def recounted(tenant) -> dict[str, int]:
    """The same counts, made from the chunks themselves."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT lexeme, count(*) FROM kb_kbchunk, unnest(tsvector_to_array(search_vector) || ''::text) lexeme"
            " WHERE tenant_id = %s GROUP BY lexeme",
            [tenant.pk],
        )
        return dict(cursor.fetchall())


@pytest.fixture
def acme(tenant):
    index(tenant, "deploys.md", "# Deploys\n\nDeploys go out on Tuesdays through the pipeline.\n")
    index(
        tenant, "backups.md", "# Backups\n\nPostgreSQL is backed up nightly.\n\n## Restore\n\nRestores take an hour.\n"
    )
    return tenant


def test_the_counts_follow_every_change_of_the_chunks(acme):
    other, _ = make_tenant("globex")
    index(other, "deploys.md", "# Deploys\n\nGlobex deploys on Fridays.\n")
    assert counted(acme) == recounted(acme)
    assert counted(acme)[""] == KBChunk.objects.filter(tenant=acme).count()
    assert counted(acme)["deploy"] == 1  # one chunk of acme's holds it, whatever globex holds

    index(
        acme, "deploys.md", "# Deploys\n\nDeploys go out on Mondays now.\n\n## Canary\n\nA canary deploy goes first.\n"
    )
    assert counted(acme) == recounted(acme)
    assert counted(acme)["deploy"] == 2
    assert "tuesday" not in counted(acme)

    index(acme, "backups.md", "# Backups\n\nPostgreSQL is backed up nightly.\n\n## Restore\n\nRestores take an hour.\n",
          title="Storage handbook")  # fmt: skip
    assert counted(acme)["handbook"] == KBChunk.objects.filter(tenant=acme, document__doc_id="backups.md").count()
    assert counted(acme) == recounted(acme)

    document_delete(tenant=acme, doc_id="backups.md")
    assert counted(acme) == recounted(acme)
    assert "handbook" not in counted(acme)
    assert counted(other) == recounted(other)  # untouched by all of acme's changes


def test_deleting_a_tenant_deletes_its_counts(acme):
    acme.delete()

    assert not KBTermFrequency.objects.filter(tenant_id=acme.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_indexing_of_one_tenant_counts_every_chunk(tenant):
    # Writers of one tenant queue on its '' row: no deadlock on the lexemes they share, and no count lost.
    errors = []

    def writer(n: int) -> None:
        try:
            for version in range(3):
                words = " ".join(f"shared{k} own{n}x{k}" for k in range(20))
                index(tenant, f"doc-{n}.md", f"# Doc {n}\n\nVersion {version}: {words}.\n")
        except Exception as exc:  # noqa: BLE001 - asserted empty below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert counted(tenant) == recounted(tenant)
    assert counted(tenant)["shared0"] == 4


def test_the_data_migration_counts_the_chunks_indexed_before_it(acme):
    KBTermFrequency.objects.all().delete()
    migration = importlib.import_module("kb.migrations.0008_fill_term_frequency")

    with connection.cursor() as cursor:
        cursor.execute(migration.FILL)

    assert counted(acme) == recounted(acme)


# --- the bounded keyword side ---------------------------------------------------------------------------------


@pytest.fixture
def crowded(tenant):
    """Chunks whose keyword scores tie in groups: "deploy" in all 150, "rollout" in every second, "tail" in the others
    (as many: a read term's chunks and a common term's tie), "canary" in every
    fifth, "zebra" in every thirtieth; each chunk its own document, so ids follow n."""
    for n in range(150):
        words = [
            "deploy",
            "rollout" if n % 2 == 0 else "tail",
            "canary" if n % 5 == 0 else "",
            "zebra" if n % 30 == 0 else "",
        ]
        index(tenant, f"notes/{n:03d}.md", f"# Note {n}\n\nThe {' '.join(w for w in words if w)} of service {n}.\n")
    index(tenant, "notes/berlin.md", "# 部署\n\n我们在柏林部署 deploy。\n")
    return tenant


@pytest.mark.parametrize("chunks_read", [0, 5, 40, 100])
@pytest.mark.parametrize(
    ("query", "limit"),
    [
        ("deploy canary rollout zebra", 10),
        ("deploy rollout", 10),  # ties across a whole pattern: the lowest ids must win, as in the full ranking
        ("rollout tail", 10),  # with 100 read: rollout read in full, its last place tied by tail's pattern
        ("canary zebra", 20),
        ("deploy", 15),
        ("deploy canary rollout zebra note service", 12),  # 6: past MAX_PATTERN_TERMS the rarest common one is read
        ("deploy 柏林", 10),  # a CJK pair is a phrase: counted, never in the lexeme counts
    ],
)
def test_the_bounded_keyword_side_finds_what_reading_every_chunk_finds(crowded, settings, query, limit, chunks_read):
    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = 10**9
    every_chunk_read = kb_search(tenant=crowded, query=query, limit=limit, keyword_only=True)
    with_vectors = kb_search(tenant=crowded, query=query, limit=limit)

    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = chunks_read
    bounded = kb_search(tenant=crowded, query=query, limit=limit, keyword_only=True)

    assert bounded == every_chunk_read
    assert kb_search(tenant=crowded, query=query, limit=limit) == with_vectors
    assert len(bounded) == limit


def test_a_rare_term_still_outranks_the_common_ones(crowded, settings):
    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = 0

    hits = kb_search(tenant=crowded, query="deploy zebra", limit=5, keyword_only=True)

    assert [hit.doc_id for hit in hits] == ["notes/000.md", "notes/030.md", "notes/060.md", "notes/090.md",
                                            "notes/120.md"]  # fmt: skip
    assert all(hit.keyword == 1.0 for hit in hits)


def test_with_length_normalisation_every_term_is_read(crowded, settings):
    settings.KB_SEARCH_BM25_B = 0.75
    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = 10**9
    every_chunk_read = kb_search(tenant=crowded, query="deploy canary", limit=10, keyword_only=True)

    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = 0
    bounded = kb_search(tenant=crowded, query="deploy canary", limit=10, keyword_only=True)

    assert bounded == every_chunk_read
    assert len(bounded) == 10


def test_the_patterns_are_read_best_first_and_no_further_than_needed(crowded, settings):
    settings.KB_SEARCH_KEYWORD_CHUNKS_READ = 0  # the four terms reached through their 15 patterns alone
    with search_plans() as plans:
        hits = kb_search(tenant=crowded, query="deploy canary rollout zebra", limit=10, keyword_only=True)

    # The best pattern (all four terms: every 30th note) first; the walk has its 40 chunks within "rollout deploy"
    # (every second note but the tenths), so "rollout" alone and "deploy" alone are never read.
    assert [hit.doc_id for hit in hits[:5]] == [f"notes/{n:03d}.md" for n in (0, 30, 60, 90, 120)]
    assert plans[0].count("->  Limit (never executed)") == 2  # each pattern's part is a Limit
