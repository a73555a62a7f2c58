"""Writes to the fact store, one module per concern; import them from here."""

from .bulk import (
    IMPORT_STATUSES,
    MERGED_FIELDS,
    fact_conflicts_insert,
    fact_events_insert,
    fact_merge_restored,
    facts_import,
    facts_insert_restored,
    facts_link_restored,
    merged_values,
)
from .deletion import FactsErased, fact_delete, facts_delete, facts_delete_of_user, facts_erase_user
from .edits import UPDATABLE_FIELDS, fact_restore, fact_update
from .embedding import EmbedRun, embedding_retry_delay, facts_embed_due, facts_embed_pending
from .extraction import facts_extract
from .history import SYSTEM, snapshot
from .remember import RememberResult, fact_remember
from .review import conflict_resolve, fact_approve, fact_reject, fact_supersession_undo
from .usage import facts_record_usage

__all__ = [
    "IMPORT_STATUSES",
    "MERGED_FIELDS",
    "SYSTEM",
    "UPDATABLE_FIELDS",
    "EmbedRun",
    "FactsErased",
    "RememberResult",
    "conflict_resolve",
    "fact_approve",
    "fact_conflicts_insert",
    "fact_events_insert",
    "fact_merge_restored",
    "embedding_retry_delay",
    "fact_delete",
    "fact_reject",
    "fact_remember",
    "fact_restore",
    "fact_supersession_undo",
    "fact_update",
    "facts_delete",
    "facts_delete_of_user",
    "facts_embed_due",
    "facts_embed_pending",
    "facts_erase_user",
    "facts_extract",
    "facts_import",
    "facts_insert_restored",
    "facts_link_restored",
    "facts_record_usage",
    "merged_values",
    "snapshot",
]
