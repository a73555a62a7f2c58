from django.apps import AppConfig


class ForgettingConfig(AppConfig):
    name = "forgetting"
    verbose_name = "Forgetting"
