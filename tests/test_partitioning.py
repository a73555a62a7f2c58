"""How ready the schema is to be distributed by tenant (Citus) or hash-partitioned by tenant_id, and a guard that
keeps it so: a new unique constraint, index or tenant table that the plan cannot take fails here, by name.

The plan (docs/deploy.md, "Write scaling"): every table that holds a tenant's data carries tenant_id and is
distributed (or partitioned) by it; a unique constraint or index of a partitioned table must contain the partition
key; foreign keys between distributed tables must include tenant_id to stay on one node. What does not fit today is
listed below with what would change, so the list is the migration's work and nothing new joins it unseen.
"""

import pytest
from django.apps import apps
from django.db import models

# Tables without tenant_id: the framework's and the global ones (reference tables under Citus).
GLOBAL_MODELS = {
    "auth.Permission", "auth.Group", "auth.Group_permissions", "auth.User", "auth.User_groups",
    "auth.User_user_permissions", "contenttypes.ContentType", "sessions.Session", "admin.LogEntry",
    "django_q.Schedule", "django_q.Task", "django_q.Success", "django_q.Failure", "django_q.OrmQ",
    "tenancy.Tenant", "memoryproject.WorkerHeartbeat",  # one row per worker cluster: operations, no tenant's data
}  # fmt: skip
# Unique constraints without tenant_id, and what the plan does with each.
UNIQUE_WITHOUT_TENANT = {
    ("tenancy.ApiKey", ("key_hash",)): "a key is looked up before its tenant is known: ApiKey stays a reference table",
    ("kb.KBChunk", ("document", "ordinal")): "becomes (tenant, document, ordinal)",
    ("episodes.EpisodeMessage", ("episode", "position")): "becomes (tenant, episode, position)",
}
# Indexes that do not start with tenant_id: per-chunk vector and text indexes, searched within a tenant's rows
# (a partitioned index per partition keeps them per tenant), and the single-column foreign key indexes below.
INDEXES_WITHOUT_TENANT_FIRST = {
    ("kb.KBChunk", "kbchunk_embedding_hnsw"): "per partition",
    ("kb.KBChunk", "kbchunk_search_vector_gin"): "per partition",
    # The embedding sweep's due facts across tenants, by next attempt: partial (the few awaiting a vector).
    ("facts.Fact", "fact_embedding_pending"): "per partition (the sweep then asks each partition)",
    # The user's keyword matches: its entries carry the tenant and user in a scope lexeme of their own.
    ("facts.FactSearchEntry", "factsearch_keywords"): "per partition",
    # Large users' nearest entries: the walk filters by tenant and user as it goes (iterative scan).
    ("facts.FactSearchEntry", "factsearch_embedding_hnsw"): "per partition",
    # Filters on metadata: a GIN index (jsonb_path_ops) holds no tenant; the search ANDs it with the user's rows.
    ("facts.Fact", "fact_metadata"): "per partition",
}
# Foreign keys between tenant tables on the id alone: each becomes (tenant_id, id), with the primary keys.
FOREIGN_KEYS_TO_WIDEN = {
    ("facts.Fact", "source_episode"), ("facts.Fact", "superseded_by"), ("facts.FactConflict", "existing_fact"),
    ("facts.FactConflict", "new_fact"), ("kb.KBChunk", "document"), ("kb.DocumentIndexing", "document"),
    ("episodes.EpisodeMessage", "episode"),
    ("facts.FactSearchEntry", "fact"),  # no constraint in the database (triggers keep it), but a link all the same
}  # fmt: skip


def tenant_models() -> list[type[models.Model]]:
    return [model for model in apps.get_models(include_auto_created=True) if model._meta.label not in GLOBAL_MODELS]


def test_every_table_outside_the_framework_and_the_global_ones_carries_tenant_id():
    without = [model._meta.label for model in tenant_models() if "tenant" not in _field_names(model)]

    assert without == [], "a new table: give it a tenant FK, or list it in GLOBAL_MODELS saying why"


@pytest.mark.parametrize("model", tenant_models(), ids=lambda model: model._meta.label)
def test_unique_constraints_contain_the_tenant(model):
    for fields in _unique_field_sets(model):
        if "tenant" not in fields:
            assert (model._meta.label, fields) in UNIQUE_WITHOUT_TENANT, (
                f"{model._meta.label} unique on {fields} without tenant: a partitioned table cannot enforce it"
            )


@pytest.mark.parametrize("model", tenant_models(), ids=lambda model: model._meta.label)
def test_indexes_start_with_the_tenant(model):
    for index in model._meta.indexes:
        if index.fields and index.fields[0] != "tenant":
            assert (model._meta.label, index.name) in INDEXES_WITHOUT_TENANT_FIRST, (
                f"{model._meta.label}.{index.name} does not start with tenant: put tenant first, or say why not"
            )


@pytest.mark.parametrize("model", tenant_models(), ids=lambda model: model._meta.label)
def test_foreign_keys_between_tenant_tables_are_the_known_ones(model):
    tenant_labels = {other._meta.label for other in tenant_models()}
    for field in model._meta.local_fields:
        if field.is_relation and field.name != "tenant" and field.related_model._meta.label in tenant_labels:
            assert (model._meta.label, field.name) in FOREIGN_KEYS_TO_WIDEN, (
                f"{model._meta.label}.{field.name}: a new link between tenant tables; add it to the plan"
            )


def test_the_lists_name_only_what_still_exists():
    """When the schema changes so that an entry fits the plan, the entry goes: the lists are the work left."""
    labels = {model._meta.label: model for model in tenant_models()}
    for label, fields in UNIQUE_WITHOUT_TENANT:
        assert fields in _unique_field_sets(labels[label]), (label, fields)
    for label, name in INDEXES_WITHOUT_TENANT_FIRST:
        assert name in {index.name for index in labels[label]._meta.indexes}, (label, name)
    for label, name in FOREIGN_KEYS_TO_WIDEN:
        assert labels[label]._meta.get_field(name).is_relation, (label, name)


def _field_names(model) -> set[str]:
    return {field.name for field in model._meta.get_fields()}


def _unique_field_sets(model) -> list[tuple[str, ...]]:
    sets = [tuple(c.fields) for c in model._meta.constraints if isinstance(c, models.UniqueConstraint) and c.fields]
    sets += [tuple(fields) for fields in model._meta.unique_together]
    sets += [(field.name,) for field in model._meta.local_fields if field.unique and not field.primary_key]
    return sets
