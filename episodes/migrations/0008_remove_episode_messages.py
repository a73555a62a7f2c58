from django.db import migrations


class Migration(migrations.Migration):
    """The JSON array of messages goes: they are EpisodeMessage rows now (0007 moved them)."""

    dependencies = [
        ("episodes", "0007_messages_to_rows"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="episode",
            name="messages",
        ),
    ]
