"""MUNGE credentials, as tfctl sends them when it has no token.

The credential is made by the local munged through libmunge (ctypes: no
compiled extension, no dependency), so it proves this process's Unix uid.
Its payload binds it to one request, ``tfslurm/1 METHOD PATH`` (the path
without its query), which service/api/munge_auth.h checks, as tfctl's
client/tfslurm_client.cc makes it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Optional

_MUNGE_OPT_SOCKET = 8  # munge.h: MUNGE_OPT_SOCKET
_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_error = ""
_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None


class MungeError(Exception):
    """No credential: libmunge is missing, or munged did not make one (why)."""


def payload(method: str, path: str) -> bytes:
    return f"tfslurm/1 {method} {path.split('?', 1)[0]}".encode()


def _library() -> ctypes.CDLL:
    global _lib, _lib_error
    with _lock:
        if _lib is None and not _lib_error:
            name = ctypes.util.find_library("munge") or "libmunge.so.2"
            try:
                lib = ctypes.CDLL(name)
            except OSError as e:
                _lib_error = f"libmunge is not installed ({e})"
            else:
                lib.munge_ctx_create.restype = ctypes.c_void_p
                lib.munge_ctx_destroy.argtypes = [ctypes.c_void_p]
                lib.munge_ctx_strerror.restype = ctypes.c_char_p
                lib.munge_ctx_strerror.argtypes = [ctypes.c_void_p]
                lib.munge_strerror.restype = ctypes.c_char_p
                lib.munge_strerror.argtypes = [ctypes.c_int]
                lib.munge_encode.restype = ctypes.c_int
                lib.munge_encode.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                             ctypes.c_char_p, ctypes.c_int]
                _lib = lib
        if _lib is None:
            raise MungeError(_lib_error)
        return _lib


def encode(data: bytes, socket: str = "") -> str:
    """A credential carrying `data`, from munged at `socket` ("" for libmunge's default)."""
    lib = _library()
    where = f"at {socket}" if socket else "(libmunge's default socket)"
    ctx = lib.munge_ctx_create()
    if not ctx:
        raise MungeError("munge_ctx_create failed")
    cred = ctypes.c_void_p()
    try:
        if socket:
            err = lib.munge_ctx_set(ctypes.c_void_p(ctx), _MUNGE_OPT_SOCKET,
                                    ctypes.c_char_p(socket.encode()))
        else:
            err = 0
        if err == 0:
            err = lib.munge_encode(ctypes.byref(cred), ctx, data, len(data))
        if err != 0 or not cred.value:
            detail = lib.munge_ctx_strerror(ctx) or lib.munge_strerror(err) or b"unknown error"
            raise MungeError(f"munged {where} made no credential: {detail.decode(errors='replace')}")
        return ctypes.string_at(cred.value).decode("ascii")
    finally:
        if cred.value:
            _libc.free(cred.value)
        lib.munge_ctx_destroy(ctx)
