"""Every place where storpath reaches past cheroot's documented interface, in one module.

cheroot is pinned in pyproject.toml to the versions these were tested with (9.0, Debian
bookworm's python3-cheroot, which the .deb uses; and 11.1 from PyPI): each piece below
relies on something private to cheroot, and a new major version may move it. The server
(storpath.http.server) uses cheroot only through these classes and wsgi.Server's public
attributes.

What is changed:
- cheroot hands a new connection to a worker at once, and the worker reads the request with
  a timeout per read, so clients that send their request a byte at a time hold every worker.
  Here a plain-HTTP connection waits in the selector, as an idle keep-alive connection does;
  what arrives is read without waiting into the connection's reader, and the connection goes
  to a worker only once its whole request head is there. One that takes longer than
  `request_read_timeout` from its first byte is closed (WSGIServer.process_conn, _RequestIO).
- cheroot's TLS adapters do the handshake in the thread that accepts connections, so one
  client that connects and sends nothing would stop all accepting for the whole socket
  timeout; here a TLS connection also waits in the selector until it sends something, and the
  handshake is done on the first read, in the worker, which must have read the request within
  `request_read_timeout` of taking the connection (TLSAdapter, _RequestIO, _Request).
- cheroot waits for a slow reader per write, so a client that reads its answer a byte at a
  time holds the worker for as long as it likes; here an answer must be sent within
  `answer_write_timeout` of its first byte, then the connection is closed (_AnswerIO).
- Per client address, at most `clients.reading` requests are read ahead at once and at most
  `clients.workers` connections are held by workers; more wait without a worker (_Clients).
- Workers are started as requests need them (WSGIServer._to_worker).
- A request body, or a second Content-Length header, is refused with 400 (_Headers).
- cheroot's package looks its own version up with importlib.metadata when imported, only for
  the default `Server` header, which storpath replaces (`server_name`); importing
  importlib.metadata (email, zipfile, csv, pathlib and more: about 10 ms of the exporter's
  start) is spared where nothing has loaded it yet (_stand_ins).
- cheroot's selector loop ends on any accept error it does not know, and starts again at
  once: out of descriptors (EMFILE), the listening socket stays readable, so the loop spins,
  never expires an idle connection, never reads one that is ready, and never gets out.
  Here running out of descriptors or memory in accept is a pause, not an error: the oldest
  idle connections are closed to make room (else accepting waits `ACCEPT_PAUSE`), and idle
  ones go on expiring meanwhile. Connections are also counted: one address may hold
  `clients.connections` open at once, and all together at most `max_connections` (the
  descriptor limit less what the scrape's own reads need); past either, the oldest idle
  connections are closed for the new one (of that address: first those that never sent a
  whole request, then its idle keep-alive ones), as a web server reuses its keep-alive
  connections when it runs out, so an address that holds its cap with connections that send
  nothing still gets its health checks and scrapes answered (_ConnectionManager).
"""

from __future__ import annotations

import _pyio
import collections
import contextlib
import errno
import importlib  # noqa: F401  (the parent _stand_ins sets `metadata` on)
import logging
import os
import selectors
import socket
import sys
import threading
import time
import types
from typing import Any, Deque, Dict, List, Optional


@contextlib.contextmanager
def _stand_ins(modules: Dict[str, Optional[types.ModuleType]]):
    """While cheroot's package is first imported: each named module that is not loaded yet is
    replaced by its stand-in, or made to fail to import (None, as on a Python built without it);
    afterwards every one is taken away, so a later import loads the real module. Nothing is
    changed where cheroot is loaded already."""
    placed = []
    if "cheroot" not in sys.modules:
        for name, stand_in in modules.items():
            if name not in sys.modules:
                sys.modules[name] = stand_in  # type: ignore[assignment]
                placed.append(name)
                parent, _, attribute = name.rpartition(".")
                if stand_in is not None and parent:
                    setattr(sys.modules[parent], attribute, stand_in)
    try:
        yield
    finally:
        for name in placed:
            del sys.modules[name]
            parent, _, attribute = name.rpartition(".")
            if modules[name] is not None and parent:
                delattr(sys.modules[parent], attribute)


def _metadata_stand_in() -> types.ModuleType:
    """importlib.metadata whose `version` says "unknown": cheroot 9.0 and 11.1 both take their
    version from `metadata.version('cheroot')` in their package's __init__ and fall back to
    "unknown" on any error."""
    stand_in = types.ModuleType("importlib.metadata")
    stand_in.version = lambda name: "unknown"  # type: ignore[attr-defined]
    return stand_in


# ssl: cheroot._compat imports it only for two flags of OpenSSL's version (it takes an
# ImportError, and only cheroot's own tests read them); loading ssl and OpenSSL is a tenth of a
# plain HTTP exporter's start, and TLS loads them with its context (storpath.http.webconfig).
with _stand_ins({"importlib.metadata": _metadata_stand_in(), "ssl": None}):
    import cheroot  # noqa: E402,F401  (the package itself, with the stand-in)
    from cheroot import _compat  # noqa: E402,F401  (its one import of ssl, told there is none)

from cheroot import connections as cheroot_connections  # noqa: E402
from cheroot import errors as cheroot_errors  # noqa: E402
from cheroot import wsgi  # noqa: E402
from cheroot.makefile import StreamReader, StreamWriter  # noqa: E402
from cheroot.server import HTTPConnection, HTTPRequest  # noqa: E402
from cheroot.ssl import Adapter  # noqa: E402

from storpath.base import log

LOG = log.get("web")

GROW_THREADS = 4  # workers started at a time when a request finds none idle, up to the pool's maximum
# accept() errors that say "not now" (no descriptor, no memory for the socket), not "never".
OUT_OF_DESCRIPTORS = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))
ACCEPT_PAUSE = 0.25  # seconds without accepting after such an error when no idle connection can be closed
SHED_BATCH = 16  # idle connections closed at once to make room: the search is over all of them
QUIET_AFTER = 5.0  # seconds without a new refusal that end an episode (logged at info)
# Connections one address may hold past its cap between accepting a new one and closing its
# oldest idle one (done between two rounds of the selector loop). Only a connection that went
# to a worker in that same round, instead of being closed, leaves its address over the cap;
# past this many over, the new connection is closed at once.
OVER_CAP = 16
_WAKE = object()  # what the selector's own pipe carries as its data (_Selector)


class _RequestIO(socket.SocketIO):
    """Reads a connection's requests: first the bytes the selector read ahead (`pending`),
    then the socket; over TLS the handshake is done on the first read. While a worker reads
    a request, each read waits at most what is left of the request's `deadline`."""

    def __init__(self, sock, mode, tls: bool):
        super().__init__(sock, mode)
        self.pending = bytearray()
        self.deadline: Optional[float] = None  # time.monotonic() by which the request must be read
        self._handshaken = not tls
        self._timeout = sock.gettimeout()

    def read_ahead(self, limit: int) -> bool:
        """Move what has arrived (at most `limit` bytes) into `pending` without waiting;
        False once the client has closed or reset the connection."""
        sock = self._sock
        sock.settimeout(0)  # with a timeout, recv would first wait for data
        try:
            data = sock.recv(limit)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        finally:
            sock.settimeout(self._timeout)
        self.pending += data
        return bool(data)

    def readinto(self, buffer):
        if self.pending:
            count = min(len(buffer), len(self.pending))
            buffer[:count] = self.pending[:count]
            del self.pending[:count]
            return count
        return _by_deadline(self._sock, self.deadline, self._timeout, self._read, buffer)

    def _read(self, buffer):
        if not self._handshaken:
            self._handshake()
        return super().readinto(buffer)

    def _handshake(self) -> None:
        import ssl  # (a TLS connection: loaded with its context)

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


def _by_deadline(sock, deadline: Optional[float], timeout: Optional[float], call, *args):
    """`call(*args)`, one socket read or write, waiting at most what is left until
    `deadline` (time.monotonic()) and at most `timeout`; socket.timeout once it has passed."""
    if deadline is None:
        return call(*args)
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    sock.settimeout(min(left, timeout) if timeout is not None else left)
    try:
        return call(*args)
    finally:
        sock.settimeout(timeout)


class _AnswerIO(socket.SocketIO):
    """Writes a connection's answers: an answer must be sent within `limit` seconds of its
    first write, so a client that reads it slowly (or never) holds its worker that long at
    most, however little it reads at a time."""

    def __init__(self, sock):
        super().__init__(sock, "wb")
        self.limit: Optional[float] = None
        self.deadline: Optional[float] = None  # time.monotonic() by which the answer must be sent
        self._timeout = sock.gettimeout()

    def write(self, data):
        if self.limit is not None and self.deadline is None:
            self.deadline = time.monotonic() + self.limit
        return _by_deadline(self._sock, self.deadline, self._timeout, super().write, data)


class _Writer(StreamWriter):
    """cheroot's StreamWriter writing through _AnswerIO."""

    def __init__(self, sock, bufsize: int = 8192):
        # Private: as _Reader, StreamWriter.__init__ is skipped for its base's (cheroot's
        # BufferedWriter, from _pyio), around _AnswerIO; `bytes_written` is StreamWriter's counter.
        _pyio.BufferedWriter.__init__(self, _AnswerIO(sock), bufsize)
        self.bytes_written = 0


class _Reader(StreamReader):
    """cheroot's StreamReader reading through _RequestIO."""

    def __init__(self, sock, tls: bool, bufsize: int = 8192):
        # Private: StreamReader.__init__ wraps the socket in a plain SocketIO, so it is skipped and
        # its base (_pyio.BufferedReader, which cheroot's makefile module builds on) is set up
        # around _RequestIO instead; `bytes_read` is the counter StreamReader.read keeps.
        _pyio.BufferedReader.__init__(self, _RequestIO(sock, "rb", tls), bufsize)
        self.bytes_read = 0

    def take_buffered(self) -> bytes:
        """What this reader holds and has not handed out yet (a pipelined request)."""
        return self.read(len(self.peek(0))) if self.has_data() else b""


class _Headers(dict):
    """A request's headers as cheroot's header reader fills them, refusing any request body:
    nothing here takes one, and a body cheroot does not read stays on a kept-alive connection
    to be parsed as the next request, which a proxy in front would not expect (request
    smuggling). So a Content-Length above 0 or any Transfer-Encoding is refused, and with them
    a second Content-Length (cheroot keeps the last; a proxy may have used the first). The
    ValueError is answered with 400 and the message, and the connection closed."""

    def __setitem__(self, key, value):
        if key == b"Content-Length" and key in self:
            raise ValueError("Duplicate Content-Length header")
        if (key == b"Content-Length" and value.strip() != b"0") or key == b"Transfer-Encoding":
            raise ValueError("A request body (Content-Length above 0, or Transfer-Encoding) is not accepted")
        super().__setitem__(key, value)


class _Request(HTTPRequest):
    """One request of a _Connection, which a worker has taken: its line and headers must be
    read within the server's `request_read_timeout` from now, and its answer sent within
    `answer_write_timeout` of its first byte (WSGIServer.put_conn, and the connection's close,
    end both when the worker lets the connection go)."""

    def parse_request(self):
        conn = self.conn
        conn.rfile.raw.deadline = time.monotonic() + self.server.request_read_timeout
        conn.wfile.raw.limit = self.server.answer_write_timeout
        conn.requests_taken += 1
        return super().parse_request()

    def read_request_headers(self):
        # Private: cheroot's read_request_headers fills `inheaders` item by item.
        self.inheaders = _Headers()
        return super().read_request_headers()


class _Connection(HTTPConnection):
    """A connection read through _Reader and written through _Writer: its request must be
    read within the server's `request_read_timeout` of a worker taking it, and each answer
    sent within `answer_write_timeout` of its first byte (_Request)."""

    RequestHandlerClass = _Request

    def __init__(self, server, sock, makefile=None):
        super().__init__(server, sock, *([makefile] if makefile else []))
        if not isinstance(self.rfile, _Reader):  # TLSAdapter.makefile gives one already
            self.rfile = _Reader(sock, tls=False)
        if not isinstance(self.wfile, _Writer):
            self.wfile = _Writer(sock)
        self.head_started: Optional[float] = None  # time.time() of the first byte of a request being read ahead
        self.in_worker = False
        self.counted = False  # counted in the server's open connections (_ConnectionManager)
        # Requests a worker has taken from this connection (cheroot's own `requests_seen` counts
        # only with its statistics on): 0 for one that connected and sent nothing, or part of a head.
        self.requests_taken = 0

    def close(self):
        self.server.worker_done(self)
        self.server.connection_closed(self)
        super().close()


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
        # _RequestIO does it on the first read, in the worker.
        wrapped = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return wrapped, {"wsgi.url_scheme": "https", "HTTPS": "on"}

    def get_environ(self, sock=None):
        return {"wsgi.url_scheme": "https", "HTTPS": "on"}

    def makefile(self, sock, mode="r", bufsize=-1):
        if "r" in mode:
            return _Reader(sock, tls=True)
        return _Writer(sock)


class _Clients:
    """Per client address: the connections whose request is being read ahead (at most
    `reading` at once, and `all_reading` from all addresses: more are closed), and the connections held by workers (at most
    `workers` at once: more wait, holding no worker, until one of that address's is done).
    One address cannot take every worker, nor fill memory with half-sent requests. Its
    open connections (at most `connections`) are counted by _ConnectionManager."""

    def __init__(self) -> None:
        self.reading = 64
        self.all_reading = 256
        self.workers = 64
        self.connections = 256  # open at once (_ConnectionManager)
        self._reading: Dict[Any, int] = {}
        self._all_reading = 0
        self._working: Dict[Any, int] = {}
        self._waiting: Dict[Any, Deque] = {}
        self._lock = threading.Lock()

    def start_reading(self, conn) -> bool:
        with self._lock:
            count = self._reading.get(conn.remote_addr, 0)
            if count >= self.reading or self._all_reading >= self.all_reading:
                return False
            self._reading[conn.remote_addr] = count + 1
            self._all_reading += 1
            conn.head_started = time.time()
            return True

    def stop_reading(self, conn) -> None:
        with self._lock:
            self._stop_reading(conn)

    def _stop_reading(self, conn) -> None:
        if conn.head_started is not None:
            conn.head_started = None
            _decrement(self._reading, conn.remote_addr)
            self._all_reading -= 1

    def to_worker(self, conn) -> bool:
        """True when `conn` may go to a worker now; else it waits for one of its address's."""
        with self._lock:
            self._stop_reading(conn)
            count = self._working.get(conn.remote_addr, 0)
            if count >= self.workers:
                self._waiting.setdefault(conn.remote_addr, collections.deque()).append(conn)
                return False
            self._working[conn.remote_addr] = count + 1
            conn.in_worker = True
            return True

    def done(self, conn):
        """`conn` leaves its worker (or is closed): the next of its address's waiting
        connections, if any, which now holds the worker slot."""
        with self._lock:
            self._stop_reading(conn)
            if not conn.in_worker:
                return None
            conn.in_worker = False
            waiting = self._waiting.get(conn.remote_addr)
            if waiting:
                follower = waiting.popleft()
                if not waiting:
                    del self._waiting[conn.remote_addr]
                follower.in_worker = True
                return follower
            _decrement(self._working, conn.remote_addr)
            return None

    def drain(self) -> List:
        with self._lock:
            waiting = [conn for queue in self._waiting.values() for conn in queue]
            self._waiting.clear()
            return waiting


class _Episode:
    """A condition that lasts a while (out of descriptors, an address at its cap): a warning
    when it starts, an info line when nothing has renewed it for QUIET_AFTER seconds, with
    how often it happened meanwhile; nothing in between."""

    def __init__(self, started: str, ended: str):
        self._started = started
        self._ended = ended
        self._since: Optional[float] = None
        self._last = 0.0
        self._count = 0

    def happened(self, **fields: object) -> None:
        now = time.monotonic()
        self._last = now
        self._count += 1
        if self._since is None:
            self._since = now
            log.kv(LOG, logging.WARNING, self._started, **fields)

    def check(self, now: float) -> None:
        if self._since is not None and now - self._last > QUIET_AFTER:
            log.kv(LOG, logging.INFO, self._ended, times=self._count, seconds=round(self._last - self._since, 1))
            self._since, self._count = None, 0


class _Selector(cheroot_connections._ThreadsafeSelector):
    """cheroot's selector, calling `before(timeout)` (which returns the timeout to use) before
    each select: the one point of each round of the loop where no ready connection is being
    handed out, so connections can be closed and the listening socket watched again.

    It also watches a pipe of its own, which `wake` writes to, so that a stop ends the select
    at once instead of after the loop's next timeout (up to `expiration_interval`, 0.5 s). The
    pipe is neither handed out by `select` nor listed in `connections`."""

    def __init__(self, before):
        super().__init__()
        self._before = before
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._wake_lock = threading.Lock()  # a wake and the close never interleave
        # Private: `_selector` is the selectors.DefaultSelector cheroot's class wraps.
        self._selector.register(self._wake_read, selectors.EVENT_READ, data=_WAKE)

    def wake(self) -> None:
        with self._wake_lock:
            if self._wake_write < 0:  # closed: its number may be another file's by now
                return
            try:
                os.write(self._wake_write, b"w")
            except BlockingIOError:  # full: a wake is pending already
                pass

    def select(self, timeout=None):
        ready = []
        for fd, data in super().select(self._before(timeout)):
            if data is _WAKE:
                with contextlib.suppress(OSError):
                    os.read(self._wake_read, 4096)
            else:
                ready.append((fd, data))
        return ready

    @property
    def connections(self):
        return [(fd, conn) for fd, conn in super().connections if conn is not _WAKE]

    def __len__(self):
        return super().__len__() - 1

    def close(self):
        super().close()
        with self._wake_lock:
            if self._wake_write >= 0:
                os.close(self._wake_read)
                os.close(self._wake_write)
                self._wake_read = self._wake_write = -1


class _ConnectionManager(cheroot_connections.ConnectionManager):
    """cheroot's selector loop (accepting, parking idle connections, expiring them) with
    accept errors that mean "not now" taken as a pause, and open connections counted per
    address and in all."""

    def __init__(self, server):
        super().__init__(server)
        # Private: `_selector` is the loop's selector, made (and given the listening socket) by
        # ConnectionManager.__init__; replaced by one that calls _between_rounds.
        self._selector.close()
        self._selector = _Selector(self._between_rounds)
        self._selector.register(server.socket.fileno(), selectors.EVENT_READ, data=server)
        self._open: Dict[Any, int] = {}
        self._open_all = 0
        self._count_lock = threading.Lock()  # connections are closed by workers as well
        self._shed_wanted = False
        self._accept_paused_until: Optional[float] = None
        self._out = _Episode("out of descriptors or memory accepting connections: closing the oldest idle "
                             "connections, or pausing accepts, until there is room",
                             "accepting connections again")
        self._full = _Episode("more open connections than the descriptor limit leaves room for: closing the "
                              "oldest idle ones for new ones", "open connections back under the limit")
        self._over_cap: Dict[Any, int] = {}  # address -> its connections to close between rounds
        self._address_full = _Episode("connections from one address past its cap: closing its oldest idle ones "
                                      "(those that sent nothing first) for the new ones",
                                      "no address past its connection cap any more")

    def _from_server_socket(self, server_socket):
        # Private: cheroot's accept step, which raises an accept error it does not know.
        try:
            conn = super()._from_server_socket(server_socket)
        except OSError as exc:
            if exc.errno not in OUT_OF_DESCRIPTORS:
                raise
            self._out.happened(err=str(exc), open_connections=self._open_all)
            self._pause_accepting()
            self._shed_wanted = True
            return None
        if conn is None:
            return None
        return conn if self._admit(conn) else None

    def _admit(self, conn) -> bool:
        """Count a new connection. Past its address's cap it is served all the same, and that
        address's oldest idle connection is closed before the next round (_evict); False (and
        it is closed) only when the address is OVER_CAP past its cap: its connections are all
        busy in workers, none idle to close."""
        server = self.server
        cap = server.clients.connections
        with self._count_lock:
            count = self._open.get(conn.remote_addr, 0)
            refused = count >= cap + OVER_CAP
            if not refused:
                self._open[conn.remote_addr] = count + 1
                self._open_all += 1
                conn.counted = True
                if count >= cap:
                    self._over_cap[conn.remote_addr] = count + 1 - cap
            over = self._open_all > server.max_connections
        if count >= cap:
            self._address_full.happened(client=conn.remote_addr, max_per_client=cap)
        if refused:
            conn.close()
            return False
        if over:
            # Served, and room is made before the next round (max_connections leaves a reserve).
            self._full.happened(open_connections=self._open_all, max_connections=server.max_connections)
            self._shed_wanted = True
        return True

    def closed(self, conn) -> None:
        with self._count_lock:
            if conn.counted:
                conn.counted = False
                _decrement(self._open, conn.remote_addr)
                self._open_all -= 1

    def _between_rounds(self, timeout: Optional[float]) -> Optional[float]:
        now = time.monotonic()
        if self._over_cap:
            self._evict()
        if self._shed_wanted:
            self._shed_wanted = False
            if self._shed() and self._accept_paused_until is not None:
                self._accept_paused_until = now  # room was made: accept again at once
        if self._accept_paused_until is not None:
            if now >= self._accept_paused_until:
                self._accept_paused_until = None
                self._selector.register(self.server.socket.fileno(), selectors.EVENT_READ, data=self.server)
            elif timeout is not None:
                timeout = min(timeout, self._accept_paused_until - now)
        return timeout

    def _shed(self) -> bool:
        """Close the oldest idle connections (those parked in the selector); False if none."""
        # Private: `_selector.connections` lists what the selector holds, the listening socket too.
        idle = [(conn.last_used, fd, conn) for fd, conn in self._selector.connections if conn is not self.server]
        if not idle:
            return False
        for _, fd, conn in sorted(idle, key=lambda item: item[0])[:SHED_BATCH]:
            self._selector.unregister(fd)
            conn.close()
        return True

    def _evict(self) -> None:
        """Bring each address past its cap back to it by closing its idle connections (parked in
        the selector): first those that have not sent a whole request (they connected and sent
        nothing, or part of a head), then idle keep-alive ones, the oldest first. The newest
        connection, if it sent nothing yet, is among them, and is closed when the address has
        no older idle one. Done here, between rounds, never while the loop walks the connections
        a select() returned (one of those may be the one closed)."""
        with self._count_lock:
            wanted, self._over_cap = self._over_cap, {}
            cap = self.server.clients.connections
            excess = {address: self._open.get(address, 0) - cap for address in wanted}
        candidates: Dict[Any, List] = {}
        # Private: `_selector.connections` lists what the selector holds, the listening socket too.
        for fd, conn in self._selector.connections:
            if conn is not self.server and excess.get(conn.remote_addr, 0) > 0:
                candidates.setdefault(conn.remote_addr, []).append((conn.requests_taken > 0, conn.last_used, fd, conn))
        for address, idle in candidates.items():
            for _, _, fd, conn in sorted(idle, key=lambda item: item[:2])[:excess[address]]:
                self._selector.unregister(fd)
                conn.close()

    def _pause_accepting(self) -> None:
        """Stop watching the listening socket (readable as long as connections wait in the
        backlog, so the loop would spin) for ACCEPT_PAUSE, or until room is made."""
        if self._accept_paused_until is None:
            self._selector.unregister(self.server.socket.fileno())
        self._accept_paused_until = time.monotonic() + ACCEPT_PAUSE

    def stop(self):
        # Private: cheroot's stop sets `_stop_requested` and waits for its loop to end, which
        # sees the flag only when a select returns; the wake makes the select return now.
        self._stop_requested = True
        self._selector.wake()
        super().stop()

    def _expire(self, threshold):
        # Private: called by cheroot's loop every `expiration_interval` (0.5 s).
        super()._expire(threshold)
        now = time.monotonic()
        for episode in (self._out, self._full, self._address_full):
            episode.check(now)

def _decrement(counts: Dict, key) -> None:
    counts[key] -= 1
    if not counts[key]:
        del counts[key]


def _head_complete(data: bytearray, limit: int) -> bool:
    """The request line and headers have all arrived (a blank line ends them), or more than
    the server takes (then a worker answers 413)."""
    return b"\r\n\r\n" in data or b"\n\n" in data or len(data) > limit


class WSGIServer(wsgi.Server):
    """cheroot's WSGI server that gives a plain-HTTP connection to a worker only once its
    whole request head has arrived, within `request_read_timeout` of its first byte."""

    ConnectionClass = _Connection
    request_read_timeout = 5.0
    answer_write_timeout = 30.0
    max_connections = 1 << 30  # open connections at once, from all addresses

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.clients = _Clients()

    def prepare(self):
        super().prepare()
        # Private: `_connections` is the ConnectionManager prepare() made; it is replaced by one
        # that takes running out of descriptors as a pause (its selector, which holds only the
        # listening socket yet, is closed).
        self._connections._selector.close()
        self._connections = _ConnectionManager(self)

    def connection_closed(self, conn) -> None:
        connections = getattr(self, "_connections", None)
        if isinstance(connections, _ConnectionManager):
            connections.closed(conn)

    def process_conn(self, conn):
        # Called (by cheroot's ConnectionManager) for a new connection and for one that has
        # become readable; the worker pool then serves it.
        if self.ssl_adapter is None:
            if not self._read_ahead(conn):
                return
        elif not getattr(conn, "storpath_waited", False):
            # A new TLS connection waits in the selector, as an idle keep-alive connection does,
            # until it sends something; the selector closes it after the socket timeout if it never
            # does. The handshake and the request are read in the worker, within the deadline.
            conn.storpath_waited = True
            self._park(conn)
            return
        if self.clients.to_worker(conn):
            self._to_worker(conn)

    def _read_ahead(self, conn) -> bool:
        """Read what has arrived of a plain-HTTP request without waiting: True once its head is
        all there; else the connection goes back to the selector (or is closed) and False."""
        raw = conn.rfile.raw
        # A pipelined request the reader already holds goes ahead of what comes next.
        raw.pending[:0] = conn.rfile.take_buffered()
        limit = self.max_request_header_size
        if _head_complete(raw.pending, limit):
            return True
        if not raw.read_ahead(limit + 1 - len(raw.pending)):
            conn.close()  # the client went away
            return False
        if _head_complete(raw.pending, limit):
            return True
        if raw.pending and conn.head_started is None and not self.clients.start_reading(conn):
            log.once(LOG, logging.WARNING, ("per-client-reading",), "too many half-sent requests at once (from "
                     "one client, or from all): closing the newest", client=conn.remote_addr,
                     max_per_client=self.clients.reading, max_all=self.clients.all_reading)
            conn.close()
            return False
        self._park(conn)
        return False

    def _park(self, conn) -> None:
        # Private: `_connections` is cheroot's ConnectionManager; put() parks a connection in the
        # selector until it is readable, and its expiry closes one whose `last_used` is older than
        # the socket timeout. A request being read ahead is made to expire at its deadline.
        self._connections.put(conn)
        if conn.head_started is not None:
            conn.last_used = conn.head_started + self.request_read_timeout - self.timeout

    def _to_worker(self, conn) -> None:
        # Workers are started as requests need them, up to the pool's maximum: an exporter
        # scraped by one or two Prometheus servers does not hold the 44 a burst may take. A
        # growth waits until the new workers run (cheroot polls every 0.1 s); it happens only
        # when every worker is busy or already has a connection waiting for it.
        # Private: the pool's `_threads` is its list of started workers (cheroot offers no count).
        pool = self.requests
        if pool.idle <= pool.qsize and len(pool._threads) < pool.max:
            pool.grow(GROW_THREADS)
        super().process_conn(conn)

    def put_conn(self, conn):
        # Called by cheroot's worker for a connection kept open after its answer (one that is
        # not is closed: _Connection.close): the worker lets it go, its request's deadlines end.
        conn.rfile.raw.deadline = conn.wfile.raw.deadline = None
        self.worker_done(conn)
        super().put_conn(conn)

    def worker_done(self, conn) -> None:
        """`conn` has left its worker: the next connection of the same address that waits
        for a worker gets one."""
        follower = self.clients.done(conn)
        if follower is not None:
            self._to_worker(follower)

    def stop(self):
        super().stop()
        for conn in self.clients.drain():
            conn.close()

    def error_log(self, msg="", level=20, traceback=False):
        # cheroot reports client misbehaviour (resets, bad requests) here: not the operator's problem.
        LOG.debug("http: %s", msg, exc_info=traceback)
