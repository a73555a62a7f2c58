from django.db import migrations

from core.sql_files import sql_file


def definitions_loaded(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(sql_file("facts/sql/search_upkeep.sql"))


class Migration(migrations.Migration):
    """facts/sql/search_upkeep.sql loaded again: the update trigger finds the facts whose copied columns changed once,
    instead of comparing them in each of its three statements. The schema is 0023's; going back keeps these
    definitions, which write 0023's entries alike."""

    dependencies = [
        ("facts", "0023_search_entries_partitioned_by_user"),
    ]

    operations = [
        migrations.RunPython(definitions_loaded, migrations.RunPython.noop),
    ]
