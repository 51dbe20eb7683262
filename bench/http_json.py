"""The JSON-over-HTTP call the bench/*.py scripts make to tfslurmd's REST API
(standard library only: the benchmarks run with Debian's python3 as is)."""
import json
import urllib.error
import urllib.request


def http(method, url, body=None, timeout=30):
    """(status, decoded JSON body or None); an HTTP error status is returned,
    not raised."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
