"""Startup check: the vector columns must have the size EMBEDDING_DIMENSIONS says."""

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Tags, register
from django.db import DatabaseError, connection
from pgvector.django import HalfVectorField, VectorField


def vector_columns() -> list[tuple[type, str]]:
    """Every (model, field name) holding an embedding, across all apps."""
    return _fields_of_type(VectorField)


def vector_copies() -> list[tuple[type, str]]:
    """Every (model, field name) holding a half-precision copy of an embedding (facts' search entries), which the
    database writes from its source row: resized with the sources, never embedded itself."""
    return _fields_of_type(HalfVectorField)


def _fields_of_type(field_type: type) -> list[tuple[type, str]]:
    return [
        (model, field.name)
        for model in apps.get_models()
        for field in model._meta.get_fields()
        if isinstance(field, field_type)
    ]


def vector_column_sizes() -> dict[str, int]:
    """{"table.column": dimensions} as the database has them (tables not migrated yet are left out)."""
    sizes = {}
    with connection.cursor() as cursor:
        for model, field_name in vector_columns() + vector_copies():
            column = model._meta.get_field(field_name).column
            cursor.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = %s",
                [model._meta.db_table, column],
            )
            row = cursor.fetchone()
            if row:
                sizes[f"{model._meta.db_table}.{column}"] = row[0]
    return sizes


def embedding_dimension_problems() -> list[str]:
    try:
        sizes = vector_column_sizes()
    except DatabaseError:
        return []  # no database yet: nothing to compare
    return [
        f"{column} holds vector({size}) but EMBEDDING_DIMENSIONS is {settings.EMBEDDING_DIMENSIONS}"
        for column, size in sizes.items()
        if size != settings.EMBEDDING_DIMENSIONS
    ]


@register(Tags.database)
def check_embedding_dimensions(app_configs=None, databases=None, **kwargs):
    if not databases:
        return []
    return [
        Error(
            problem,
            hint="Run `manage.py reembed` to resize the vector columns and re-embed every row.",
            id="memoryproject.E001",
        )
        for problem in embedding_dimension_problems()
    ]
