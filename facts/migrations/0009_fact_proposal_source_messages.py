import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("facts", "0008_forgetting_moves_out"),
    ]

    operations = [
        migrations.AddField(
            model_name="fact",
            name="proposal",
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="fact",
            name="source_messages",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.PositiveIntegerField(), blank=True, default=list, editable=False, size=None
            ),
        ),
        # A database default too, so rows written by plain SQL (benchmarks, bulk tools) need not name the column.
        migrations.RunSQL(
            "ALTER TABLE facts_fact ALTER COLUMN source_messages SET DEFAULT '{}'",
            "ALTER TABLE facts_fact ALTER COLUMN source_messages DROP DEFAULT",
        ),
        migrations.AlterField(
            model_name="factevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("created", "Created"), ("merged", "Merged"), ("superseded", "Superseded"),
                    ("conflict_opened", "Conflict Opened"), ("conflict_resolved", "Conflict Resolved"),
                    ("updated", "Updated"), ("approved", "Approved"), ("rejected", "Rejected"), ("deleted", "Deleted"),
                    ("archived", "Archived"), ("restored", "Restored"), ("purged", "Purged"),
                    ("reinstated", "Reinstated"),
                ],
                max_length=30,
            ),
        ),
        migrations.AlterField(
            model_name="factconflict",
            name="resolution",
            field=models.CharField(
                blank=True,
                choices=[("keep_new", "Keep New"), ("keep_old", "Keep Old"), ("keep_both", "Keep Both"), ("merge", "Merge")],
                max_length=20,
            ),
        ),
    ]
