from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ai.errors import AIProviderError
from ai.maintenance import embedding_columns_resize, embeddings_reembed, stale_embedding_counts
from ai.services import active_embedding_model
from core.progress import Progress
from tenancy.selectors import tenant_get_by_name


class Command(BaseCommand):
    help = (
        "Embed every fact, episode summary and KB chunk whose vector is missing or comes from another model "
        "than the active one. Resizes the vector columns first if EMBEDDING_DIMENSIONS changed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Only this tenant's rows (by name).")
        parser.add_argument("--batch", type=int, default=256, help="Rows per embedding call and transaction.")

    def handle(self, *args, tenant: str | None, batch: int, **options):
        if batch < 1:
            raise CommandError("--batch must be at least 1.")
        scope = None
        if tenant:
            scope = tenant_get_by_name(name=tenant)
            if scope is None:
                raise CommandError(f"No tenant named {tenant!r}.")
        resized = embedding_columns_resize(dimensions=settings.EMBEDDING_DIMENSIONS)
        for column in resized:
            self.stdout.write(f"Resized {column} to vector({settings.EMBEDDING_DIMENSIONS}).")
        try:
            model_name = active_embedding_model()
            total = sum(stale_embedding_counts(tenant=scope).values())
            progress = Progress(total, f"Re-embedding with {model_name}", stream=self.stderr._out)
            done = embeddings_reembed(tenant=scope, batch_size=batch, on_batch=progress.advance)
        except AIProviderError as exc:
            raise CommandError(exc.message) from None
        progress.close()
        for table, count in done.items():
            self.stdout.write(f"{table}: {count} row(s) re-embedded")
