from django.db import migrations


class Migration(migrations.Migration):
    """Leave room on each page so usage-count updates are HOT (no index writes): see facts_record_usage."""

    dependencies = [
        ("facts", "0002_fact_reviewed_at"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE facts_fact SET (fillfactor = 70)",
            reverse_sql="ALTER TABLE facts_fact RESET (fillfactor)",
        ),
    ]
