"""Maintenance that spans every app holding vectors: resizing columns and re-embedding stale rows."""

from collections.abc import Callable

from django.db import connection, transaction

from ai.checks import vector_column_sizes, vector_columns, vector_copies
from ai.models import EmbeddingCache
from ai.services import active_embedding_model, embed_texts
from tenancy.models import Tenant


def embedding_columns_resize(*, dimensions: int) -> list[str]:
    """Give every vector column `dimensions`; the vectors it held are dropped (their rows become stale)."""
    sizes = vector_column_sizes()
    resized = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            # ALTER TABLE refuses to run while deferred foreign-key checks of this transaction are pending.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for model, field_name in vector_columns():
            column = model._meta.get_field(field_name).column
            table = model._meta.db_table
            if sizes.get(f"{table}.{column}", dimensions) == dimensions:
                continue
            if model is EmbeddingCache:
                EmbeddingCache.objects.all().delete()
            else:
                model.objects.update(**{field_name: None, "embedding_model": ""})
            _column_resize(model, field_name, dimensions)
            resized.append(f"{table}.{column}")
        # The copies' vectors went with their sources' (the database wrote them NULL too).
        for model, field_name in vector_copies():
            name = f"{model._meta.db_table}.{model._meta.get_field(field_name).column}"
            if sizes.get(name, dimensions) != dimensions:
                _column_resize(model, field_name, dimensions)
                resized.append(name)
    return resized


def _column_resize(model, field_name: str, dimensions: int) -> None:
    field = model._meta.get_field(field_name)
    quote = connection.ops.quote_name
    sized = type(field)(dimensions=dimensions).db_type(connection)  # vector(n) or halfvec(n); its indexes rebuilt
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {quote(model._meta.db_table)} ALTER COLUMN {quote(field.column)} TYPE {sized}")


def stale_embedding_counts(*, tenant: Tenant | None = None) -> dict[type, int]:
    model_name = active_embedding_model()
    return {model: _stale_rows(model, model_name, tenant).count() for model in _embedded_models()}


def embeddings_reembed(
    *, tenant: Tenant | None = None, batch_size: int = 256, on_batch: Callable[[int], None] = lambda done: None
) -> dict[str, int]:
    """Re-embed every row whose vector is missing or from another model; returns rows done per table.

    Batches are committed one by one, so an interrupted run keeps its progress and a re-run resumes.
    """
    model_name = active_embedding_model()
    done = {}
    for model in _embedded_models():
        queryset = _stale_rows(model, model_name, tenant).order_by("pk")
        done[model._meta.db_table] = 0
        while batch := list(queryset[:batch_size]):
            # No cache: the vectors land in the rows themselves (and a run may span tenants).
            vectors = embed_texts([row.embedding_text() or " " for row in batch], tenant=None, user_id=None)
            for row, vector in zip(batch, vectors, strict=True):
                row.embedding = vector if row.embedding_text() else None
                row.embedding_model = model_name
            with transaction.atomic():
                model.objects.bulk_update(batch, ["embedding", "embedding_model"])
            done[model._meta.db_table] += len(batch)
            on_batch(len(batch))
    return done


def _embedded_models() -> list[type]:
    return [model for model, _ in vector_columns() if model is not EmbeddingCache]


def _stale_rows(model, model_name: str, tenant: Tenant | None):
    queryset = model.objects.exclude(embedding_model=model_name)
    return queryset if tenant is None else queryset.filter(tenant=tenant)
