"""django-q tasks of the operations side (scheduled by `setup_schedules`)."""

from .services import worker_heartbeat_record


def worker_heartbeat() -> None:
    worker_heartbeat_record()
