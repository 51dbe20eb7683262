"""Checkpoints in TensorFlow's on-disk layout.

    MODEL_DIR/
      checkpoint                           state file (text protobuf, as tf.train writes it):
                                             model_checkpoint_path: "model.ckpt-1200"
                                             all_model_checkpoint_paths: "model.ckpt-1000"
                                             all_model_checkpoint_paths: "model.ckpt-1200"
      model.ckpt-1200.index                metadata: JSON (step, size, checksum of the data)
      model.ckpt-1200.data-00000-of-00001  parameters: little-endian float64

The names and the state file are TensorFlow's, so tools that look for "the
latest checkpoint" (tfslurm's agent and service, tf.train.latest_checkpoint)
find ours; the contents of .index and .data are this example's own encoding.

Only one task writes (the chief). Every file is written under a temporary name
and renamed into place, and the state file is replaced last, so a reader that
follows it never meets a half-written checkpoint, whenever the writer dies.
"""

from __future__ import annotations

import array
import glob
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass

PREFIX = "model.ckpt"
STATE_FILE = "checkpoint"
INDEX_SUFFIX = ".index"
DATA_SUFFIX = ".data-00000-of-00001"
FORMAT = "linear_ps/float64-le/v1"
KEEP = 5

_STATE_LINE = re.compile(r'^\s*(model_checkpoint_path|all_model_checkpoint_paths)\s*:\s*"(.*)"\s*$')


@dataclass(frozen=True)
class Checkpoint:
    step: int
    params: list[float]
    path: str  # the prefix, e.g. /models/exp1/model.ckpt-1200


class CorruptCheckpoint(Exception):
    """A checkpoint's files are missing, truncated or do not match its index."""


def save(model_dir: str, step: int, params: list[float], keep: int = KEEP) -> str:
    """Writes model.ckpt-<step>, makes it the latest, keeps the newest `keep`.
    Returns the checkpoint's path prefix."""
    os.makedirs(model_dir, exist_ok=True)
    model_dir = os.path.abspath(model_dir)
    prefix = os.path.join(model_dir, f"{PREFIX}-{step}")

    data = _encode(params)
    index = {
        "format": FORMAT,
        "global_step": step,
        "num_params": len(params),
        "data_sha256": hashlib.sha256(data).hexdigest(),
    }
    _write_atomically(prefix + DATA_SUFFIX, data)
    _write_atomically(prefix + INDEX_SUFFIX, json.dumps(index).encode() + b"\n")

    _, previous = read_state(model_dir)
    # Saving the same step twice (a signal right after a periodic save) must
    # not list it twice.
    kept = [p for p in previous if p != prefix][-(keep - 1):] if keep > 1 else []
    kept.append(prefix)
    _write_atomically(os.path.join(model_dir, STATE_FILE), _render_state(model_dir, kept))
    _fsync_dir(model_dir)

    for old in previous:
        if old not in kept:
            _remove_files(old)
    return prefix


def read_state(model_dir: str) -> tuple[str | None, list[str]]:
    """(latest prefix, all prefixes oldest first) from the state file, as
    absolute paths; (None, []) when there is no state file yet. TensorFlow
    writes paths relative to MODEL_DIR or absolute: both are accepted."""
    try:
        with open(os.path.join(model_dir, STATE_FILE), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None, []
    latest = None
    all_paths: list[str] = []
    for line in lines:
        match = _STATE_LINE.match(line)
        if not match:
            continue  # e.g. all_model_checkpoint_timestamps, written by newer TF
        path = os.path.join(os.path.abspath(model_dir), match.group(2))
        if match.group(1) == "model_checkpoint_path":
            latest = path
        else:
            all_paths.append(path)
    if latest is not None and latest not in all_paths:
        all_paths.append(latest)
    return latest, all_paths


def load(prefix: str) -> Checkpoint:
    try:
        with open(prefix + INDEX_SUFFIX, "rb") as f:
            index = json.loads(f.read())
        with open(prefix + DATA_SUFFIX, "rb") as f:
            data = f.read()
    except (OSError, ValueError) as err:
        raise CorruptCheckpoint(f"{prefix}: {err}") from err
    if index.get("format") != FORMAT:
        raise CorruptCheckpoint(f"{prefix}: format {index.get('format')!r}, expected {FORMAT!r}")
    if hashlib.sha256(data).hexdigest() != index.get("data_sha256"):
        raise CorruptCheckpoint(f"{prefix}{DATA_SUFFIX}: checksum does not match the index")
    params = _decode(data)
    if len(params) != index.get("num_params"):
        raise CorruptCheckpoint(f"{prefix}: {len(params)} values, index says {index.get('num_params')}")
    return Checkpoint(step=int(index["global_step"]), params=params, path=prefix)


def load_latest(model_dir: str) -> Checkpoint | None:
    """The newest loadable checkpoint, or None when MODEL_DIR has none yet.

    A damaged latest checkpoint falls back to the previous ones (with a
    warning), like restoring from an older TensorFlow checkpoint by hand. If
    the state file lists checkpoints but none loads, that is an error: starting
    from scratch would silently throw the training away.
    """
    latest, all_paths = read_state(model_dir)
    if latest is None:
        return None
    candidates = [latest] + [p for p in reversed(all_paths) if p != latest]
    problems = []
    for prefix in candidates:
        try:
            return load(prefix)
        except CorruptCheckpoint as err:
            problems.append(str(err))
            print(f"linear_ps: warning: skipping checkpoint: {err}", file=sys.stderr, flush=True)
    raise CorruptCheckpoint(f"no loadable checkpoint in {model_dir}: " + "; ".join(problems))


def _encode(params: list[float]) -> bytes:
    values = array.array("d", params)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


def _decode(data: bytes) -> list[float]:
    if len(data) % 8:
        raise CorruptCheckpoint(f"data is {len(data)} bytes, not a whole number of float64")
    values = array.array("d")
    values.frombytes(data)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def _render_state(model_dir: str, prefixes: list[str]) -> bytes:
    def name(prefix: str) -> str:
        return os.path.relpath(prefix, model_dir) if os.path.dirname(prefix) == model_dir else prefix

    lines = [f'model_checkpoint_path: "{name(prefixes[-1])}"']
    lines += [f'all_model_checkpoint_paths: "{name(p)}"' for p in prefixes]
    return ("\n".join(lines) + "\n").encode()


def _write_atomically(path: str, content: bytes) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: str) -> None:
    # Makes the renames themselves durable, not only the files' contents.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_files(prefix: str) -> None:
    for path in [prefix + INDEX_SUFFIX] + glob.glob(glob.escape(prefix) + ".data-*"):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
