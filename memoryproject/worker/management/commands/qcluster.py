from django_q.management.commands import qcluster

from memoryproject.worker.cluster import Cluster


class Command(qcluster.Command):
    help = "Starts a django-q cluster that stops within its timeout on SIGTERM, queueing again what it had not started."

    def handle(self, *args, **options):
        qcluster.Cluster = Cluster  # django-q's command builds the cluster from the name in its module
        super().handle(*args, **options)
