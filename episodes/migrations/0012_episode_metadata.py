from django.db import migrations, models


class Migration(migrations.Migration):
    """The caller's metadata on an episode, carried by every fact extracted from it."""

    dependencies = [
        ("episodes", "0011_extraction_fallback_reason"),
    ]

    operations = [
        migrations.AddField(
            model_name="episode",
            name="metadata",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
