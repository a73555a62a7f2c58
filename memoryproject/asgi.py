"""The ASGI application (gunicorn's uvicorn worker): /mcp goes straight to the MCP server's ASGI app, whose session
manager runs in the lifespan; everything else to Django. (Under WSGI the same MCP app is reached through the Django
view at /mcp: agents.mcp.)"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")

django_application = get_asgi_application()

from agents.mcp import PATH as MCP_PATH  # noqa: E402  (after Django is set up: it loads models)
from agents.mcp import mcp_asgi_app  # noqa: E402


async def application(scope, receive, send):
    if scope["type"] == "lifespan":  # Django serves no lifespan; the MCP session manager needs one
        await mcp_asgi_app(scope, receive, send)
    elif scope["type"] == "http" and scope["path"] == MCP_PATH:
        await mcp_asgi_app(scope, receive, send)
    else:
        await django_application(scope, receive, send)
