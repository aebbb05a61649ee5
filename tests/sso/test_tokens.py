"""The id token checks: mozilla-django-oidc's `verify_token` (key, signature, algorithm,
expiry, nonce) with the hooks SSOBackend adds (issuer, audience, required claims, a key
per algorithm, a JWKS read at every sign-in). Tokens are signed here with real keys; the
JWKS is served over HTTP by a server on a thread of the test process."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.exceptions import SuspiciousOperation

from awaken_site.sso import SSOBackend

ISSUER = "https://id.example.test"
CLIENT = "awaken-test"
NONCE = "n-0S6_WzA2Mj"


class Jwks:
    """The keys a provider publishes; `keys` may change between sign-ins (rotation)."""

    def __init__(self) -> None:
        self.keys: list[dict[str, Any]] = []
        self.reads = 0


@pytest.fixture
def jwks() -> Iterator[tuple[Jwks, str]]:
    published = Jwks()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            published.reads += 1
            body = json.dumps({"keys": published.keys}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield published, f"http://127.0.0.1:{server.server_port}/jwks"
    finally:
        server.shutdown()
        server.server_close()


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _public_jwk(key: rsa.RSAPrivateKey, kid: str | None, alg: str | None) -> dict[str, Any]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk["use"] = "sig"
    if kid is not None:
        jwk["kid"] = kid
    if alg is not None:
        jwk["alg"] = alg
    return jwk


def _claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "sub": "alice",
        "aud": CLIENT,
        "iat": now,
        "exp": now + 300,
        "nonce": NONCE,
    }
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _token(key: Any, claims: dict[str, Any], kid: str | None = "k1", alg: str = "RS256") -> str:
    headers = {} if kid is None else {"kid": kid}
    return jwt.encode(claims, key, algorithm=alg, headers=headers)


def _backend(jwks_url: str, alg: str = "RS256") -> SSOBackend:
    backend = SSOBackend()
    backend.OIDC_RP_CLIENT_ID = CLIENT
    backend.OIDC_RP_CLIENT_SECRET = "s3cret-of-at-least-32-bytes-for-hmac!"
    backend.OIDC_OP_JWKS_ENDPOINT = jwks_url
    backend.OIDC_RP_SIGN_ALGO = alg
    backend.issuer = ISSUER
    return backend


def test_a_good_token_is_accepted(jwks):
    published, url = jwks
    key = _key()
    published.keys = [_public_jwk(key, "k1", "RS256")]
    payload = _backend(url).verify_token(_token(key, _claims()), nonce=NONCE)
    assert (payload["sub"], payload["aud"]) == ("alice", CLIENT)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"iss": "https://elsewhere.example.test"}, "issued by"),
        ({"aud": "another-client"}, "another client"),
        ({"aud": [CLIENT, "another-client"]}, "another party"),
        ({"aud": [CLIENT, "other"], "azp": "other"}, "another party"),
        ({"iat": None}, "no iat claim"),
        ({"sub": None}, "no sub claim"),
        ({"exp": None}, "no exp claim"),
    ],
)
def test_claims_the_library_does_not_check_are_checked(jwks, changes, reason):
    published, url = jwks
    key = _key()
    published.keys = [_public_jwk(key, "k1", "RS256")]
    with pytest.raises(SuspiciousOperation, match=reason):
        _backend(url).verify_token(_token(key, _claims(**changes)), nonce=NONCE)


def test_several_audiences_with_this_client_as_the_authorized_party_pass(jwks):
    published, url = jwks
    key = _key()
    published.keys = [_public_jwk(key, "k1", "RS256")]
    claims = _claims(aud=[CLIENT, "other"], azp=CLIENT)
    assert _backend(url).verify_token(_token(key, claims), nonce=NONCE)["azp"] == CLIENT


def test_expired_forged_or_replayed_tokens_are_refused(jwks):
    published, url = jwks
    key = _key()
    published.keys = [_public_jwk(key, "k1", "RS256")]
    backend = _backend(url)
    expired = _token(key, _claims(iat=int(time.time()) - 600, exp=int(time.time()) - 60))
    with pytest.raises(SuspiciousOperation, match="rejected"):
        backend.verify_token(expired, nonce=NONCE)
    with pytest.raises(SuspiciousOperation):  # signed by a key the provider does not publish
        backend.verify_token(_token(_key(), _claims()), nonce=NONCE)
    with pytest.raises(SuspiciousOperation, match="Nonce"):
        backend.verify_token(_token(key, _claims()), nonce="another-sign-in")


def test_a_token_signed_with_another_algorithm_than_the_required_one_is_refused(jwks):
    published, url = jwks
    published.keys = [_public_jwk(_key(), "k1", "RS256")]
    backend = _backend(url)
    # HS256 with the client secret while RS256 is required: the secret is no key here
    hmac = _token(backend.OIDC_RP_CLIENT_SECRET, _claims(), kid=None, alg="HS256")
    with pytest.raises(SuspiciousOperation):
        backend.verify_token(hmac, nonce=NONCE)


def test_hmac_tokens_are_verified_with_the_client_secret_when_required(jwks):
    _, url = jwks
    backend = _backend(url, alg="HS256")
    good = _token(backend.OIDC_RP_CLIENT_SECRET, _claims(), kid=None, alg="HS256")
    assert backend.verify_token(good, nonce=NONCE)["sub"] == "alice"
    with pytest.raises(SuspiciousOperation):
        backend.verify_token(_token("x" * 40, _claims(), kid=None, alg="HS256"), nonce=NONCE)


def test_a_key_without_alg_verifies_the_algorithm_the_provider_requires(jwks):
    """RS384 with a JWKS entry that names no algorithm and a token without kid."""
    published, url = jwks
    key = _key()
    published.keys = [_public_jwk(key, kid=None, alg=None)]
    token = _token(key, _claims(), kid=None, alg="RS384")
    assert _backend(url, alg="RS384").verify_token(token, nonce=NONCE)["sub"] == "alice"


def test_a_rotated_key_is_found_at_the_next_sign_in(jwks):
    published, url = jwks
    old, new = _key(), _key()
    backend = _backend(url)
    published.keys = [_public_jwk(old, "k1", "RS256")]
    assert backend.verify_token(_token(old, _claims(), kid="k1"), nonce=NONCE)
    published.keys = [_public_jwk(new, "k2", "RS256")]  # the provider rotated
    assert backend.verify_token(_token(new, _claims(), kid="k2"), nonce=NONCE)
    with pytest.raises(SuspiciousOperation, match="no single signing key"):
        backend.verify_token(_token(old, _claims(), kid="k1"), nonce=NONCE)
    assert published.reads == 3
