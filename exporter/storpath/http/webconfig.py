"""`--web.config.file`: TLS, basic auth and response headers, in the exporter-toolkit format
that node_exporter and Prometheus itself read, so the file an operator already has works:

    tls_server_config:
      cert_file: /etc/storpath/tls.crt        # or cert: <PEM text>
      key_file: /etc/storpath/tls.key         # or key: <PEM text>
      client_auth_type: RequireAndVerifyClientCert   # NoClientCert (default) | VerifyClientCertIfGiven
      client_ca_file: /etc/storpath/ca.crt    # or client_ca: <PEM text>
      min_version: TLS12                      # TLS10..TLS13; max_version likewise (default TLS13)
      cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # Go's names; TLS 1.2 and below
    http_server_config:
      headers: {Strict-Transport-Security: max-age=31536000}
    basic_auth_users:
      prometheus: $2y$10$...                  # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')

The whole file is checked when it is loaded (at start and on SIGHUP): certificates and keys
are loaded into a TLS context there, so a wrong path or a key that does not match its
certificate is a clear error at start, and on reload the old file stays in force.
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import field
from typing import Any, Dict, List, Optional

from storpath.base.records import datarecord
from storpath.base import log
from storpath.base.config import ConfigError


class WebConfigError(ValueError):
    pass


# Go's crypto/tls names (what the file holds) -> OpenSSL's names (what Python's ssl takes).
# TLS 1.3 suites are not configurable in Go either; they are accepted and have no effect.
CIPHER_SUITES = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}

# The file's names -> the members of Python's ssl.TLSVersion and ssl's verify modes, by name:
# `ssl` (and OpenSSL under it) is loaded only where a file configures TLS.
VERSIONS = {"TLS10": "TLSv1", "TLS11": "TLSv1_1", "TLS12": "TLSv1_2", "TLS13": "TLSv1_3"}

# Python's ssl either verifies a client certificate against a CA or does not ask for one:
# the toolkit's RequestClientCert and RequireAnyClientCert (unverified certificates, which its
# own docs call insecure) have no equivalent and are refused with a message.
CLIENT_AUTH = {"NoClientCert": "CERT_NONE", "VerifyClientCertIfGiven": "CERT_OPTIONAL",
               "RequireAndVerifyClientCert": "CERT_REQUIRED"}

# The headers the toolkit lets a file set, with the values it accepts where it restricts them.
HEADERS: Dict[str, Optional[tuple]] = {
    "Content-Security-Policy": None,
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-Content-Type-Options": ("nosniff",),
    "X-XSS-Protection": None,
    "Strict-Transport-Security": None,
}

TLS_KEYS = {"cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file",
            "min_version", "max_version", "cipher_suites", "prefer_server_cipher_suites"}
UNSUPPORTED = {
    "client_allowed_sans": "client_allowed_sans is not supported by storpath; use a client CA that issues "
                           "only the scrapers' certificates",
    "curve_preferences": "curve_preferences is not supported by storpath (OpenSSL's defaults are used)",
    "rate_limit": "rate_limit is not supported by storpath; --web.max-requests caps concurrent scrapes",
}


@datarecord
class WebConfig:
    """A checked web config file: its path, TLS context, basic auth users and response headers."""

    path: Optional[str] = None
    ssl_context: Optional[ssl.SSLContext] = None
    users: Dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    headers: List[tuple] = field(default_factory=list)

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None


def load(path: Optional[str]) -> WebConfig:
    """Read and check a web config file; no path means plain HTTP without authentication."""
    if not path:
        return WebConfig()
    from storpath.base.configfile import load_file  # PyYAML only where a file is read

    try:
        raw = load_file(path)
    except ConfigError as exc:
        raise WebConfigError(f"--web.config.file: {exc}") from None
    try:
        return parse(raw, base=os.path.dirname(os.path.abspath(path)), path=path)
    except WebConfigError as exc:
        raise WebConfigError(f"web config file {path}: {exc}") from None


def parse(raw: Any, base: str = ".", path: Optional[str] = None) -> WebConfig:
    raw = raw or {}
    if not isinstance(raw, dict):
        raise WebConfigError("expected a mapping at the top level")
    for key in raw:
        if key in UNSUPPORTED:
            raise WebConfigError(UNSUPPORTED[key])
        if key not in ("tls_server_config", "http_server_config", "basic_auth_users"):
            raise WebConfigError(f"unknown key {log.describe(key)} (known: basic_auth_users, http_server_config, "
                                 "tls_server_config)")
    config = WebConfig(path=path)
    tls = raw.get("tls_server_config")
    if tls:
        config.ssl_context = _ssl_context(_mapping(tls, "tls_server_config"), base)
    config.users = _users(raw.get("basic_auth_users"))
    config.headers = _headers(raw.get("http_server_config"))
    return config


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise WebConfigError(f"{where}: expected a mapping")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise WebConfigError(f"{where}: expected a non-empty string, got {log.describe(value)}")
    return value


def _pem(tls: dict, inline: str, file_key: str, base: str) -> Optional[tuple]:
    """('file', path) or ('inline', text) for a PEM the config gives either way, or None."""
    if tls.get(inline) and tls.get(file_key):
        raise WebConfigError(f"tls_server_config: give either {inline} or {file_key}, not both")
    if tls.get(file_key):
        path = os.path.join(base, _string(tls[file_key], f"tls_server_config.{file_key}"))
        if not os.path.isfile(path):
            raise WebConfigError(f"tls_server_config.{file_key}: {path} does not exist")
        if not os.access(path, os.R_OK):
            raise WebConfigError(f"tls_server_config.{file_key}: {path} is not readable by this user")
        return ("file", path)
    if tls.get(inline):
        return ("inline", _string(tls[inline], f"tls_server_config.{inline}"))
    return None


def _ssl_context(tls: dict, base: str) -> ssl.SSLContext:
    import ssl  # only where TLS is configured

    for key in tls:
        if key in UNSUPPORTED:
            raise WebConfigError(UNSUPPORTED[key])
        if key not in TLS_KEYS:
            raise WebConfigError(f"unknown key tls_server_config.{key} (known: {', '.join(sorted(TLS_KEYS))})")
    cert = _pem(tls, "cert", "cert_file", base)
    key = _pem(tls, "key", "key_file", base)
    if cert is None:
        raise WebConfigError("tls_server_config: missing cert_file (or cert)")
    if key is None:
        raise WebConfigError("tls_server_config: missing key_file (or key)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = {}
    for name, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        value = tls.get(name) or default
        if value not in VERSIONS:
            raise WebConfigError(f"tls_server_config.{name}: {log.describe(value)} is not one of {', '.join(VERSIONS)}")
        versions[name] = getattr(ssl.TLSVersion, VERSIONS[value])
    if versions["min_version"] > versions["max_version"]:
        raise WebConfigError("tls_server_config: min_version is above max_version")
    try:
        context.minimum_version = versions["min_version"]
        context.maximum_version = versions["max_version"]
    except ValueError as exc:
        raise WebConfigError(f"tls_server_config: this OpenSSL refuses the version range: {exc}") from None
    suites = tls.get("cipher_suites") or []
    if not isinstance(suites, list):
        raise WebConfigError("tls_server_config.cipher_suites: expected a list of cipher suite names")
    names = []
    for suite in suites:
        if suite in CIPHER_SUITES:
            names.append(CIPHER_SUITES[suite])
        elif suite not in TLS13_SUITES:
            raise WebConfigError(f"tls_server_config.cipher_suites: unknown cipher suite {log.describe(suite)} "
                                 f"(known: {', '.join(sorted(CIPHER_SUITES))})")
    if names:
        try:
            context.set_ciphers(":".join(names))
        except ssl.SSLError:
            raise WebConfigError("tls_server_config.cipher_suites: this OpenSSL offers none of them") from None
    if tls.get("prefer_server_cipher_suites", True) is not False:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    _load_chain(context, cert, key)
    auth = tls.get("client_auth_type") or "NoClientCert"
    if auth in ("RequestClientCert", "RequireAnyClientCert"):
        raise WebConfigError(f"tls_server_config.client_auth_type: {auth} (client certificates that are not "
                             "verified) is not supported; use RequireAndVerifyClientCert with client_ca_file")
    if auth not in CLIENT_AUTH:
        raise WebConfigError(f"tls_server_config.client_auth_type: {log.describe(auth)} is not one of "
                             f"{', '.join(CLIENT_AUTH)}")
    ca = _pem(tls, "client_ca", "client_ca_file", base)
    verify = getattr(ssl, CLIENT_AUTH[auth])
    if verify != ssl.CERT_NONE:
        if ca is None:
            raise WebConfigError(f"tls_server_config: client_auth_type {auth} needs client_ca_file")
        try:
            if ca[0] == "file":
                context.load_verify_locations(cafile=ca[1])
            else:
                context.load_verify_locations(cadata=ca[1])
        except (ssl.SSLError, ValueError) as exc:
            raise WebConfigError(f"tls_server_config: cannot load the client CA: {exc}") from None
    elif ca is not None:
        raise WebConfigError("tls_server_config: client_ca_file is set but client_auth_type is NoClientCert; "
                             "set client_auth_type: RequireAndVerifyClientCert")
    context.verify_mode = verify
    return context


def _load_chain(context: ssl.SSLContext, cert: tuple, key: tuple) -> None:
    """load_cert_chain reads files only: inline PEM goes through a private temporary file."""
    import ssl  # (loaded by _ssl_context already)

    made = []
    try:
        paths = []
        for kind, value in (cert, key):
            if kind == "file":
                paths.append(value)
            else:
                fd, tmp = tempfile.mkstemp(prefix="storpath-tls-")
                made.append(tmp)
                with os.fdopen(fd, "w") as handle:
                    handle.write(value)
                paths.append(tmp)
        context.load_cert_chain(paths[0], paths[1])
    except ssl.SSLError as exc:
        raise WebConfigError(f"tls_server_config: cannot load the certificate and key (do they match, are they "
                             f"PEM?): {exc.reason or exc}") from None
    except OSError as exc:
        raise WebConfigError(f"tls_server_config: cannot read the certificate or key: {exc}") from None
    finally:
        for tmp in made:
            os.unlink(tmp)


def _users(raw: Any) -> Dict[str, bytes]:
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise WebConfigError("basic_auth_users: expected a mapping of user name to bcrypt hash")
    users = {}
    for user, hashed in raw.items():
        if not isinstance(user, str) or not user or ":" in user:
            raise WebConfigError(f"basic_auth_users: {log.describe(user)} is not a valid user name")
        if not isinstance(hashed, str) or not _is_bcrypt(hashed):
            raise WebConfigError(f"basic_auth_users.{user}: not a bcrypt hash (expected $2y$10$... as "
                                 "`htpasswd -nBC 10 \"\" | tr -d ':\\n'` prints)")
        users[user] = hashed.encode("ascii")
    return users


def _is_bcrypt(text: str) -> bool:
    parts = text.split("$")
    return (len(text) == 60 and len(parts) == 4 and parts[0] == "" and parts[1] in ("2a", "2b", "2y")
            and parts[2].isdigit() and 4 <= int(parts[2]) <= 31)


def _headers(raw: Any) -> List[tuple]:
    if not raw:
        return []
    server = _mapping(raw, "http_server_config")
    for key in server:
        if key not in ("headers", "http2"):
            raise WebConfigError(f"unknown key http_server_config.{key} (known: headers, http2)")
    if "http2" in server and not isinstance(server["http2"], bool):
        raise WebConfigError("http_server_config.http2: expected true or false")
    headers = []
    for name, value in _mapping(server.get("headers") or {}, "http_server_config.headers").items():
        if name not in HEADERS:
            raise WebConfigError(f"http_server_config.headers: {log.describe(name)} cannot be set (allowed: "
                                 f"{', '.join(HEADERS)})")
        if value in (None, ""):
            continue
        if not isinstance(value, str) or "\n" in value or "\r" in value:
            raise WebConfigError(f"http_server_config.headers.{name}: expected a one-line string")
        allowed = HEADERS[name]
        if allowed and value.lower() not in allowed:
            raise WebConfigError(f"http_server_config.headers.{name}: {log.describe(value)} is not one of {', '.join(allowed)}")
        headers.append((name, value))
    return headers


# How much of a password bcrypt uses (the Blowfish key schedule's 18 words of 4 bytes).
BCRYPT_KEY_BYTES = 72


class AuthenticatorBusy(Exception):
    """Too many password checks at once: this one was refused without one."""


class Authenticator:
    """Checks HTTP basic auth against bcrypt hashes.

    bcrypt costs about 0.1 s of CPU per check at cost 10 (0.2 s at 12, measured here), on
    purpose. A successful check is kept, keyed by a SHA-256 of user, password and hash, so
    each scraper pays it once (the same trade exporter-toolkit makes), and a kept one is
    answered without waiting for any bcrypt check. Failed checks are not kept. One bcrypt
    check runs at a time and BCRYPT_WAITING more may wait for it; more are refused at once
    (AuthenticatorBusy), so a flood of wrong passwords takes one core and a few workers,
    never the scrapes'.
    """

    CACHE_MAX = 1024
    BCRYPT_WAITING = 3

    def __init__(self, users: Dict[str, bytes]):
        self.users = users
        self._good: set = set()
        self._lock = threading.Lock()
        self._bcrypt = threading.Lock()
        self._admitted = threading.BoundedSemaphore(1 + self.BCRYPT_WAITING)
        # Unknown users are checked against this hash (a salt of dots, a hash nothing matches), at
        # the highest cost configured, so their answer takes as long as a known user's wrong
        # password: no user enumeration by timing.
        cost = max((int(hashed.split(b"$")[2]) for hashed in users.values()), default=10)
        self._dummy = b"$2b$%02d$" % cost + b"." * 53

    def check(self, user: str, password: str) -> bool:
        import hashlib  # only where basic auth is configured: serve without it starts without

        hashed = self.users.get(user)
        key = hashlib.sha256(b"\0".join([user.encode(), password.encode(), hashed or b""])).digest()
        with self._lock:
            if hashed is not None and key in self._good:
                return True
        if not self._admitted.acquire(blocking=False):
            raise AuthenticatorBusy()
        try:
            ok = self._checkpw(password, hashed or self._dummy)
        finally:
            self._admitted.release()
        if ok and hashed is not None:
            with self._lock:
                if len(self._good) >= self.CACHE_MAX:
                    self._good.clear()
                self._good.add(key)
            return True
        return False

    def _checkpw(self, password: str, hashed: bytes) -> bool:
        import bcrypt

        # bcrypt keys on the first 72 bytes of a password: htpasswd hashes those, and
        # exporter-toolkit (Go's bcrypt) checks those, so a longer password Prometheus sends
        # matches. bcrypt 5 raises on more than 72 bytes rather than cutting: cut here.
        with self._bcrypt:
            try:
                return bcrypt.checkpw(password.encode("utf-8")[:BCRYPT_KEY_BYTES], hashed)
            except ValueError:  # a malformed hash: never a match
                return False
