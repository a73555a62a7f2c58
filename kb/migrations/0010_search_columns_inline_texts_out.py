from django.db import migrations


class Migration(migrations.Migration):
    """What the search reads of every chunk a query term finds, its vector and its tsvector, stays inline and
    uncompressed (STORAGE MAIN: moved out only past a page); the texts, read for the few chunks returned, go to
    TOAST past 4,000 bytes a row. So two rows fit a page instead of one: bench/kb.py's million chunks took 8.4 GB of
    heap, 4.0 GB so (kb_search p95 197-243 -> 162-172 ms with 2 GB of shared buffers, 119-152 -> 86-95 with 6 GB).
    A search reading a vector or a tsvector from TOAST is 2-3x slower (0005), and pglz's decompression costs too:
    the README's longest chunks hold 2.8 kB of vector and tsvector on average, 3.1 at most, so with their other
    columns they stay under 4,000 bytes uncompressed. Catalog only: rows written before keep their layout until
    rewritten (VACUUM FULL kb_kbchunk)."""

    dependencies = [
        ("kb", "0009_search_vector_without_pending_list"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE kb_kbchunk SET (toast_tuple_target = 4000);"
            " ALTER TABLE kb_kbchunk ALTER COLUMN embedding SET STORAGE MAIN,"
            " ALTER COLUMN search_vector SET STORAGE MAIN;",
            reverse_sql="ALTER TABLE kb_kbchunk SET (toast_tuple_target = 8160);"
            " ALTER TABLE kb_kbchunk ALTER COLUMN embedding SET STORAGE EXTERNAL,"
            " ALTER COLUMN search_vector SET STORAGE EXTENDED;",
        ),
    ]
