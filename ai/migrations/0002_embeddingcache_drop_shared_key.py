from django.db import migrations


class Migration(migrations.Migration):
    """The cache's key was (model, text hash), shared by every tenant; it becomes per owner in 0004."""

    dependencies = [
        ("ai", "0001_initial"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="embeddingcache", name="embeddingcache_unique_text"),
    ]
