"""Test certificates (made with the openssl command, Debian's openssl package) and web config
files for `storpath serve --web.config.file`."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Dict, Optional

import yaml


@dataclass
class Certs:
    ca: str  # CA certificate (PEM) that signed both below
    cert: str  # server certificate for localhost and 127.0.0.1
    key: str
    client_cert: str
    client_key: str


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(folder: str) -> Certs:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate, all signed by the CA."""
    os.makedirs(folder, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=storpath test CA", cwd=folder)
    for name, subject, ext in (("server", "/CN=localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
                               ("client", "/CN=prometheus", "extendedKeyUsage=clientAuth")):
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=folder)
        with open(os.path.join(folder, f"{name}.ext"), "w") as handle:
            handle.write(ext + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=folder)
    path = lambda name: os.path.join(folder, name)  # noqa: E731
    return Certs(path("ca.crt"), path("server.crt"), path("server.key"), path("client.crt"), path("client.key"))


def bcrypt_hash(password: str, rounds: int = 10) -> str:
    import bcrypt

    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds)).decode()


def write_web_config(path: str, certs: Optional[Certs] = None, users: Optional[Dict[str, str]] = None,
                     headers: Optional[Dict[str, str]] = None, **tls_extra) -> str:
    """A web config file; `users` maps user -> plain password (hashed here)."""
    config: dict = {}
    if certs is not None:
        config["tls_server_config"] = {"cert_file": certs.cert, "key_file": certs.key, **tls_extra}
    if users:
        config["basic_auth_users"] = {user: bcrypt_hash(password) for user, password in users.items()}
    if headers:
        config["http_server_config"] = {"headers": headers}
    with open(path, "w") as handle:
        yaml.safe_dump(config, handle)
    return path
