# ForgetPolicy and ForgetRun now belong to the forgetting app (see forgetting/migrations/0001_initial.py): they
# leave this app's state; their tables are not touched.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("facts", "0007_rows_inline"),
        ("forgetting", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ForgetPolicy"),
                migrations.DeleteModel(name="ForgetRun"),
            ],
            database_operations=[],
        ),
    ]
