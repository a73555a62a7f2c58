from django.db import migrations


class Migration(migrations.Migration):
    """Keep whole rows inline up to a page: by default a row over ~2 kB (a 384-d vector is 1.5 kB) gets its vector
    or its tsvector moved to the TOAST table, and a scan then fetches it from there for every row (search measured
    2-3x slower)."""

    dependencies = [
        ("facts", "0006_tenant_without_own_index"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE facts_fact SET (toast_tuple_target = 8160)",
            reverse_sql="ALTER TABLE facts_fact RESET (toast_tuple_target)",
        ),
    ]
