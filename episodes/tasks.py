"""django-q tasks of the episodes app: they take ids and call one service."""

from datetime import timedelta

from django.conf import settings

from . import extraction, services


def episode_extract(episode_id: int) -> str:
    """Extract facts from an episode's new messages, then refresh its summary and embedding (see the service)."""
    return str(extraction.episode_extract(episode_id=episode_id))  # kept as the django-q result


def episodes_requeue() -> int:
    """Queue again extractions whose task was lost or whose retry is due, and embed summaries stored without a
    vector (the schedule "episodes-requeue" runs it every few minutes). Returns how many were queued."""
    queued = services.episodes_requeue(older_than=timedelta(minutes=settings.EPISODES_REQUEUE_AFTER_MINUTES))
    extraction.episodes_embed_summaries()
    return queued
