"""The keyword text goes: the tsvector is kept by the posts now (0009). The way back writes it again from the
message rows, so the generated tsvector of the older schema is whole."""

from django.db import migrations

from core.text import search_text


def refill(apps, schema_editor):
    Episode = apps.get_model("episodes", "Episode")
    EpisodeMessage = apps.get_model("episodes", "EpisodeMessage")
    for episode in Episode.objects.only("pk", "last_message_at").iterator(chunk_size=500):
        rows = EpisodeMessage.objects.filter(episode_id=episode.pk).order_by("position")
        messages = list(rows.values_list("content", "timestamp"))
        days = {moment.date() for _, moment in messages if moment} | (
            {episode.last_message_at.date()} if episode.last_message_at else set()
        )
        text = search_text("\n".join(content for content, _ in messages), dates=tuple(sorted(days)[:20]))
        Episode.objects.filter(pk=episode.pk).update(search_text=text)


class Migration(migrations.Migration):
    dependencies = [
        ("episodes", "0009_search_vector_kept_by_posts"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, refill),
        migrations.RemoveField(model_name="episode", name="search_text"),
    ]
