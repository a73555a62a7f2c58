import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """Messages as rows (one insert per message, instead of rewriting a JSON array on every post), a character
    counter for the size limit, and when a failed extraction is due again."""

    dependencies = [
        ("episodes", "0005_rows_inline"),
        ("tenancy", "0002_tenant_without_own_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="episode",
            name="content_chars",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="episode",
            name="extraction_next_attempt_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="EpisodeMessage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("position", models.PositiveIntegerField()),
                (
                    "role",
                    models.CharField(
                        choices=[("user", "User"), ("assistant", "Assistant"), ("system", "System"), ("tool", "Tool")],
                        max_length=20,
                    ),
                ),
                ("content", models.TextField()),
                ("timestamp", models.DateTimeField(blank=True, null=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "episode",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="message_rows",
                        to="episodes.episode",
                    ),
                ),
                (
                    "tenant",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="tenancy.tenant",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("episode", "position"), name="episode_message_position")
                ],
            },
        ),
    ]
