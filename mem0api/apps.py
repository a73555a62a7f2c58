from django.apps import AppConfig


class Mem0ApiConfig(AppConfig):
    """A Mem0-compatible API under /mem0/, so that mem0ai's MemoryClient works unchanged (a Mem0 memory is a fact)."""

    name = "mem0api"
    verbose_name = "Mem0-compatible API"
