from django.core.management.base import BaseCommand, CommandError

from tenancy.selectors import tenant_get_by_name
from tenancy.services import api_key_create


class Command(BaseCommand):
    help = "Issue another API key for an existing tenant and print it (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="The tenant's name.")
        parser.add_argument("--name", default="", help="A label to tell keys apart, e.g. 'staging agent'.")

    def handle(self, *args, tenant: str, name: str, **options):
        found = tenant_get_by_name(name=tenant)
        if found is None:
            raise CommandError(f"No tenant named {tenant!r}. Create it with: manage.py create_tenant {tenant}")
        issued = api_key_create(tenant=found, name=name)
        self.stdout.write(f"New API key for {found.name!r} (copy it now, it is not shown again):")
        self.stdout.write(issued.key)
