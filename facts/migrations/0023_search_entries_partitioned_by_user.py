from django.db import migrations

from core.sql_files import sql_file

# Enough that a user of 10,000 facts in a table of a million is most of what its partition's graph holds, few enough
# that an empty database's partitions and their indexes cost little (docs/benchmarks.md, "Large users").
PARTITIONS = 64


def _entries_remade(apps, schema_editor, *, partitioned: bool) -> None:
    """facts_factsearchentry made again with the same columns, partitioned by (tenant_id, user_id) or not, filled
    afresh from the facts (facts_search_rebuild, the counts and terms with it) before its keys and indexes are
    built, each once."""
    if partitioned:
        layout = " PARTITION BY HASH (tenant_id, user_id)"
        partitions = "".join(
            f"CREATE TABLE facts_factsearchentry_p{remainder:02d} PARTITION OF facts_factsearchentry_new"
            f" FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {remainder});\n"
            for remainder in range(PARTITIONS)
        )
        # A primary key of a partitioned table holds the partition key.
        primary_key = "fact_id, tenant_id, user_id"
    else:
        layout, partitions, primary_key = "", "", "fact_id"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE facts_factsearchentry_new (LIKE facts_factsearchentry INCLUDING DEFAULTS"
            f" INCLUDING CONSTRAINTS){layout};\n{partitions}"
            "DROP TABLE facts_factsearchentry;\n"  # its indexes and triggers with it
            "ALTER TABLE facts_factsearchentry_new RENAME TO facts_factsearchentry;"
        )
        cursor.execute(sql_file("facts/sql/search_upkeep.sql"))
        cursor.execute("SELECT facts_search_rebuild()")
        cursor.execute(f"ALTER TABLE facts_factsearchentry ADD PRIMARY KEY ({primary_key})")
    entry = apps.get_model("facts", "FactSearchEntry")
    for index in entry._meta.indexes:
        schema_editor.add_index(entry, index)


def entries_partitioned(apps, schema_editor) -> None:
    _entries_remade(apps, schema_editor, partitioned=True)


def entries_in_one_table(apps, schema_editor) -> None:
    _entries_remade(apps, schema_editor, partitioned=False)


class Migration(migrations.Migration):
    """The search entries hash-partitioned by user (tenant_id, user_id), each partition with its own indexes: a large
    user's walk of the HNSW graph meets mostly its own entries however many other users the table holds, and every
    statement that names the user reads one partition (search.nearest). The model is unchanged: Django sees the
    parent table."""

    dependencies = [
        ("facts", "0022_search_entry_signs"),
    ]

    operations = [
        migrations.RunPython(entries_partitioned, entries_in_one_table),
    ]
