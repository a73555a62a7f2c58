from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("facts", "0011_fact_valid_to_after_valid_from"),
    ]

    operations = [
        migrations.AddField(
            model_name="fact",
            name="embedding_attempts",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="fact",
            name="embedding_next_attempt_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="fact",
            name="embedding_pending",
            field=models.CharField(
                blank=True, choices=[("", "no"), ("judge", "Judge"), ("embed", "Embed")], default="", max_length=5
            ),
        ),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("embedding_pending", ""), _negated=True),
                fields=["embedding_next_attempt_at"],
                name="fact_embedding_pending",
            ),
        ),
    ]
