"""FactSearchEntry, the narrow copy of each searchable fact, stays in step with facts_fact through every kind of
write, and FactSearchCount and FactSearchTerm with the entries (the triggers of facts/sql/search_upkeep.sql):
compared row by row with what they must hold."""

import threading
import time
from collections import Counter
from contextlib import contextmanager

import numpy as np
import pytest
from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.models import Count

from core.locks import LockNamespace, xact_lock
from facts.models import Fact, FactSearchCount, FactSearchEntry, FactSearchTerm
from facts.selectors import facts_search, search_scope_lexeme
from facts.services import fact_delete, fact_reject, fact_remember, fact_update, facts_import, facts_record_usage
from tenancy.services import tenant_create
from tests.threads import held_elsewhere

pytestmark = pytest.mark.django_db


def expected_entries() -> dict[int, tuple]:
    """What the entries must be: one per current active or pending fact, computed here from the facts."""
    entries = {}
    for fact in Fact.objects.filter(valid_to__isnull=True, status__in=["active", "pending"]):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT search_vector || array_to_tsvector(ARRAY[%s]) FROM facts_fact WHERE id = %s",
                [search_scope_lexeme(fact.tenant_id, fact.user_id), fact.pk],
            )
            [keywords] = cursor.fetchone()
        vector = None if fact.embedding is None else np.asarray(fact.embedding, dtype=float)
        vector_model = "" if fact.embedding is None else fact.embedding_model
        entries[fact.pk] = (
            fact.tenant_id, fact.user_id, fact.agent_id, fact.category, fact.status, vector, vector_model,
            fact.embedding_pending != "", keywords,
        )  # fmt: skip
    return entries


def stored_entries() -> dict[int, tuple]:
    entries = {}
    for entry in FactSearchEntry.objects.all():
        with connection.cursor() as cursor:
            cursor.execute("SELECT keywords::text FROM facts_factsearchentry WHERE fact_id = %s", [entry.fact_id])
            [keywords] = cursor.fetchone()
        vector = None if entry.embedding is None else np.asarray(entry.embedding, dtype=float)
        entries[entry.fact_id] = (
            entry.tenant_id, entry.user_id, entry.agent_id, entry.category, entry.status, vector,
            entry.vector_model, entry.awaiting_vector, keywords,
        )  # fmt: skip
    return entries


COUNT_KEY = ("tenant_id", "user_id", "status", "agent_id", "category", "vector_model", "awaiting_vector")


def counted_entries() -> dict[tuple, int]:
    """What FactSearchCount must hold: the entries counted per key here (no key without entries)."""
    grouped = FactSearchEntry.objects.values_list(*COUNT_KEY).annotate(entries=Count("pk")).order_by()
    return {tuple(row[:-1]): row[-1] for row in grouped}


def stored_counts() -> dict[tuple, int]:
    return {tuple(row[:-1]): row[-1] for row in FactSearchCount.objects.values_list(*COUNT_KEY, "entries")}


def counted_terms() -> dict[tuple, int]:
    """What FactSearchTerm must hold: per key and lexeme of the entries' keywords (the user's scope lexeme left
    out), the entries holding it, counted here."""
    terms = Counter()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(COUNT_KEY)}, tsvector_to_array(keywords) FROM facts_factsearchentry")
        for *key, lexemes in cursor.fetchall():
            scope = search_scope_lexeme(key[0], key[1])
            terms.update((*key, lexeme) for lexeme in lexemes if lexeme != scope)
    return dict(terms)


def stored_terms() -> dict[tuple, int]:
    rows = FactSearchTerm.objects.values_list(*COUNT_KEY, "lexeme", "entries")
    return {tuple(row[:-1]): row[-1] for row in rows}


def assert_in_step():
    assert stored_counts() == counted_entries()
    assert stored_terms() == counted_terms()
    stored, expected = stored_entries(), expected_entries()
    assert FactSearchEntry.objects.count() == len(stored)  # one entry a fact, in one partition
    assert stored.keys() == expected.keys()
    for fact_id, entry in stored.items():
        *columns, vector, model, awaiting, keywords = entry
        *expected_columns, expected_vector, expected_model, expected_awaiting, expected_keywords = expected[fact_id]
        assert (columns, model, awaiting, keywords) == (
            expected_columns,
            expected_model,
            expected_awaiting,
            expected_keywords,
        )
        assert (vector is None) == (expected_vector is None)
        if vector is not None:  # half precision: three significant digits
            np.testing.assert_allclose(vector, expected_vector, rtol=1e-3, atol=1e-4)


def test_every_kind_of_write_keeps_the_entries_in_step(tenant, settings):
    settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 1.0
    imported = facts_import(
        tenant=tenant,
        facts=[{"user_id": "u1", "content": f"Drinks tea number {n}", "agent_id": "a1"} for n in range(5)],
        actor="test",
    )  # COPY
    assert_in_step()
    assert FactSearchEntry.objects.count() == 5

    remembered = fact_remember(tenant=tenant, user_id="u1", content="Lives in Lisbon").fact  # ORM insert
    fact_remember(tenant=tenant, user_id="u1", content="Lives in Porto now, no longer in Lisbon")  # supersedes
    fact_update(tenant=tenant, fact_id=imported[0].pk, actor="test", content="Drinks coffee, not tea")
    fact_update(tenant=tenant, fact_id=imported[1].pk, actor="test", category="preference", pinned=True)
    fact_reject(tenant=tenant, fact_id=imported[2].pk, actor="test")
    fact_delete(tenant=tenant, fact_id=imported[3].pk, actor="test")
    Fact.objects.filter(pk=imported[4].pk).update(status="pending", embedding=None, embedding_pending="embed")
    Fact.objects.filter(tenant=tenant).update(usage_count=7)  # no copied column: nothing to write
    assert_in_step()
    assert not FactSearchEntry.objects.filter(fact_id__in=[imported[2].pk, imported[3].pk]).exists()
    assert FactSearchEntry.objects.filter(fact_id=remembered.pk).exists() == (
        Fact.objects.get(pk=remembered.pk).valid_to is None
    )

    other, _ = tenant_create(name="other")
    facts_import(tenant=other, facts=[{"user_id": "u1", "content": "Drinks tea"}], actor="test")
    other.delete()  # the tenant's facts go, and their entries with them
    assert_in_step()


def test_a_fact_is_found_by_its_new_words_once_edited_and_not_once_rejected(tenant):
    [fact] = facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": "Plays the cello"}], actor="test")
    fact_update(tenant=tenant, fact_id=fact.pk, actor="test", content="Plays the theremin")

    assert [hit.fact.pk for hit in facts_search(tenant=tenant, user_id="u1", query="theremin", keyword_only=True)] == [
        fact.pk
    ]
    assert facts_search(tenant=tenant, user_id="u1", query="cello", keyword_only=True) == []

    fact_reject(tenant=tenant, fact_id=fact.pk, actor="test")
    assert facts_search(tenant=tenant, user_id="u1", query="theremin") == []


def test_a_words_scope_lexeme_written_into_a_fact_reaches_no_other_user(tenant):
    facts_import(tenant=tenant, facts=[{"user_id": "victim", "content": "Keeps the vault code 4471"}], actor="test")
    forged = f"{search_scope_lexeme(tenant.pk, 'victim')} vault code"
    facts_import(tenant=tenant, facts=[{"user_id": "mallory", "content": forged}], actor="test")

    victims = facts_search(tenant=tenant, user_id="victim", query="vault code", keyword_only=True)

    assert [hit.fact.user_id for hit in victims] == ["victim"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_the_same_users_keep_the_counts(tenant):
    """Two transactions importing facts of the same two users, in opposite orders, at once: each adds its own count
    to each user's row (locked in key order, so neither waits for the other in a cycle)."""
    started = threading.Barrier(2)
    errors = []

    def importer(users: list[str], name: str) -> None:
        try:
            started.wait()
            for n in range(10):
                facts = [{"user_id": user, "content": f"{name} note {n} of {user}"} for user in users]
                facts_import(tenant=tenant, facts=facts, actor="test")
        except Exception as exc:  # noqa: BLE001 - reported below, from the test's thread
            errors.append(exc)
        finally:
            connection.close()

    orders = ((["a", "b"], "x"), (["b", "a"], "y"))
    threads = [threading.Thread(target=importer, args=(users, name)) for users, name in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert stored_counts() == counted_entries()
    assert FactSearchCount.objects.get(tenant=tenant, user_id="a", status="active").entries == 20
    assert stored_terms() == counted_terms()
    assert FactSearchTerm.objects.get(tenant=tenant, user_id="a", lexeme="note").entries == 20


def wait_until_blocked(pid: int) -> None:
    """Until the backend `pid` waits for a lock (at most 10 s)."""
    deadline = time.monotonic() + 10
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
            if (cursor.fetchone() or [None])[0] == "Lock":
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited for a lock")


@pytest.mark.django_db(transaction=True)
def test_two_writers_of_one_users_words_queue_instead_of_deadlocking(tenant):
    """One transaction changes the user's words in two statements (as edits inside one transaction do), the other in
    one statement holding both words: each would hold a word's row the other needs, were the user's words not
    locked as a whole first."""
    [cello, alpacas] = facts_import(
        tenant=tenant,
        facts=[{"user_id": "u1", "content": "Plays the cello"}, {"user_id": "u1", "content": "Reads about alpacas"}],
        actor="test",
    )
    errors, importer_pid, importer_ready = [], [], threading.Event()

    def importer() -> None:  # its statement takes "alpaca", then "theremin", the words the other transaction changes
        try:
            connection.ensure_connection()
            importer_pid.append(connection.connection.info.backend_pid)
            importer_ready.set()
            facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": "Alpacas and theremins"}], actor="test")
        except Exception as exc:  # noqa: BLE001 - reported below, from the test's thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=importer)
    try:
        with transaction.atomic():
            fact_update(tenant=tenant, fact_id=cello.pk, actor="test", content="Plays the theremin")
            thread.start()
            importer_ready.wait(10)
            wait_until_blocked(importer_pid[0])
            fact_update(tenant=tenant, fact_id=alpacas.pk, actor="test", content="Reads about llamas")
    except Exception as exc:  # noqa: BLE001 - a deadlock aborts one of the two
        errors.append(exc)
    thread.join()

    assert errors == []
    assert stored_terms() == counted_terms()
    assert FactSearchTerm.objects.get(tenant=tenant, user_id="u1", lexeme="theremin").entries == 2


@pytest.mark.django_db(transaction=True)
def test_the_term_triggers_take_the_lock_core_locks_names_for_the_user(tenant):
    @contextmanager
    def users_terms_locked():
        with transaction.atomic():
            xact_lock(LockNamespace.SEARCH_TERMS, tenant.pk, "u1")
            yield

    def import_with_a_lock_timeout(*user_ids: str) -> None:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '300ms'")
            facts = [{"user_id": user_id, "content": "Plays the cello"} for user_id in user_ids]
            facts_import(tenant=tenant, facts=facts, actor="test")

    with held_elsewhere(users_terms_locked):
        with pytest.raises(OperationalError, match="lock timeout"):
            import_with_a_lock_timeout("u1")
        with pytest.raises(OperationalError, match="lock timeout"):
            import_with_a_lock_timeout("u0", "u1")  # one statement, two users: each user's lock is taken
        import_with_a_lock_timeout("u2")  # another user's words: not held

    assert list(Fact.objects.values_list("user_id", flat=True)) == ["u2"]


def test_a_users_counts_and_words_go_with_their_last_fact(tenant):
    [kept, gone] = facts_import(
        tenant=tenant,
        facts=[{"user_id": "u1", "content": "Drinks tea"}, {"user_id": "u2", "content": "Drinks coffee"}],
        actor="test",
    )

    fact_delete(tenant=tenant, fact_id=gone.pk, actor="test")

    assert list(FactSearchCount.objects.values_list("user_id", "entries")) == [("u1", 1)]
    terms = set(FactSearchTerm.objects.values_list("user_id", "lexeme", "entries"))
    assert {user for user, _, _ in terms} == {"u1"}
    assert {("u1", "drink", 1), ("u1", "tea", 1)} <= terms
    fact_reject(tenant=tenant, fact_id=kept.pk, actor="test")
    assert not FactSearchCount.objects.exists()
    assert not FactSearchTerm.objects.exists()  # no word of a fact outlives it


def test_writes_leave_nothing_pending_in_the_keyword_index(tenant):
    """Every search would scan what is pending (every user's new entries), until a vacuum merged it."""
    facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": f"Note {n} on tea"} for n in range(100)], actor="t")
    fact_remember(tenant=tenant, user_id="u1", content="Lives in Lisbon")

    with connection.cursor() as cursor:
        cursor.execute(  # each partition's index of the keywords
            "SELECT sum(gin_clean_pending_list(inhrelid)) FROM pg_inherits"
            " WHERE inhparent = 'factsearch_keywords'::regclass"
        )
        assert cursor.fetchone()[0] == 0  # pages they had to merge


def test_an_update_of_no_copied_column_runs_no_statement_on_the_entries(tenant):
    """A usage count (every /context) or a review timestamp: the trigger returns before its statements on the
    entries, whose own statement-level triggers (the counts') would fire even for no row."""
    [fact] = facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": "Drinks tea"}], actor="test")
    with connection.cursor() as cursor:  # (rolled back with the test)
        cursor.execute("CREATE TABLE entry_statements (operation text)")
        cursor.execute(
            "CREATE FUNCTION entry_statement() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN INSERT INTO entry_statements VALUES (TG_OP); RETURN NULL; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER entry_statement AFTER INSERT OR UPDATE OR DELETE ON facts_factsearchentry"
            " FOR EACH STATEMENT EXECUTE FUNCTION entry_statement()"
        )

    def statements() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT operation FROM entry_statements")
            return sorted(operation for (operation,) in cursor.fetchall())

    facts_record_usage(tenant=tenant, fact_ids=[fact.pk])
    assert statements() == []
    fact_update(tenant=tenant, fact_id=fact.pk, actor="test", content="Drinks green tea")
    assert statements() == ["DELETE", "INSERT"]  # the entry written afresh
    assert_in_step()


def entry_partition(fact_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM facts_factsearchentry WHERE fact_id = %s", [fact_id])
        return cursor.fetchone()[0]


def test_a_users_entries_lie_in_one_of_the_tables_partitions(tenant):
    facts = facts_import(
        tenant=tenant,
        facts=[{"user_id": f"u{n % 20}", "content": f"Note {n} on tea"} for n in range(200)],
        actor="test",
    )

    partitions = {}
    for fact in facts:
        partitions.setdefault(fact.user_id, set()).add(entry_partition(fact.pk))
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'facts_factsearchentry'::regclass")
        assert cursor.fetchone()[0] == 64
    assert all(len(held) == 1 for held in partitions.values())
    assert len(set().union(*partitions.values())) > 1  # twenty users spread over the partitions


def test_a_fact_given_to_another_user_moves_its_entry_to_that_users_partition(tenant):
    [moved, other] = facts_import(
        tenant=tenant,
        facts=[{"user_id": "u1", "content": "Drinks tea"}, {"user_id": "mover-2", "content": "Plays chess"}],
        actor="test",
    )
    before = entry_partition(moved.pk)

    Fact.objects.filter(pk=moved.pk).update(user_id="mover-2")

    assert_in_step()
    assert entry_partition(moved.pk) == entry_partition(other.pk) != before
    assert [hit.fact.pk for hit in facts_search(tenant=tenant, user_id="u1", query="tea")] == []
    assert moved.pk in [hit.fact.pk for hit in facts_search(tenant=tenant, user_id="mover-2", query="tea")]


def test_an_update_of_the_entries_themselves_is_refused(tenant):
    """The counts and terms follow the entries' inserts and deletes alone: an update would leave them behind."""
    [fact] = facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": "Drinks tea"}], actor="test")

    with pytest.raises(DatabaseError, match="update the fact instead"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE facts_factsearchentry SET category = 'profile' WHERE fact_id = %s", [fact.pk])

    assert_in_step()
