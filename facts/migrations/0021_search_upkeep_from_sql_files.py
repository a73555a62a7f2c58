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
    """The file's definitions; a database that had no triggers yet (made by the migrations since they left them to
    this one) gets its search tables made afresh from the facts."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM pg_trigger WHERE tgname = 'facts_search_entry_inserted')")
        [had_triggers] = cursor.fetchone()
        cursor.execute(sql_file("core/sql/locks.sql") + sql_file("facts/sql/search_upkeep.sql"))
        if not had_triggers:
            cursor.execute("SELECT facts_search_rebuild()")


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
