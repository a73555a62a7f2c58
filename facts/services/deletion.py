"""The one way facts are deleted, whoever deletes them: a person or an agent (the history keeps what the fact
said), forgetting (purged: the history keeps only ids, actions and times), or the erasure of their user (no trace).
"""

import functools
from dataclasses import dataclass

from django.db import connection, models, transaction
from django.db.models import signals
from psycopg.types.json import Jsonb

from core.admin import admin_log_entries
from core.errors import ApplicationError
from search.filters import Node as FilterNode
from search.filters import filter_q
from tenancy.models import Tenant

from ..models import Fact, FactConflict, FactEvent
from ..selectors import FACT_FILTER_FIELDS
from .history import snapshot


def fact_delete(*, tenant: Tenant, fact_id: int, actor: str) -> None:
    """Delete one fact of `tenant` (404 when it has none such)."""
    if not facts_delete(tenant=tenant, fact_ids=[fact_id], actor=actor):
        raise ApplicationError("Fact not found.", code="not_found", status_code=404)


def facts_delete_of_user(
    *,
    tenant: Tenant,
    user_id: str,
    actor: str,
    agent_id: str | None = None,
    categories: list[str] | None = None,
    filters: FilterNode | None = None,
) -> list[int]:
    """Delete every fact of the user (of one agent, of some categories, of those a filter of the filter language
    selects, when named): current ones, those waiting for review and the history alike, so that nothing of it comes
    back on a later approval. Their events stay (the erasure of the user, privacy.services.user_erase, is what
    leaves no trace)."""
    fact_ids = Fact.objects.filter(tenant=tenant, user_id=user_id)
    if filters is not None:
        fact_ids = fact_ids.filter(filter_q(filters, fields=FACT_FILTER_FIELDS))
    if agent_id is not None:
        fact_ids = fact_ids.filter(agent_id=agent_id)
    if categories:
        fact_ids = fact_ids.filter(category__in=categories)
    return facts_delete(tenant=tenant, fact_ids=list(fact_ids.values_list("pk", flat=True)), actor=actor)


def facts_delete(*, tenant: Tenant, fact_ids: list[int], actor: str, purge: bool = False) -> list[int]:
    """Delete those of `fact_ids` that belong to `tenant`, with what points at them (pointers to them cleared,
    their conflicts gone), and return their ids. Each gets a "deleted" event holding the fact as it was; with
    `purge`, a "purged" event instead, every earlier event of the fact is emptied and the admin's log lines about
    it are redacted, so nothing the fact said is kept. Rows are locked in primary-key order.

    Plain SQL with id arrays: a purge batch is FORGET_BATCH_SIZE facts, and IN lists or model instances of that
    many rows cost more than the deletion itself."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM facts_fact WHERE tenant_id = %s AND id = ANY(%s) ORDER BY id FOR UPDATE",
            [tenant.pk, sorted(set(fact_ids))],
        )
        ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            return []
        if purge:
            cursor.execute("SELECT id, user_id FROM facts_fact WHERE id = ANY(%s) ORDER BY id", [ids])
            events = [(pk, user_id, None) for pk, user_id in cursor.fetchall()]
        else:
            facts = Fact.objects.filter(pk__in=ids).defer("embedding", "search_text").order_by("pk")
            events = [(fact.pk, fact.user_id, Jsonb(snapshot(fact))) for fact in facts]
        _delete_rows(ids)
        if purge:
            cursor.execute(
                "UPDATE facts_factevent SET before = NULL, after = NULL WHERE tenant_id = %s AND fact_id = ANY(%s) "
                "AND (before IS NOT NULL OR after IS NOT NULL)",
                [tenant.pk, ids],
            )
            admin_log_entries(Fact, ids).update(object_repr="(purged)", change_message="")
        cursor.execute(
            "INSERT INTO facts_factevent (tenant_id, fact_id, user_id, action, actor, before, after, created_at) "
            "SELECT %s, id, user_id, %s, %s, before, NULL, clock_timestamp() "
            "FROM unnest(%s::bigint[], %s::text[], %s::jsonb[]) AS gone(id, user_id, before)",
            [
                tenant.pk,
                FactEvent.Action.PURGED if purge else FactEvent.Action.DELETED,
                actor,
                [pk for pk, _, _ in events],
                [user_id for _, user_id, _ in events],
                [before for _, _, before in events],
            ],
        )
    return ids


@dataclass(frozen=True)
class FactsErased:
    fact_ids: list[int]
    conflict_ids: list[int]
    event_ids: list[int]
    earlier_fact_ids: list[int]  # facts of the user deleted before (only events name them): for their admin log lines


def facts_erase_user(*, tenant: Tenant, user_id: str) -> FactsErased:
    """Delete every fact of one user with its whole history and conflicts, leaving no event behind: the erasure
    keeps nothing that names the user. The caller holds the user's lock and the transaction."""
    conflicts = FactConflict.objects.filter(tenant=tenant, user_id=user_id)
    events = FactEvent.objects.filter(tenant=tenant, user_id=user_id)
    fact_ids = list(Fact.objects.filter(tenant=tenant, user_id=user_id).values_list("pk", flat=True))
    event_rows = list(events.values_list("pk", "fact_id"))
    erased = FactsErased(
        fact_ids=fact_ids,
        conflict_ids=list(conflicts.values_list("pk", flat=True)),
        event_ids=[pk for pk, _ in event_rows],
        earlier_fact_ids=sorted({fact_id for _, fact_id in event_rows} - set(fact_ids)),
    )
    conflicts.delete()
    _delete_rows(erased.fact_ids)
    events.delete()
    return erased


def _delete_rows(ids: list[int]) -> None:
    """Delete facts by id, following every relation to them as the ORM would, one statement per relation."""
    statements = _fact_relations_sql()
    if statements is None:  # a relation plain SQL cannot follow (signals, PROTECT, deeper cascades): the ORM can
        Fact.objects.filter(pk__in=ids).only("pk").delete()
        return
    with connection.cursor() as cursor:
        for sql in [*statements, "DELETE FROM facts_fact WHERE id = ANY(%s)"]:
            cursor.execute(sql, [ids])


@functools.cache
def _fact_relations_sql() -> list[str] | None:
    """What deleting a fact does to the rows that point at it (today: superseded_by pointers are cleared, its
    conflicts go with it), as SQL; None when only Django's collector can do it right."""
    if any(signal.has_listeners(Fact) for signal in (signals.pre_delete, signals.post_delete)):
        return None  # (the ORM would send them)
    quote = connection.ops.quote_name
    statements = []
    for relation in Fact._meta.related_objects:
        if relation.many_to_many:
            return None
        table, column = quote(relation.related_model._meta.db_table), quote(relation.field.column)
        if relation.on_delete is models.SET_NULL:
            statements.append(f"UPDATE {table} SET {column} = NULL WHERE {column} = ANY(%s)")
        elif relation.on_delete is models.CASCADE and _plain_leaf(relation.related_model):
            statements.append(f"DELETE FROM {table} WHERE {column} = ANY(%s)")
        elif relation.on_delete is not models.DO_NOTHING:
            return None
    return statements


def _plain_leaf(model) -> bool:
    """Rows of `model` can go by plain DELETE: nothing points at them and nobody listens for their deletion."""
    listened = any(signal.has_listeners(model) for signal in (signals.pre_delete, signals.post_delete))
    return not model._meta.related_objects and not listened
