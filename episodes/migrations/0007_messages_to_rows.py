"""Move each episode's JSON array of messages into EpisodeMessage rows (batched), and count its characters; the way
back writes the arrays from the rows. Timestamps were stored as ISO 8601 text in UTC ("...Z")."""

from datetime import UTC, datetime

from django.db import migrations

EPISODES_PER_BATCH = 500


def _moment(value):
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return moment if moment is None or moment.tzinfo else moment.replace(tzinfo=UTC)


def to_rows(apps, schema_editor):
    Episode = apps.get_model("episodes", "Episode")
    EpisodeMessage = apps.get_model("episodes", "EpisodeMessage")
    last = 0
    while True:
        batch = list(Episode.objects.filter(pk__gt=last).order_by("pk").only("pk", "tenant_id", "messages")[:EPISODES_PER_BATCH])
        if not batch:
            return
        rows = []
        for episode in batch:
            messages = [message for message in episode.messages or [] if isinstance(message, dict)]
            rows += [
                EpisodeMessage(
                    tenant_id=episode.tenant_id,
                    episode_id=episode.pk,
                    position=position,
                    role=str(message.get("role") or "user"),
                    content=str(message.get("content") or ""),
                    timestamp=_moment(message.get("timestamp")),
                )
                for position, message in enumerate(messages)
            ]
            Episode.objects.filter(pk=episode.pk).update(
                message_count=len(messages),
                content_chars=sum(len(str(message.get("content") or "")) for message in messages),
            )
        EpisodeMessage.objects.bulk_create(rows, batch_size=2000)
        last = batch[-1].pk


def to_arrays(apps, schema_editor):
    Episode = apps.get_model("episodes", "Episode")
    EpisodeMessage = apps.get_model("episodes", "EpisodeMessage")
    last = 0
    while True:
        ids = list(Episode.objects.filter(pk__gt=last).order_by("pk").values_list("pk", flat=True)[:EPISODES_PER_BATCH])
        if not ids:
            break
        arrays = {pk: [] for pk in ids}
        rows = EpisodeMessage.objects.filter(episode_id__in=ids).order_by("episode_id", "position")
        for row in rows.iterator(chunk_size=2000):
            stamp = row.timestamp and row.timestamp.astimezone(UTC).isoformat().replace("+00:00", "Z")
            arrays[row.episode_id].append({"role": row.role, "content": row.content, "timestamp": stamp})
        for pk, messages in arrays.items():
            Episode.objects.filter(pk=pk).update(messages=messages)
        last = ids[-1]
    EpisodeMessage.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("episodes", "0006_episodemessage"),
    ]

    operations = [
        migrations.RunPython(to_rows, to_arrays),
    ]
