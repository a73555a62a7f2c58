"""django-q tasks of the knowledge base: they take ids and call one service."""

import logging
import os

from django.conf import settings
from django_q.conf import Conf

from . import services

logger = logging.getLogger(__name__)
_priority_lowered = False


def document_index(document_id: int) -> str:
    """Index a document's waiting text (kb.services.document_index_queued); returns what happened."""
    _lower_priority_once()
    return services.document_index_queued(document_id=document_id)


def documents_indexing_requeue() -> int:
    """Queue retries whose backoff has passed and indexings whose task was lost (the "kb-indexing-requeue" schedule)."""
    return services.documents_indexing_requeue()


def _lower_priority_once() -> None:
    """Nice the worker process (every thread: Linux keeps niceness per thread) so bulk embedding yields the cores to
    the web server. Never the web process: a synchronous queue (tests, Q_CLUSTER sync) runs tasks in it."""
    global _priority_lowered
    if _priority_lowered or Conf.SYNC or settings.KB_WORKER_NICE <= 0:
        return
    _priority_lowered = True
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # not Linux: the process's niceness is all there is
        threads = [0]
    for thread in threads:
        try:
            current = os.getpriority(os.PRIO_PROCESS, thread)
            os.setpriority(os.PRIO_PROCESS, thread, min(current + settings.KB_WORKER_NICE, 19))
        except OSError as exc:  # a thread gone meanwhile, or a platform without it
            logger.debug("could not lower the priority of thread %s: %s", thread, exc)
