from django.apps import AppConfig


class WorkerConfig(AppConfig):
    name = "memoryproject.worker"
    label = "memoryproject_worker"
