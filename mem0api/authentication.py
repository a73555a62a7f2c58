"""Mem0's clients send `Authorization: Token <key>`; ours send `Bearer <key>`. Either names one of our tenant API
keys, looked up and throttled exactly as for the rest of the API (tenancy.authentication)."""

from tenancy.authentication import ApiKeyAuthentication


class Mem0KeyAuthentication(ApiKeyAuthentication):
    """`Authorization: Token <key>` (what mem0ai's MemoryClient sends) or `Bearer <key>`."""

    keyword = "Token"
    keywords = ("token", "bearer")

    def authenticate_header(self, request):
        return 'Token realm="mem0"'
