from django.contrib.postgres.indexes import GinIndex
from django.db import migrations


class Migration(migrations.Migration):

    # The chunks' GIN index without a pending list (KBChunk.Meta): set in place, and what is pending merged now,
    # rather than the index rebuilt.
    dependencies = [
        ('kb', '0008_fill_term_frequency'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER INDEX kbchunk_search_vector_gin SET (fastupdate = off);"
                    " SELECT gin_clean_pending_list('kbchunk_search_vector_gin'::regclass);",
                    "ALTER INDEX kbchunk_search_vector_gin RESET (fastupdate);",
                ),
            ],
            state_operations=[
                migrations.RemoveIndex(model_name='kbchunk', name='kbchunk_search_vector_gin'),
                migrations.AddIndex(
                    model_name='kbchunk',
                    index=GinIndex(fastupdate=False, fields=['search_vector'], name='kbchunk_search_vector_gin'),
                ),
            ],
        ),
    ]
