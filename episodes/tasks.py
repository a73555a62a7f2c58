"""django-q tasks of the episodes app: they take ids and call one service."""

from . import extraction


def episode_extract(episode_id: int) -> str:
    """Extract facts from an episode's new messages, then refresh its summary and embedding (see the service)."""
    return str(extraction.episode_extract(episode_id=episode_id))  # kept as the django-q result
