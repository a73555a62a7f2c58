"""Mem0's clients send `Authorization: Token <key>`; ours send `Bearer <key>`. Either names one of our tenant API
keys, looked up and throttled exactly as tenancy.authentication does for the rest of the API."""

from rest_framework import authentication, exceptions

from core.request_context import tenant_id_set
from tenancy.authentication import ApiClient
from tenancy.selectors import api_key_find_active
from tenancy.throttling import AuthFailureThrottle

KEYWORDS = ("token", "bearer")


class Mem0KeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>` (what mem0ai's MemoryClient sends) or `Bearer <key>`; the key decides the
    tenant, nothing in the request can."""

    def authenticate(self, request):
        # An address past its failed attempts is refused before any key is looked up, a good one included.
        failures = AuthFailureThrottle()
        if not failures.allow_request(request):
            raise exceptions.Throttled(failures.wait())
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in KEYWORDS:
            return None  # no key: HasApiKey refuses it (and counts the failure)
        if len(header) != 2:
            failures.record_failure(request)
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected 'Token <key>'.")
        api_key = api_key_find_active(key=header[1])
        if api_key is None:
            failures.record_failure(request)
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        tenant_id_set(api_key.tenant_id)  # every log line of the request names its tenant from here on
        return ApiClient(api_key=api_key), api_key

    def authenticate_header(self, request):
        return 'Token realm="mem0"'
