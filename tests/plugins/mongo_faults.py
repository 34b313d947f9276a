"""A fault-injecting TCP proxy in front of a MongoDB-wire server: a storage failure as the outside world sees it.

Clients connect to the proxy; every message goes through to the server, except while the proxy is *panicked*: then
every write command (insert, update, delete, findAndModify, createIndexes, create) is answered by the proxy itself
with the error a mongod whose disk filled up gives (``OutOfDiskSpace``), while reads, ``ping`` and ``hello`` still go
through and answer — the probe's WiredTiger panic. Like that panic, it does not end when space is freed: it ends
when the server behind the proxy is restarted (``server_pid()`` returns another PID), which is what the fleet's
supervisor must do without a person.

Only loopback; one thread per direction of each connection (tests open a handful).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

import bson

OP_MSG = 2013
WRITES = frozenset({"insert", "update", "delete", "findandmodify", "createindexes", "create"})
DISK_FULL = {"ok": 0.0, "errmsg": "WiredTiger error: No space left on device (injected by the test's proxy)",
             "code": 14031, "codeName": "OutOfDiskSpace"}


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _command(message: bytes) -> tuple[int, str | None]:
    """(requestID, command name) of an OP_MSG; (requestID, None) for anything else."""
    _, request_id, _, opcode = struct.unpack_from("<iiii", message)
    if opcode != OP_MSG:
        return request_id, None
    offset = 20  # header + flagBits
    while offset < len(message):
        kind = message[offset]
        offset += 1
        size = struct.unpack_from("<i", message, offset)[0]
        if kind == 0:
            body = bson.decode(message[offset:offset + size])
            return request_id, next(iter(body), "").lower()
        offset += size
    return request_id, None


def _reply(response_to: int, document: dict) -> bytes:
    body = bson.encode(document)
    payload = struct.pack("<I", 0) + b"\x00" + body
    return struct.pack("<iiii", 16 + len(payload), 0, response_to, OP_MSG) + payload


class MongoFaultProxy:
    def __init__(self, upstream_port: int, server_pid: Callable[[], int]) -> None:
        self.upstream_port = upstream_port
        self.server_pid = server_pid
        self.panicked_pid: int | None = None  # the server instance whose storage failed
        self.refused = 0  # writes answered with the error
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    # --- control ------------------------------------------------------------------------------------------------
    def start(self) -> MongoFaultProxy:
        threading.Thread(target=self._accept, name="mongo-fault-proxy", daemon=True).start()
        return self

    def panic(self) -> None:
        """The storage of the server now running fails: every write fails until that server is restarted."""
        self.panicked_pid = self.server_pid()

    @property
    def failing(self) -> bool:
        if self.panicked_pid is None:
            return False
        if self.server_pid() != self.panicked_pid:
            self.panicked_pid = None  # restarted: healed
            return False
        return True

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.close()
                except OSError:
                    pass

    # --- relaying -----------------------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()  # the server is down: so is the proxy for this client
                continue
            with self._lock:
                self._sockets += [client, server]
            send_lock = threading.Lock()  # the proxy's own replies and the server's share the client socket
            threading.Thread(target=self._upstream, args=(client, server, send_lock), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client, send_lock), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket, send_lock: threading.Lock) -> None:
        try:
            while True:
                header = _read_exactly(client, 16)
                length = struct.unpack_from("<i", header)[0]
                message = header + _read_exactly(client, length - 16)
                request_id, command = _command(message)
                if command in WRITES and self.failing:
                    self.refused += 1
                    with send_lock:
                        client.sendall(_reply(request_id, DISK_FULL))
                    continue
                server.sendall(message)
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            _close(client, server)

    def _downstream(self, server: socket.socket, client: socket.socket, send_lock: threading.Lock) -> None:
        try:
            while True:
                header = _read_exactly(server, 16)
                length = struct.unpack_from("<i", header)[0]
                message = header + _read_exactly(server, length - 16)
                with send_lock:
                    client.sendall(message)
        except (OSError, ConnectionError):
            pass
        finally:
            _close(client, server)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        try:
            sock.close()
        except OSError:
            pass
