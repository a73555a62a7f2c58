from django.db import migrations, models


class Migration(migrations.Migration):
    """Why a run extracted offline instead of with the chat model (empty when it did not fall back)."""

    dependencies = [
        ("episodes", "0010_remove_episode_search_text"),
    ]

    operations = [
        migrations.AddField(
            model_name="episode",
            name="extraction_fallback_reason",
            field=models.TextField(blank=True),
        ),
    ]
