from argparse import Namespace

import anyio
from django.core.management.base import BaseCommand, CommandError

from agents.mcp_stdio import add_arguments, bridge_from, serve


def _refuse(message: str):
    raise CommandError(message)


class Command(BaseCommand):
    help = (
        "Serve the agent tools of a running memoryproject as an MCP server over stdio, for desktop agents that launch "
        "their MCP servers as commands (the same as the memoryproject-mcp console script)."
    )
    requires_system_checks = []  # a client of the server: no database, and nothing but MCP on stdout

    def add_arguments(self, parser):
        add_arguments(parser)

    def handle(self, *args, **options):
        anyio.run(serve, bridge_from(Namespace(**options), _refuse))
