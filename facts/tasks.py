"""django-q tasks of the facts app: they take ids and call one service."""

from . import services


def facts_embed(fact_ids: list[int]) -> str:
    """Embed facts stored while the embedder failed, and judge those that arrived so (queued after their commit)."""
    return str(services.facts_embed_pending(fact_ids=fact_ids))  # kept as the django-q result


def facts_embed_sweep() -> str:
    """Every fact awaiting its vector whose next attempt is due (the schedule "facts-embed-sweep", every minute)."""
    return str(services.facts_embed_due())
