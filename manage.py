#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
    from django.core.management import execute_from_command_line

    from memoryproject.embedded_postgres.server import EmbeddedPostgresError

    try:
        execute_from_command_line(sys.argv)
    except EmbeddedPostgresError as exc:
        # One line naming the cause; a stack trace would bury it.
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
