"""Every place where storpath reaches past cheroot's documented interface, in one module.

cheroot is pinned in pyproject.toml to the versions these were tested with (9.0, Debian
bookworm's python3-cheroot, which the .deb uses; and 11.1 from PyPI): each piece below
relies on something private to cheroot, and a new major version may move it. The server
(storpath.http.server) uses cheroot only through these classes and wsgi.Server's public
attributes.

Two behaviours are changed:
- cheroot's TLS adapters do the handshake in the thread that accepts connections, so one
  client that connects and sends nothing would stop all accepting for the whole socket
  timeout; here the handshake is done on the first read, in the worker thread that serves
  the connection (TLSAdapter, _HandshakeIO, _Reader).
- cheroot hands a new connection to a worker at once, and the worker waits for its request;
  here it first waits in the selector, as an idle keep-alive connection does, and workers
  are started as requests need them (WSGIServer.process_conn).
"""

from __future__ import annotations

import _pyio
import socket
import ssl

from cheroot import errors as cheroot_errors
from cheroot import wsgi
from cheroot.makefile import StreamReader, StreamWriter
from cheroot.ssl import Adapter

from storpath import log

LOG = log.get("web")

GROW_THREADS = 4  # workers started at a time when a request finds none idle, up to the pool's maximum


class _HandshakeIO(socket.SocketIO):
    """Reads from a TLS socket whose handshake is done on the first read."""

    def __init__(self, sock, mode):
        super().__init__(sock, mode)
        self._handshaken = False

    def readinto(self, buffer):
        if not self._handshaken:
            self._handshake()
        return super().readinto(buffer)

    def _handshake(self) -> None:
        sock = self._sock
        try:
            sock.do_handshake()
        except ssl.SSLError as exc:
            if "http request" in str(exc).lower():
                # Plain HTTP on the TLS port: say so in plain HTTP (as Go's servers do), serve nothing.
                message = b"Client sent an HTTP request to an HTTPS server.\n"
                try:
                    socket.socket.send(sock, b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\n"
                                             b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
                                       % (len(message), message))
                except OSError:
                    pass
            LOG.debug("TLS handshake failed: %s", exc)
            # FatalSSLAlert is what cheroot's own adapters raise for a failed handshake: its
            # connection loop then closes the connection without logging an error.
            raise cheroot_errors.FatalSSLAlert(str(exc)) from None
        except OSError as exc:  # reset, timeout
            LOG.debug("TLS handshake failed: %s", exc)
            raise cheroot_errors.FatalSSLAlert(str(exc)) from None
        self._handshaken = True


class _Reader(StreamReader):
    """cheroot's StreamReader reading through _HandshakeIO."""

    def __init__(self, sock, mode="rb", bufsize=-1):
        # Private: StreamReader.__init__ wraps the socket in a plain SocketIO, so it is skipped and
        # its base (_pyio.BufferedReader, which cheroot's makefile module builds on) is set up
        # around _HandshakeIO instead; `bytes_read` is the counter StreamReader.read keeps.
        _pyio.BufferedReader.__init__(self, _HandshakeIO(sock, mode), bufsize if bufsize > 0 else 8192)
        self.bytes_read = 0


class TLSAdapter(Adapter):
    """cheroot's TLS adapter interface around an ssl.SSLContext from the web config; `context`
    can be replaced on reload, and new connections use the new one."""

    def __init__(self, context: ssl.SSLContext):
        super().__init__("", "")  # certificate and key come in `context`, not as file names
        self.context = context

    def bind(self, sock):
        return sock

    def wrap(self, sock):
        # Called in the accepting thread: no handshake here (do_handshake_on_connect=False);
        # _HandshakeIO does it on the first read, in the worker.
        wrapped = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return wrapped, {"wsgi.url_scheme": "https", "HTTPS": "on"}

    def get_environ(self, sock=None):
        return {"wsgi.url_scheme": "https", "HTTPS": "on"}

    def makefile(self, sock, mode="r", bufsize=-1):
        if "r" in mode:
            return _Reader(sock, mode, bufsize)
        return StreamWriter(sock, mode, bufsize if bufsize > 0 else 8192)


class WSGIServer(wsgi.Server):
    def process_conn(self, conn):
        # cheroot hands a connection to a worker as soon as it is accepted, and the worker then
        # waits up to the socket timeout for a request: a few hundred connections that send
        # nothing would hold every worker. A new connection waits in the selector instead,
        # as an idle keep-alive connection does, and goes to a worker once it has sent
        # something; the selector closes it after the timeout if it never does.
        # Private: `_connections` is cheroot's ConnectionManager, whose put() parks a
        # connection in the selector until it is readable and then calls process_conn again.
        if not getattr(conn, "storpath_waited", False):
            conn.storpath_waited = True
            self._connections.put(conn)
            return
        # Workers are started as requests need them, up to the pool's maximum: an exporter
        # scraped by one or two Prometheus servers does not hold the 44 a burst may take. A
        # growth waits until the new workers run (cheroot polls every 0.1 s); it happens only
        # when every worker is busy or already has a connection waiting for it.
        # Private: the pool's `_threads` is its list of started workers (cheroot offers no count).
        pool = self.requests
        if pool.idle <= pool.qsize and len(pool._threads) < pool.max:
            pool.grow(GROW_THREADS)
        super().process_conn(conn)

    def error_log(self, msg="", level=20, traceback=False):
        # cheroot reports client misbehaviour (resets, bad requests) here: not the operator's problem.
        LOG.debug("http: %s", msg, exc_info=traceback)
