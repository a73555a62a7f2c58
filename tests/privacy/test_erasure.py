"""user_erase: nothing about the user is left in any table, any endpoint or the admin; neighbours keep theirs."""

import pytest
from django.apps import apps
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client

from episodes.models import Episode, EpisodeMessage
from facts.models import Fact, FactConflict, FactEvent
from facts.services import fact_remember
from privacy.services import user_erase
from tenancy.services import tenant_membership_add
from tests.forgetting.conftest import add

pytestmark = pytest.mark.django_db

USER = "erase-me-7781"
MARKER = "Xylophone7781"  # in everything the user said: found nowhere afterwards


@pytest.fixture
def staff(tenant):
    user = get_user_model().objects.create_user("reviewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=["facts", "episodes"]))
    tenant_membership_add(tenant=tenant, user=user)
    return user


@pytest.fixture
def user_data(tenant, other_tenant_and_key, staff):
    """Every kind of row that can hold the user: facts (one superseded, one archived), events, a conflict,
    episodes and admin log lines, plus neighbours that must stay."""
    fact_remember(tenant=tenant, user_id=USER, content=f"Lives in Berlin near {MARKER}")
    fact_remember(tenant=tenant, user_id=USER, content=f"Lives in Paris near {MARKER}")
    conflicting = fact_remember(tenant=tenant, user_id=USER, content=f"Lives in Rome near {MARKER}", confidence=0.5)
    FactConflict.objects.filter(pk__in=conflicting.conflict_ids).update(reason=f"both mention {MARKER}")
    [archived] = add(tenant, f"Old hobby {MARKER}", user_id=USER, status="active")
    Fact.objects.filter(pk=archived.pk).update(status="archived")
    episode = Episode.objects.create(
        tenant=tenant,
        user_id=USER,
        session_id="s1",
        message_count=1,
        summary=f"Talked about {MARKER}",
    )
    EpisodeMessage.objects.create(
        tenant=tenant, episode=episode, position=0, role="user", content=f"I live near {MARKER}"
    )
    LogEntry.objects.log_actions(staff.pk, [conflicting.fact], CHANGE, change_message=f"edited {MARKER}")
    LogEntry.objects.log_actions(staff.pk, [episode], ADDITION, change_message="added")
    add(tenant, "A neighbour's fact", user_id="someone-else")
    other = other_tenant_and_key[0]
    add(other, "Same user id, another tenant", user_id=USER)
    Episode.objects.create(tenant=other, user_id=USER, session_id="s1", summary="another tenant's episode")


def rows_mentioning(text: str, *, tenant_id: int | None = None) -> dict[str, int]:
    """Rows of every table whose text form contains `text` (of one tenant, where the table has tenants)."""
    found = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            columns = {column.name for column in connection.introspection.get_table_description(cursor, table)}
            quoted = connection.ops.quote_name(table)
            sql, params = f"SELECT count(*) FROM {quoted} AS row WHERE row::text LIKE %s", [f"%{text}%"]
            if tenant_id is not None and "tenant_id" in columns:
                sql, params = sql + " AND tenant_id = %s", [*params, tenant_id]
            cursor.execute(sql, params)
            if count := cursor.fetchone()[0]:
                found[table] = count
    return found


def test_erasure_leaves_nothing_behind_in_any_table(tenant, other_tenant_and_key, user_data):
    assert rows_mentioning(MARKER)  # the scan does see the user's data while it is there

    report = user_erase(tenant=tenant, user_id=USER, actor="api_key:1")

    assert (report.facts, report.fact_conflicts, report.episodes, report.admin_log_entries) == (4, 1, 1, 2)
    assert report.fact_events == 7
    assert rows_mentioning(MARKER) == {}
    assert rows_mentioning(USER, tenant_id=tenant.pk) == {}
    for model in apps.get_models():
        names = {field.name for field in model._meta.get_fields()}
        if {"tenant", "user_id"} <= names:
            assert not model.objects.filter(tenant=tenant, user_id=USER).exists(), model


def test_erasure_keeps_other_users_and_other_tenants(tenant, other_tenant_and_key, user_data):
    other = other_tenant_and_key[0]

    user_erase(tenant=tenant, user_id=USER, actor="api_key:1")

    assert list(Fact.objects.filter(tenant=tenant).values_list("user_id", flat=True)) == ["someone-else"]
    assert Fact.objects.filter(tenant=other, user_id=USER).count() == 1
    assert Episode.objects.filter(tenant=other, user_id=USER).count() == 1
    assert FactEvent.objects.filter(tenant=other, user_id=USER).count() == 1


def test_nothing_about_the_user_is_findable_in_the_admin(tenant, staff, user_data):
    client = Client()
    client.force_login(staff)
    pages = [
        "/admin/facts/fact/",
        "/admin/facts/factevent/",
        "/admin/facts/factconflict/",
        "/admin/episodes/episode/",
    ]
    assert [client.get(page, {"q": USER}).context["cl"].result_count for page in pages] == [4, 7, 1, 1]
    assert MARKER in client.get("/admin/").content.decode()

    user_erase(tenant=tenant, user_id=USER, actor="staff:1")

    for page in pages:
        listing = client.get(page, {"q": USER})
        assert (listing.status_code, listing.context["cl"].result_count) == (200, 0), page
    index = client.get("/admin/").content.decode()  # "Recent actions" lists the admin log
    assert MARKER not in index
