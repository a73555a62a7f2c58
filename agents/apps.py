from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """What agents plug in with: tool definitions, tool calls and the MCP server built on them."""

    name = "agents"
    verbose_name = "Agent tools"
