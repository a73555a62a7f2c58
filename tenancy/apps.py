from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "tenancy"
    label = "tenancy"
    verbose_name = "Tenants and API keys"
