# The moved tables take this app's names, and their content types follow them, so staff permissions and admin log
# lines about forget policies and runs stay attached.

from django.db import migrations

MODELS = ["forgetpolicy", "forgetrun"]


def move_content_types(from_app: str, to_app: str):
    def move(apps, schema_editor):
        content_type = apps.get_model("contenttypes", "ContentType")
        taken = set(content_type.objects.filter(app_label=to_app, model__in=MODELS).values_list("model", flat=True))
        content_type.objects.filter(app_label=from_app, model__in=[m for m in MODELS if m not in taken]).update(
            app_label=to_app
        )

    return move


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("forgetting", "0001_initial"),
        ("facts", "0008_forgetting_moves_out"),  # unapplied first when migrating back, so the names match again
    ]

    operations = [
        migrations.AlterModelTable(name="forgetpolicy", table=None),
        migrations.AlterModelTable(name="forgetrun", table=None),
        migrations.RunPython(move_content_types("facts", "forgetting"), move_content_types("forgetting", "facts")),
    ]
