"""HTTP to tfslurmd with the standard library (http.client, ssl): one request
at a time per Transport and thread, JSON in and out, errors as exceptions
(errors.py).

Identity: the connection's token as ``Authorization: Bearer``; with no
token, a fresh MUNGE credential per request (_munge.py), as tfctl does.
When munged cannot make one the request goes without, and a 401 that asks
for MUNGE says why.

GET requests reuse a kept-alive connection of their thread; other requests
open their own, so that one sent on a connection the server had just closed
is never sent twice.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import urllib.parse
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import _munge
from .connection import Connection
from .errors import ProtocolError, ServiceError, ServiceUnreachable, error_from_answer

# Requests other than log follows get an answer within this; a submission
# waits for slurmctld, which can be slow on a busy cluster.
READ_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 5.0
# Longer than the service's follow window (30 s), in which it either sends
# output or ends the response.
FOLLOW_READ_TIMEOUT_S = 300.0

Query = Dict[str, Union[str, int, bool, None, List[str]]]


def encode_path(*parts: str) -> str:
    """/experiments/<id>: each part percent-encoded, so that no value changes the path's shape."""
    return "".join("/" + urllib.parse.quote(p, safe="") for p in parts)


def with_query(path: str, query: Optional[Query]) -> str:
    items = []
    for key, value in (query or {}).items():
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v is None or v is False:
                continue
            items.append((key, "true" if v is True else str(v)))
    return path + ("?" + urllib.parse.urlencode(items) if items else "")


class Transport:
    def __init__(self, connection: Connection, timeout: float = READ_TIMEOUT_S) -> None:
        self.connection = connection
        self.timeout = timeout
        parsed = urllib.parse.urlsplit(connection.url)
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname or "127.0.0.1"
        self._port = parsed.port
        self._ssl: Optional[ssl.SSLContext] = None
        if self._https:
            self._ssl = ssl.create_default_context(cafile=connection.cacert or None)
            # A certificate `tfctl login` pinned may be the anchor though not
            # a root, as tfctl allows (X509_V_FLAG_PARTIAL_CHAIN).
            self._ssl.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        self._local = threading.local()
        self.munge_error = ""  # why the last request went without a MUNGE credential

    def _new_connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _headers(self, method: str, path: str, body: Optional[bytes]) -> Dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "tfslurm-python"}
        self.munge_error = ""
        if self.connection.token:
            headers["Authorization"] = "Bearer " + self.connection.token
        else:
            try:
                headers["Authorization"] = "MUNGE " + _munge.encode(
                    _munge.payload(method, path), self.connection.munge_socket)
            except _munge.MungeError as e:
                self.munge_error = str(e)
        if body is not None:
            headers["Content-Type"] = "application/json"
        if method == "POST" and body is None:
            headers["Content-Length"] = "0"  # the service refuses a POST with neither
        return headers

    def _unreachable(self, error: BaseException) -> ServiceUnreachable:
        c = self.connection
        origin = "the default" if c.url_origin == "default" else "from " + c.url_origin
        if isinstance(error, ConnectionRefusedError):
            what = "could not connect (connection refused)"
        elif isinstance(error, socket.timeout):
            what = "timed out"
        elif isinstance(error, ssl.SSLCertVerificationError):
            against = (f"the CA file {c.cacert} (from {c.cacert_origin})" if c.cacert
                       else "this machine's trust store")
            return ServiceUnreachable(
                f"cannot verify tfslurmd at {c.url}: {error.verify_message}. Its certificate was "
                f"checked against {against}; give the service's CA as cacert=, TFSLURM_CACERT or "
                "`cacert = ...` in ~/.config/tfslurm/config (`tfctl login` pins it)")
        elif isinstance(error, ssl.SSLError):
            what = f"TLS failed ({error})" + ("" if c.cacert else "; give the service's CA file as cacert=")
        else:
            what = f"no complete answer ({type(error).__name__}: {error})"
        return ServiceUnreachable(
            f"cannot reach tfslurmd at {c.url} ({origin}): {what}. Is the service running there? "
            "Set the URL with url=, TFSLURM_URL or `url = ...` in ~/.config/tfslurm/config.")

    def _error(self, status: int, body: bytes) -> ServiceError:
        error = error_from_answer(status, body, self.connection.url)
        if status == 401:
            c = self.connection
            if c.token:
                error.message += f" (the token came from {c.token_origin})"
            elif self.munge_error and "MUNGE" in error.message:
                error.message += (f" (no token is set, and {self.munge_error}; set "
                                  "TFSLURM_MUNGE_SOCKET, or give a token)")
            error.args = (error.message,)
        return error

    def request(self, method: str, path: str, body: Any = None, *,
                query: Optional[Query] = None) -> Tuple[int, bytes, Dict[str, str]]:
        """One request; the status, body and headers of a 2xx answer. Raises
        ServiceError for an error answer, ServiceUnreachable for none."""
        target = with_query(path, query)
        data = None if body is None else json.dumps(body).encode()
        reuse = method == "GET"
        for fresh in ((False, True) if reuse else (True,)):
            headers = self._headers(method, path, data)  # a MUNGE credential is used once
            conn = self._connection(fresh) if reuse else self._new_connection(self.timeout)
            try:
                conn.request(method, target, body=data, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                answer_headers = {k.lower(): v for k, v in response.getheaders()}
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                conn.close()
                if reuse and not fresh:
                    continue  # a kept-alive connection the server closed: once more, anew
                raise self._unreachable(e) from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise self._unreachable(e) from None
            finally:
                if not reuse:
                    conn.close()
        if not 200 <= response.status < 300:
            raise self._error(response.status, payload)
        return response.status, payload, answer_headers

    def _connection(self, fresh: bool) -> http.client.HTTPConnection:
        conn: Optional[http.client.HTTPConnection] = getattr(self._local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            conn = self._new_connection(self.timeout)
            self._local.conn = conn
        return conn

    def json(self, method: str, path: str, body: Any = None, *,
             query: Optional[Query] = None) -> Any:
        _, payload, _ = self.request(method, path, body, query=query)
        try:
            return json.loads(payload)
        except ValueError:
            raise ProtocolError(f"{self.connection.url}{path} answered without a JSON body; "
                                "is this tfslurmd?") from None

    def text(self, path: str, *, query: Optional[Query] = None) -> Tuple[str, Dict[str, str]]:
        _, payload, headers = self.request("GET", path, query=query)
        return payload.decode("utf-8", "backslashreplace"), headers

    @contextmanager
    def stream(self, path: str, query: Optional[Query] = None
               ) -> Iterator[http.client.HTTPResponse]:
        """A GET whose body is read as it comes (logs follow), on a connection of its own."""
        headers = self._headers("GET", path, None)
        conn = self._new_connection(FOLLOW_READ_TIMEOUT_S)
        try:
            try:
                conn.request("GET", with_query(path, query), headers=headers)
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise self._unreachable(e) from None
            if not 200 <= response.status < 300:
                raise self._error(response.status, response.read())
            yield response
        finally:
            conn.close()
