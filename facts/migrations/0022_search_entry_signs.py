from django.contrib.postgres.indexes import GinIndex
from django.db import migrations, models
from pgvector.django import HnswIndex

import core.db
from core.sql_files import sql_file


def tables_rebuild(apps, schema_editor) -> None:
    """The file's definitions, which write the signs with every entry, and the search tables made afresh from the
    facts (facts_search_rebuild): the entries with their signs, and a database whose triggers were missing before
    0021 with its counts and terms. Run while the entries have no index but their primary key: each is built
    once afterwards, not row by row."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(sql_file("facts/sql/search_upkeep.sql"))
        cursor.execute("SELECT facts_search_rebuild()")


# What the file writes of the signs: taken out again on the way back to 0021, whose schema has no signs.
SIGNS_WRITTEN = (" signs,", "\n        binary_quantize(f.embedding::halfvec)::varbit,")


def triggers_without_signs(apps, schema_editor) -> None:
    definitions = sql_file("facts/sql/search_upkeep.sql")
    for text in SIGNS_WRITTEN:
        if text not in definitions:
            raise RuntimeError(f"facts/sql/search_upkeep.sql no longer writes the signs as {text!r}: update 0022")
        definitions = definitions.replace(text, "")
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(definitions)


class Migration(migrations.Migration):
    """FactSearchEntry.signs, and the (tenant, user, status) index covering them: a large user that is a small share
    of the table gets its nearest entries from a shortlist by their signs (search.nearest)."""

    dependencies = [
        ("facts", "0021_search_upkeep_from_sql_files"),
        ("tenancy", "0003_apikey_scopes"),
    ]

    operations = [
        *(
            migrations.RemoveIndex(model_name="factsearchentry", name=name)
            for name in ("factsearch_tenant_user_status", "factsearch_keywords", "factsearch_embedding_hnsw")
        ),
        migrations.AddField(
            model_name="factsearchentry",
            name="signs",
            field=core.db.BitStringField(null=True),
        ),
        migrations.RunPython(tables_rebuild, triggers_without_signs),
        migrations.AddIndex(
            model_name="factsearchentry",
            index=models.Index(
                fields=["tenant", "user_id", "status"],
                include=("vector_model", "awaiting_vector", "category", "agent_id", "fact", "signs"),
                name="factsearch_tenant_user_status",
            ),
        ),
        migrations.AddIndex(
            model_name="factsearchentry",
            index=GinIndex(fields=["keywords"], name="factsearch_keywords", fastupdate=False),
        ),
        migrations.AddIndex(
            model_name="factsearchentry",
            index=HnswIndex(
                fields=["embedding"],
                name="factsearch_embedding_hnsw",
                opclasses=["halfvec_cosine_ops"],
                m=16,
                ef_construction=64,
            ),
        ),
    ]
