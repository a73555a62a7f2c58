from django.apps import AppConfig


class AiConfig(AppConfig):
    name = "ai"
    label = "ai"
    verbose_name = "Embeddings and chat models"

    def ready(self):
        from . import checks  # noqa: F401 - registers the embedding-dimension check
