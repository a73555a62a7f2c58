from django.db import migrations


def empty_the_cache(apps, schema_editor):
    # Rows of the shared cache have no owner to give them (and the old key cannot hold the new rows): it is only a
    # cache, so it starts again, both ways.
    apps.get_model("ai", "EmbeddingCache").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("ai", "0002_embeddingcache_drop_shared_key"),
    ]

    operations = [
        migrations.RunPython(empty_the_cache, empty_the_cache),
    ]
