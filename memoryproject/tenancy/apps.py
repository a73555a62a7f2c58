from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "memoryproject.tenancy"
    label = "tenancy"
    verbose_name = "Tenants and API keys"
