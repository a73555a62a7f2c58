from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "tenancy"
    label = "tenancy"
    verbose_name = "Tenants and API keys"

    def ready(self):
        from . import checks  # noqa: F401 - registers the throttle-rate check
