from django.apps import AppConfig


class KbConfig(AppConfig):
    name = "kb"
    verbose_name = "Knowledge base"

    def ready(self):
        # Imported here: selectors import models, which must wait until the app registry is ready.
        from memoryproject.context import register_document_source

        from .selectors import kb_search

        register_document_source(kb_search)  # context_build's "relevant documents" section
