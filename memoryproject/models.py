from django.db import models


class WorkerHeartbeat(models.Model):
    """The last time a django-q worker of a cluster ran the heartbeat schedule: proof that the scheduler and a
    worker are both alive. A table rather than the cache, which may evict it (the database cache culls a third of
    its rows past MAX_ENTRIES; Redis under maxmemory)."""

    cluster = models.CharField(max_length=100, unique=True)  # Q_CLUSTER["name"]
    beat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.cluster} at {self.beat_at:%Y-%m-%d %H:%M:%S}"
