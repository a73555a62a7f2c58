"""Migrations: the schema matches the models, the forget models' move out of facts keeps data and permissions, and the
search counts start from the entries already there."""

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection

from facts.models import Fact, FactSearchCount, FactSearchTerm
from facts.services import bulk, facts_import
from forgetting.models import ForgetPolicy
from tenancy.models import ApiKey
from tenancy.services import api_key_create
from tests.factories import make_tenant


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)  # exits non-zero when one is missing


@pytest.mark.django_db(transaction=True)
def test_the_forget_models_move_to_their_app_with_their_rows_and_content_types():
    # Given a database from before the move, holding a policy and the content type staff permissions point at
    call_command("migrate", "facts", "0007", verbosity=0)
    tenant, _ = make_tenant()
    ContentType.objects.filter(app_label="forgetting").delete()  # (made again by post_migrate of the way back)
    old_type, _ = ContentType.objects.get_or_create(app_label="facts", model="forgetpolicy")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO facts_forgetpolicy (tenant_id, enabled, max_unused_days, min_usage_count, "
            "archive_retention_days, exempt_categories, created_at, updated_at) "
            "VALUES (%s, false, 12, 3, 30, '[]', now(), now())",
            [tenant.pk],
        )

    # When it is migrated
    call_command("migrate", verbosity=0)

    # Then the row is there under the new table name, and the content type (with its permissions) moved along
    assert ForgetPolicy._meta.db_table == "forgetting_forgetpolicy"
    policy = ForgetPolicy.objects.get(tenant=tenant)
    assert (policy.enabled, policy.max_unused_days) == (False, 12)
    old_type.refresh_from_db()
    assert (old_type.app_label, old_type.model) == ("forgetting", "forgetpolicy")


@pytest.fixture
def import_of_the_old_schema(monkeypatch):
    """facts_import writing only the columns the schema had before 0019 (hold_reason), as it did then."""
    monkeypatch.setattr(bulk, "IMPORT_FIELDS", [name for name in bulk.IMPORT_FIELDS if name != "hold_reason"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("import_of_the_old_schema")
def test_the_search_counts_start_from_the_entries_there_are():
    # Given a database from before the counts, holding entries of two users in two statuses
    call_command("migrate", "facts", "0014", verbosity=0)
    tenant, _ = make_tenant()
    facts = [{"user_id": "u1", "content": f"Note {n}"} for n in range(3)] + [{"user_id": "u2", "content": "Tea"}]
    imported = facts_import(tenant=tenant, facts=facts, actor="test")
    Fact.objects.filter(pk=imported[0].pk).update(status="pending")

    # When it is migrated
    call_command("migrate", verbosity=0)

    # Then each user's entries are counted, per status
    counts = FactSearchCount.objects.filter(tenant=tenant).values_list("user_id", "status", "entries")
    assert sorted(counts) == [("u1", "active", 2), ("u1", "pending", 1), ("u2", "active", 1)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("import_of_the_old_schema")
def test_the_search_terms_start_from_the_entries_there_are():
    # Given a database from before the term counts, holding entries of two users
    call_command("migrate", "facts", "0017", verbosity=0)
    tenant, _ = make_tenant()
    facts = [{"user_id": "u1", "content": f"Drinks tea at {n}"} for n in range(3)] + [
        {"user_id": "u2", "content": "Drinks coffee"}
    ]
    facts_import(tenant=tenant, facts=facts, actor="test")

    # When it is migrated
    call_command("migrate", verbosity=0)

    # Then each user's lexemes are counted (the scope lexeme not among them)
    terms = FactSearchTerm.objects.filter(tenant=tenant, lexeme__in=["drink", "tea", "coffe", "1"])
    assert sorted(terms.values_list("user_id", "lexeme", "entries")) == [
        ("u1", "1", 1), ("u1", "drink", 3), ("u1", "tea", 3), ("u2", "coffe", 1), ("u2", "drink", 1)
    ]  # fmt: skip
    assert not FactSearchTerm.objects.filter(lexeme__startswith="zs").exists()


def entries_of(tenant) -> tuple[int, int]:
    """The tenant's search entries, and how many of them hold their vector's signs (read without the model, whose
    columns a schema of the past may lack)."""
    signs = "count(signs)" if signs_column_exists() else "0"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), {signs} FROM facts_factsearchentry WHERE tenant_id = %s", [tenant.pk])
        return cursor.fetchone()


def signs_column_exists() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT FROM information_schema.columns"
            " WHERE table_name = 'facts_factsearchentry' AND column_name = 'signs')"
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_the_way_back_before_the_signs_keeps_the_entries_written_and_the_way_forward_signs_them():
    # Given a database taken back to before the signs, where facts still arrive
    call_command("migrate", "facts", "0021", verbosity=0)
    assert not signs_column_exists()
    tenant, _ = make_tenant()
    facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": f"Drinks tea at {n}"} for n in range(3)], actor="t")
    assert entries_of(tenant) == (3, 0)  # the triggers write the entries without the signs

    # When it is migrated again
    call_command("migrate", verbosity=0)

    # Then every entry holds its signs, and a new fact's entry too
    facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": "Drinks coffee"}], actor="t")
    assert entries_of(tenant) == (4, 4)


@pytest.mark.django_db(transaction=True)
def test_keys_issued_before_scopes_keep_every_scope():
    # Given a key from before scopes existed
    call_command("migrate", "tenancy", "0002", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tenancy_tenant (name, is_active, created_at) VALUES ('old', true, now()) RETURNING id"
        )
        tenant_id = cursor.fetchone()[0]
        cursor.execute(
            "INSERT INTO tenancy_apikey (tenant_id, name, prefix, key_hash, created_at) "
            "VALUES (%s, 'old', 'mp_old', 'hash-of-old', now())",
            [tenant_id],
        )

    # When it is migrated
    call_command("migrate", verbosity=0)

    # Then it may still do everything it could, and a key issued now gets read and write only
    old = ApiKey.objects.get(key_hash="hash-of-old")
    assert old.scopes == ["memory:read", "memory:write", "review", "admin"]
    assert api_key_create(tenant=old.tenant).api_key.scopes == ["memory:read", "memory:write"]
