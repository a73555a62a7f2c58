"""django-q's cluster, made to stop within its timeout on SIGTERM, with the task in hand finished or queued again.

django-q2 1.11 stops by putting one "STOP" per worker behind the tasks its pusher had already taken off the broker
(up to workers^2 of them): every worker runs those first, so a SIGTERM waited for several whole tasks (27 s for
a task in hand and one 15 s task taken ahead). Here a worker that sees the cluster stopping puts a task it has not
started back on the broker instead; the one in hand still ends by its timeout (django-q's SIGALRM)."""

import logging
import multiprocessing

from django_q import cluster as django_q_cluster
from django_q.brokers import get_broker
from django_q.signing import SignedPackage
from django_q.worker import worker as django_q_worker

logger = logging.getLogger(__name__)

# Created before the sentinel forks, so that the sentinel's workers (forks of it) see it set.
_stopping = multiprocessing.get_context("fork").Event()
_broker = None


class Cluster(django_q_cluster.Cluster):
    def start(self) -> int:
        django_q_cluster.worker = worker  # Sentinel.spawn_worker starts (and supervises) what this name holds
        return super().start()

    def sig_handler(self, signum, frame):
        _stopping.set()
        super().sig_handler(signum, frame)


def worker(task_queue, result_queue, timer, timeout=None):
    """django-q's worker, reading its tasks through a queue that hands back what arrives once stopping."""
    django_q_worker(_UntilStopping(task_queue), result_queue, timer, timeout)


class _UntilStopping:
    def __init__(self, queue):
        self._queue = queue

    def get(self):
        while True:
            task = self._queue.get()
            if task == "STOP" or not _stopping.is_set():
                return task
            task_requeue(task)


def task_requeue(task: dict) -> None:
    """Put a task the pusher took off the broker back on it, unstarted. Queued again before its old entry goes
    (the ORM broker's row; Redis already popped it), so a crash in between runs it twice rather than never."""
    global _broker
    _broker = _broker or get_broker()
    ack_id = task.pop("ack_id", None)
    _broker.enqueue(SignedPackage.dumps(task))
    if ack_id is not None:
        _broker.acknowledge(ack_id)
    logger.info("stopping: task %s queued again, not started", task.get("name"))
