"""Where the client finds the service and its token: the same places as tfctl
(client/connection.h), in the same order."""
import pytest

from tfslurm.connection import (DEFAULT_URL, ConfigError, default_config_path, read_config_file,
                                resolve_connection)


def resolve(tmp_path, *, url=None, token=None, cacert=None, env=None, config=None):
    path = tmp_path / "config"
    if config is not None:
        path.write_text(config)
    return resolve_connection(url, token, cacert=cacert, env=env or {}, config_path=str(path))


def test_defaults_without_any_source(tmp_path):
    c = resolve(tmp_path)
    assert (c.url, c.url_origin, c.token, c.token_origin) == (DEFAULT_URL, "default", "", "")


def test_argument_then_environment_then_config_file(tmp_path):
    config = "url = http://from-file:1\ntoken = file-token\n"
    env = {"TFSLURM_URL": "http://from-env:2/", "TFSLURM_TOKEN": "env-token"}
    c = resolve(tmp_path, url="http://from-arg:3", token="arg-token", env=env, config=config)
    assert (c.url, c.url_origin, c.token, c.token_origin) == ("http://from-arg:3", "url=", "arg-token", "token=")
    c = resolve(tmp_path, env=env, config=config)
    assert (c.url, c.url_origin, c.token, c.token_origin) == ("http://from-env:2", "TFSLURM_URL", "env-token",
                                                              "TFSLURM_TOKEN")
    c = resolve(tmp_path, config=config)
    assert (c.url, c.token) == ("http://from-file:1", "file-token")
    assert c.url_origin == c.token_origin == str(tmp_path / "config")


def test_empty_values_count_as_unset(tmp_path):
    c = resolve(tmp_path, url="", env={"TFSLURM_URL": "", "TFSLURM_TOKEN": ""}, config="token =\n")
    assert (c.url, c.token) == (DEFAULT_URL, "")


def test_config_file_as_yaml_lines_with_quotes_and_comments(tmp_path):
    c = resolve(tmp_path, config="# mine\nurl: 'http://h:9'\ntoken: \"t\"\n")
    assert (c.url, c.token) == ("http://h:9", "t")


def test_config_file_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(ConfigError, match=r"config:2: unknown key 'tokn'; the known keys are url, token and cacert"):
        resolve(tmp_path, config="url = http://h:1\ntokn = x\n")
    with pytest.raises(ConfigError, match=r"must hold `url = \.\.\.`"):
        resolve(tmp_path, config="{url: x}\n")


def test_a_url_with_a_path_or_another_scheme_is_refused_naming_its_origin(tmp_path):
    with pytest.raises(ConfigError, match=r"TFSLURM_URL: 'http://h:1/api' is not a service URL"):
        resolve(tmp_path, env={"TFSLURM_URL": "http://h:1/api"})
    with pytest.raises(ConfigError, match=r"url=: 'ftp://h' is not a service URL"):
        resolve(tmp_path, url="ftp://h")
    assert resolve(tmp_path, url="https://h:8443").url == "https://h:8443"


def test_the_ca_file_comes_from_the_argument_then_the_environment_then_the_config_file(tmp_path):
    # As tfctl reads --cacert, TFSLURM_CACERT and `cacert = ...` (which
    # `tfctl login` writes when it pins a certificate).
    config = "url = https://h:8443\ncacert = /etc/site-ca.pem\n"
    c = resolve(tmp_path, config=config)
    assert (c.cacert, c.cacert_origin) == ("/etc/site-ca.pem", str(tmp_path / "config"))
    c = resolve(tmp_path, env={"TFSLURM_CACERT": "/env/ca.pem"}, config=config)
    assert (c.cacert, c.cacert_origin) == ("/env/ca.pem", "TFSLURM_CACERT")
    c = resolve(tmp_path, cacert="/arg/ca.pem", env={"TFSLURM_CACERT": "/env/ca.pem"}, config=config)
    assert (c.cacert, c.cacert_origin) == ("/arg/ca.pem", "cacert=")
    assert resolve(tmp_path, url="https://h:1", config="").cacert == "", "none: the system's trust store"


def test_the_token_is_never_shown(tmp_path):
    c = resolve(tmp_path, token="tfs_secret")
    assert "tfs_secret" not in repr(c)


def test_default_config_path_follows_xdg_then_home():
    assert default_config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == "/x/tfslurm/config"
    assert default_config_path({"HOME": "/h"}) == "/h/.config/tfslurm/config"
    assert default_config_path({}) == ""


def test_munge_socket_comes_from_the_environment(tmp_path):
    assert resolve(tmp_path, env={"TFSLURM_MUNGE_SOCKET": "/run/m.sock"}).munge_socket == "/run/m.sock"


def test_missing_config_file_is_fine(tmp_path):
    assert read_config_file(str(tmp_path / "absent")) == {}
