"""Fill the columns added in 0002 for episodes stored before them (message count, time, keyword text)."""

from django.db import migrations

from core.text import search_text


def fill(apps, schema_editor):
    Episode = apps.get_model("episodes", "Episode")
    for episode in Episode.objects.iterator(chunk_size=200):
        messages = [message for message in episode.messages if isinstance(message, dict)]
        episode.message_count = len(episode.messages)
        episode.last_message_at = episode.last_message_at or episode.updated_at
        text = "\n".join(str(message.get("content") or "") for message in messages)
        episode.search_text = search_text(text, dates=(episode.last_message_at,))
        episode.save(update_fields=["message_count", "last_message_at", "search_text"])


class Migration(migrations.Migration):
    dependencies = [
        ("episodes", "0002_search_and_watermarks"),
    ]

    operations = [
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
