from django.core.management.base import BaseCommand

from ai.services import embedding_cache_clear


class Command(BaseCommand):
    help = "Delete cached embeddings (all, or one model's)."

    def add_arguments(self, parser):
        parser.add_argument("--model", help="Only this model's vectors, e.g. all-MiniLM-L6-v2.")

    def handle(self, *args, model: str | None, **options):
        deleted = embedding_cache_clear(model=model)
        self.stdout.write(f"Deleted {deleted} cached embedding(s).")
