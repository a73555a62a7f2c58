from django.apps import AppConfig


class MemoryProjectConfig(AppConfig):
    """Project-wide management commands (serve, ...) live in this app."""

    name = "memoryproject"
    verbose_name = "memoryproject"
