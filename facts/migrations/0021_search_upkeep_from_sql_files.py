from django.db import migrations

from core.sql_files import sql_file

DROP = """
DROP TRIGGER IF EXISTS facts_search_entry_inserted ON facts_fact;
DROP TRIGGER IF EXISTS facts_search_entry_updated ON facts_fact;
DROP TRIGGER IF EXISTS facts_search_entry_deleted ON facts_fact;
DROP TRIGGER IF EXISTS facts_search_count_inserted ON facts_factsearchentry;
DROP TRIGGER IF EXISTS facts_search_count_updated ON facts_factsearchentry;
DROP TRIGGER IF EXISTS facts_search_count_deleted ON facts_factsearchentry;
DROP TRIGGER IF EXISTS facts_search_term_inserted ON facts_factsearchentry;
DROP TRIGGER IF EXISTS facts_search_term_updated ON facts_factsearchentry;
DROP TRIGGER IF EXISTS facts_search_term_deleted ON facts_factsearchentry;
"""


def triggers_load(apps, schema_editor) -> None:
    """The file's definitions, as the file stands now: their bodies are checked when they run, since they may name
    columns a later migration adds (0022 adds the signs, loads the file again and makes the search tables afresh)."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SET LOCAL check_function_bodies = off")  # until this migration's transaction ends
        cursor.execute(sql_file("core/sql/locks.sql") + sql_file("facts/sql/search_upkeep.sql"))


def triggers_drop(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(DROP)


class Migration(migrations.Migration):
    """The search tables' triggers, as facts/sql/search_upkeep.sql defines them (with core/sql/locks.sql, whose lock
    key they use). A later change to the file is applied by a migration that loads it again."""

    dependencies = [
        ("facts", "0020_fact_metadata_index"),
    ]

    operations = [
        migrations.RunPython(triggers_load, triggers_drop),
    ]
