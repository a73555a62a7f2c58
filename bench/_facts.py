"""Setup shared by benchmark scripts, never measured: other users' facts straight into facts_fact by binary COPY."""

from django.db import transaction

from core.db import copy_insert
from facts.models import Fact
from facts.services.bulk import IMPORT_FIELDS


def imported_fact(*, tenant, user_id: str, content: str, vector, model: str, now) -> Fact:
    """An active fact as an import stores it, with the given vector of `model`."""
    fact = Fact(
        tenant=tenant,
        user_id=user_id,
        content=content,
        embedding=vector,
        embedding_model=model,
        status=Fact.Status.ACTIVE,
        source=Fact.Source.IMPORT,
        valid_from=now,
        created_at=now,
        updated_at=now,
    )
    fact.refresh_search_text()  # COPY skips save()
    return fact


def copy_facts(facts: list[Fact]) -> None:
    """The facts in one transaction (the search tables' triggers run once for the statement)."""
    with transaction.atomic():
        copy_insert(Fact, facts, IMPORT_FIELDS)
