"""Fill KBChunk.search_text (added in 0002) for chunks indexed before it, so keyword search finds them."""

from django.db import migrations

from core.text import search_text

BATCH = 1000


def fill(apps, schema_editor):
    KBChunk = apps.get_model("kb", "KBChunk")
    chunks = KBChunk.objects.filter(search_text="").select_related("document").order_by("pk")
    batch = []
    for chunk in chunks.iterator(chunk_size=BATCH):
        label = chunk.document.title or chunk.document.doc_id  # as kb.models.document_label
        chunk.search_text = search_text(f"{label} {chunk.heading_path} {chunk.text}")
        batch.append(chunk)
        if len(batch) >= BATCH:
            KBChunk.objects.bulk_update(batch, ["search_text"])
            batch = []
    KBChunk.objects.bulk_update(batch, ["search_text"])


class Migration(migrations.Migration):
    dependencies = [
        ("kb", "0002_search_vector"),
    ]

    operations = [
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
