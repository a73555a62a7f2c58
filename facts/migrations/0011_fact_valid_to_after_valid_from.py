from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("facts", "0010_fix_validity_intervals"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="fact",
            constraint=models.CheckConstraint(
                condition=models.Q(("valid_to__isnull", True), ("valid_to__gte", models.F("valid_from")), _connector="OR"),
                name="fact_valid_to_after_valid_from",
            ),
        ),
    ]
