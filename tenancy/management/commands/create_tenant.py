from django.core.management.base import BaseCommand, CommandError

from core.errors import ApplicationError
from tenancy.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant and print its first API key (shown once, never stored in clear)."

    def add_arguments(self, parser):
        parser.add_argument("name", help="Unique tenant name, e.g. 'acme'.")

    def handle(self, *args, name: str, **options):
        if not name.strip():
            raise CommandError("The tenant name must not be empty.")
        try:
            tenant, issued = tenant_create(name=name)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Created tenant {tenant.name!r} (id {tenant.pk}).")
        self.stdout.write("API key (copy it now, it is not shown again):")
        self.stdout.write(issued.key)
