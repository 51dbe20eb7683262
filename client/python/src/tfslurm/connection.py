"""Where the client finds tfslurmd and how it proves who it is, read from
the same places as tfctl (client/connection.h, docs/tfctl.md):

  the URL    the ``url`` argument, else TFSLURM_URL, else the config file's
             ``url``, else http://127.0.0.1:8080
  the token  the ``token`` argument, else TFSLURM_TOKEN, else the config
             file's ``token``; with none, a MUNGE credential is made per
             request by the local munged (TFSLURM_MUNGE_SOCKET, else
             libmunge's default socket), as tfctl does
  the CA     for an https:// URL: the ``cacert`` argument, else
             TFSLURM_CACERT, else the config file's ``cacert`` (which
             `tfctl login` writes, also when it pins a certificate), else
             the system's trust store
  the file   $XDG_CONFIG_HOME/tfslurm/config, else ~/.config/tfslurm/config:
             ``url = ...``, ``cacert = ...`` and ``token = ...`` lines (#
             starts a comment), or the same keys as YAML (``url: ...``)

Empty values count as unset. An unreadable or malformed config file, or a
URL that is not http(s)://HOST[:PORT], is an error naming where the bad
value came from.

TLS: an https:// URL is verified against the CA file from those places, as
tfctl verifies it (client/connection.h).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

from .errors import TfslurmError

DEFAULT_URL = "http://127.0.0.1:8080"

# Each setting: its environment variable and its config file key, read in
# that order after the argument. A new setting is one line here.
_SOURCES: Dict[str, Tuple[str, str]] = {
    "url": ("TFSLURM_URL", "url"),
    "token": ("TFSLURM_TOKEN", "token"),
    "cacert": ("TFSLURM_CACERT", "cacert"),
}
_CONFIG_KEYS = tuple(key for _, key in _SOURCES.values())


class ConfigError(TfslurmError, ValueError):
    """A bad config file or URL, named with where it came from."""


@dataclass(frozen=True)
class Connection:
    """What a Client connects with. The token is never shown (repr)."""

    url: str
    token: str = field(default="", repr=False)
    url_origin: str = "default"  # "url=", "TFSLURM_URL", the config file's path, "default"
    token_origin: str = ""  # where the token came from; "" without one
    munge_socket: str = ""  # "" is libmunge's default (/run/munge/munge.socket.2)
    cacert: str = ""  # a CA file for an https:// service; "" is the system's trust store
    cacert_origin: str = ""  # "cacert=", "TFSLURM_CACERT", the config file's path; "" without one


def default_config_path(env: Mapping[str, str]) -> str:
    """$XDG_CONFIG_HOME/tfslurm/config, else $HOME/.config/tfslurm/config; "" with neither."""
    if env.get("XDG_CONFIG_HOME"):
        return os.path.join(env["XDG_CONFIG_HOME"], "tfslurm", "config")
    if env.get("HOME"):
        return os.path.join(env["HOME"], ".config", "tfslurm", "config")
    return ""


_KEY_VALUE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*")
_YAML_LINE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:(?:\s+(.*?))?\s*")
_BLANK_OR_COMMENT = re.compile(r"\s*(#.*)?")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
        return value[1:-1]
    return value


def read_config_file(path: str) -> Dict[str, str]:
    """The settings of a config file; {} when there is none."""
    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the config file: {e}") from None
    # `key = value` lines; else flat YAML `key: value` lines, which is what a
    # config of two strings is. Anything else in YAML is refused here, with
    # the line, rather than read with a YAML library the client does not need.
    for pattern in (_KEY_VALUE, _YAML_LINE):
        settings: Dict[str, str] = {}
        for number, line in enumerate(lines, 1):
            if _BLANK_OR_COMMENT.fullmatch(line):
                continue
            m = pattern.fullmatch(line)
            if not m:
                break
            key, value = m.group(1), _unquote(m.group(2) or "")
            if key not in _CONFIG_KEYS:
                raise ConfigError(f"{path}:{number}: unknown key '{key}'; the known keys are "
                                  + ", ".join(_CONFIG_KEYS[:-1]) + " and " + _CONFIG_KEYS[-1])
            if value:
                settings[key] = value
        else:
            return settings
    raise ConfigError(f"{path}: must hold `url = ...`, `cacert = ...` and `token = ...` lines, "
                      "or `url: ...` and the like (YAML)")


_URL = re.compile(r"https?://[^/\s?#@]+")


def normalize_url(url: str, origin: str) -> str:
    """"http://host:8080/" -> "http://host:8080"; a path, a query or another
    scheme is refused, since every request path is appended to it."""
    url = url.rstrip("/")
    if not _URL.fullmatch(url):
        raise ConfigError(f"{origin}: '{url}' is not a service URL; expected http://HOST:PORT, "
                          f"e.g. {DEFAULT_URL}")
    return url


def resolve_connection(url: Optional[str] = None, token: Optional[str] = None, *,
                       cacert: Optional[str] = None, munge_socket: Optional[str] = None,
                       env: Optional[Mapping[str, str]] = None,
                       config_path: Optional[str] = None) -> Connection:
    """The Connection from the arguments, the environment and the config file."""
    env = os.environ if env is None else env
    path = default_config_path(env) if config_path is None else config_path
    config = read_config_file(path)

    def pick(name: str, given: Optional[str], argument: str) -> Tuple[str, str]:
        variable, key = _SOURCES[name]
        if given:
            return given, argument
        if env.get(variable):
            return env[variable], variable
        if config.get(key):
            return config[key], path
        return "", ""

    chosen_url, url_origin = pick("url", url, "url=")
    if not chosen_url:
        chosen_url, url_origin = DEFAULT_URL, "default"
    chosen_token, token_origin = pick("token", token, "token=")
    chosen_cacert, cacert_origin = pick("cacert", cacert, "cacert=")
    return Connection(url=normalize_url(chosen_url, url_origin), token=chosen_token,
                      url_origin=url_origin, token_origin=token_origin,
                      munge_socket=munge_socket or env.get("TFSLURM_MUNGE_SOCKET", ""),
                      cacert=chosen_cacert, cacert_origin=cacert_origin)
