"""Parameter-server wire protocol: the ps side (server) and the worker side (client).

The protocol is newline-delimited JSON over TCP. A client sends one request
object per line and reads exactly one response line back:

    {"op": "status"}                      -> {"ok": true, "initialized": b, "step": n,
                                              "initial_step": n}
    {"op": "init", "values": [...], "step": n}
                                          -> {"ok": true}
    {"op": "pull"}                        -> {"ok": true, "values": [...]}
    {"op": "push", "grad": [...], "lr": x} -> {"ok": true}
    {"op": "get_step"}                    -> {"ok": true, "step": n}
    {"op": "inc_step"}                    -> {"ok": true, "step": n}   (the new value)

Errors come back as {"ok": false, "error": "..."}. Floats travel as JSON
numbers; Python writes them with repr(), so they round-trip exactly.

Like TensorFlow's replica_device_setter, the parameter vector is split into one
contiguous shard per ps task. Every ps keeps a step counter, but only ps 0's is
the global step (TensorFlow places global_step on ps 0 too).
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time


def shard_bounds(num_params: int, num_ps: int) -> list[tuple[int, int]]:
    """[lo, hi) of each ps task's shard; sizes differ by at most one."""
    return [(i * num_params // num_ps, (i + 1) * num_params // num_ps) for i in range(num_ps)]


class PsError(Exception):
    """A ps answered, but refused the request (bad request, not initialized, ...)."""


class PsUnavailable(Exception):
    """A ps could not be reached within the retry window."""


# --------------------------------------------------------------------------- server


class ShardState:
    """One ps task's variables. Every method holds the lock: requests arrive on
    one thread per worker connection and asynchronous SGD must not lose updates."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: list[float] = []
        self._step = 0
        self._initial_step = 0  # the step set by init: where this training run started
        self._initialized = False

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        with self._lock:
            if op == "status":
                return {"ok": True, "initialized": self._initialized, "step": self._step,
                        "initial_step": self._initial_step}
            if op == "init":
                self._values = [float(v) for v in request["values"]]
                self._step = self._initial_step = int(request["step"])
                self._initialized = True
                return {"ok": True}
            if op not in ("pull", "push", "get_step", "inc_step"):
                return {"ok": False, "error": f"unknown op {op!r}"}
            # A ps that restarted has lost its variables: say so instead of
            # serving zeros, so workers fail loudly and the job is restarted.
            if not self._initialized:
                return {"ok": False, "error": "not initialized (did this ps restart?)"}
            if op == "pull":
                return {"ok": True, "values": self._values}
            if op == "push":
                grad, lr = request["grad"], float(request["lr"])
                if len(grad) != len(self._values):
                    return {
                        "ok": False,
                        "error": f"gradient has {len(grad)} values, shard has "
                        f"{len(self._values)} (same --features on every task?)",
                    }
                self._values = [v - lr * g for v, g in zip(self._values, grad)]
                return {"ok": True}
            if op == "get_step":
                return {"ok": True, "step": self._step}
            self._step += 1
            return {"ok": True, "step": self._step}


class _ConnectionHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            try:
                response = self.server.state.handle(json.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                response = {"ok": False, "error": f"bad request: {err}"}
            self.wfile.write(json.dumps(response).encode() + b"\n")


class PsServer(socketserver.ThreadingTCPServer):
    """Serves one ShardState, one thread per connection, until the process ends."""

    daemon_threads = True  # open worker connections must not keep the process alive
    request_queue_size = 128  # every worker connects at about the same moment

    def __init__(self, host: str, port: int, state: ShardState) -> None:
        self.state = state
        super().__init__((host, port), _ConnectionHandler)

    def server_bind(self) -> None:
        # The tfslurm agent keeps this port bound (SO_REUSEPORT, not listening)
        # for as long as we run, so that nothing else can take it. Binding next
        # to it needs SO_REUSEADDR or SO_REUSEPORT here (TensorFlow's gRPC
        # server binds with SO_REUSEADDR: see agent/README.md).
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()


# --------------------------------------------------------------------------- client


class PsClient:
    """A persistent connection to one ps task, with reconnect-and-retry.

    Until the first successful call the client waits up to `startup_timeout`
    (ps tasks may start after the workers). Afterwards a ps that stops
    answering is given only `retry_timeout` before PsUnavailable is raised.
    A request retried after a broken connection may have been applied once
    already; asynchronous SGD tolerates a duplicated gradient.
    """

    def __init__(self, index: int, address: str, startup_timeout: float, retry_timeout: float):
        self.index = index
        self.address = address
        host, _, port = address.rpartition(":")
        self._endpoint = (host.strip("[]"), int(port))  # "[::1]:2222" is an IPv6 address
        self._startup_timeout = startup_timeout
        self._retry_timeout = retry_timeout
        self._reached = False
        self._sock: socket.socket | None = None
        self._reader = None

    def call(self, op: str, **fields) -> dict:
        request = json.dumps({"op": op, **fields}).encode() + b"\n"
        deadline = None
        delay = 0.1
        while True:
            try:
                line = self._exchange(request)
                break
            except OSError as err:
                self._close()
                window = self._retry_timeout if self._reached else self._startup_timeout
                if deadline is None:
                    deadline = time.monotonic() + window
                if time.monotonic() >= deadline:
                    raise PsUnavailable(
                        f"ps {self.index} at {self.address} unreachable for {window:.0f}s: {err}"
                    ) from err
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        self._reached = True
        response = json.loads(line)
        if not response.get("ok"):
            raise PsError(f"ps {self.index} at {self.address}: {response.get('error')}")
        return response

    def _exchange(self, request: bytes) -> bytes:
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self._endpoint, timeout=30)
                self._reader = self._sock.makefile("rb")
            self._sock.sendall(request)
            line = self._reader.readline()
        except BaseException:
            # Whatever interrupted us (an error, or SIGTERM's exception), the
            # stream may now hold half a message: never reuse it.
            self._close()
            raise
        if not line:
            raise ConnectionResetError("connection closed by ps")
        return line

    def _close(self) -> None:
        if self._sock is not None:
            self._reader.close()
            self._sock.close()
        self._sock = None
        self._reader = None


class ClusterClient:
    """The whole parameter vector, seen through every ps task's shard."""

    def __init__(self, addresses: list[str], num_params: int, startup_timeout: float,
                 retry_timeout: float):
        self._shards = [PsClient(i, a, startup_timeout, retry_timeout)
                        for i, a in enumerate(addresses)]
        self._bounds = shard_bounds(num_params, len(addresses))

    def initialize(self, params: list[float], step: int) -> None:
        for shard, (lo, hi) in zip(self._shards, self._bounds):
            shard.call("init", values=params[lo:hi], step=step)

    def initialized(self) -> bool:
        return all(shard.call("status")["initialized"] for shard in self._shards)

    def pull(self) -> list[float]:
        params: list[float] = []
        for shard, (lo, hi) in zip(self._shards, self._bounds):
            values = shard.call("pull")["values"]
            if len(values) != hi - lo:
                raise PsError(f"ps {shard.index} holds {len(values)} values, expected "
                              f"{hi - lo} (same --features on every task?)")
            params.extend(values)
        return params

    def push(self, grad: list[float], lr: float) -> None:
        for shard, (lo, hi) in zip(self._shards, self._bounds):
            shard.call("push", grad=grad[lo:hi], lr=lr)

    def initial_step(self) -> int:
        """The global step the chief initialized or restored the ps to."""
        return self._shards[0].call("status")["initial_step"]

    def global_step(self) -> int:
        return self._shards[0].call("get_step")["step"]

    def increment_step(self) -> int:
        return self._shards[0].call("inc_step")["step"]
