"""The database cache table (what `manage.py createcachetable` makes): the API throttles count in it when REDIS_URL
is unset. Made here so that `migrate` (make run, the test database, a fresh clone) is all it takes.

UNLOGGED: no WAL, so a counter's write commits without waiting for a disk flush (a throttled request cost 13 ms
more than an unthrottled one with a logged table, on this machine); a crash empties the table, which costs a
throttle nothing."""

from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations

TABLE = "memoryproject_cache"  # settings.CACHES["default"]["LOCATION"] of the database cache


def create(apps, schema_editor):
    command = CreateCacheTable()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, TABLE, dry_run=False)  # a no-op when the table exists
    schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(TABLE)} SET UNLOGGED")


def drop(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(TABLE)}")


class Migration(migrations.Migration):
    dependencies = []

    operations = [migrations.RunPython(create, drop)]
