from django.contrib.postgres.indexes import GinIndex
from django.db import migrations


class Migration(migrations.Migration):

    # The search entries' GIN index without a pending list (FactSearchEntry.Meta): set in place, and what is pending
    # merged now, rather than the index rebuilt.
    dependencies = [
        ('facts', '0015_search_counts'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER INDEX factsearch_keywords SET (fastupdate = off);"
                    " SELECT gin_clean_pending_list('factsearch_keywords'::regclass);",
                    "ALTER INDEX factsearch_keywords RESET (fastupdate);",
                ),
            ],
            state_operations=[
                migrations.RemoveIndex(model_name='factsearchentry', name='factsearch_keywords'),
                migrations.AddIndex(
                    model_name='factsearchentry',
                    index=GinIndex(fastupdate=False, fields=['keywords'], name='factsearch_keywords'),
                ),
            ],
        ),
    ]
