from django.db import migrations

from core.sql_files import sql_file

DROP = """
DROP TRIGGER IF EXISTS kb_term_frequency_inserted ON kb_kbchunk;
DROP TRIGGER IF EXISTS kb_term_frequency_updated ON kb_kbchunk;
DROP TRIGGER IF EXISTS kb_term_frequency_deleted ON kb_kbchunk;
"""


def triggers_load(apps, schema_editor) -> None:
    """The file's definitions; a database that had no triggers yet (made by the migrations since they left them to
    this one) gets its counts made afresh from the chunks."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM pg_trigger WHERE tgname = 'kb_term_frequency_inserted')")
        [had_triggers] = cursor.fetchone()
        cursor.execute(sql_file("kb/sql/term_frequency.sql"))
        if not had_triggers:
            cursor.execute("SELECT kb_term_frequency_rebuild()")


def triggers_drop(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(DROP)


class Migration(migrations.Migration):
    """The term counts' triggers, as kb/sql/term_frequency.sql defines them. A later change to the file is applied by
    a migration that loads it again."""

    dependencies = [
        ("kb", "0011_indexing_raw_upload"),
    ]

    operations = [
        migrations.RunPython(triggers_load, triggers_drop),
    ]
