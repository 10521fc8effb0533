"""Hadoop's token storage format and token URL form, as Hadoop writes them."""

from __future__ import annotations

import base64

import pytest

from tony_airflow.yarn.tokens import (
    HDFS_DELEGATION_KIND,
    RM_DELEGATION_KIND,
    HadoopToken,
    TokenFileError,
    _Reader,
    _vint,
    delegation_identifier,
    find_token,
    from_url_string,
    read_token_file,
    write_token_file,
)

# A real HDFS delegation token in URL form, as `GETDELEGATIONTOKEN` of the secure local cluster answered it.
REAL = ("HAAEcm9vdAR5YXJuAIoBoglWM7KKAaItYreyCwQUn83CtU-fVv2oWl0GjM0fAiHHXKgSV0VCSERGUyBkZWxlZ2F0aW9uDzEy"
        "Ny4wLjAuMTo2MDkyOQ")


@pytest.mark.parametrize("value", [0, 1, 127, -112, 128, 255, 256, 65535, 70000, 2**31 - 1, 2**40])
def test_vlong_round_trips_hadoop_writable_utils(value):
    assert _Reader(_vint(value)).vlong() == value


def test_negative_vlongs_read_as_hadoop_writes_them():
    # WritableUtils.writeVLong(-113) = 0x87 0x70 ; (-1000) = 0x86 0x03 0xe7
    assert _Reader(bytes([0x87, 0x70])).vlong() == -113
    assert _Reader(bytes([0x86, 0x03, 0xE7])).vlong() == -1000


def test_url_string_is_hadoops_encoding_of_the_same_token():
    token = from_url_string(REAL)
    assert token.kind == "WEBHDFS delegation" and token.service == "127.0.0.1:60929"
    assert token.url_string() == REAL  # byte-for-byte, padding dropped as Token.encodeToUrlString does
    relabeled = from_url_string(REAL, kind=HDFS_DELEGATION_KIND, service="127.0.0.1:8020")
    assert relabeled.identifier == token.identifier and relabeled.password == token.password
    assert relabeled.kind == HDFS_DELEGATION_KIND and relabeled.service == "127.0.0.1:8020"


def test_token_file_round_trip_and_lookup(tmp_path, monkeypatch):
    tokens = [HadoopToken("a", b"\x01" * 300, b"pw", HDFS_DELEGATION_KIND, "127.0.0.1:1"),
              HadoopToken("b", b"id", b"p" * 20, RM_DELEGATION_KIND, "127.0.0.1:2")]
    path = tmp_path / "job.tokens"
    write_token_file(path, tokens)
    assert path.read_bytes()[:5] == b"HDTS\x00" and oct(path.stat().st_mode)[-3:] == "600"
    assert read_token_file(path) == tokens
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    assert find_token(RM_DELEGATION_KIND) == tokens[1]
    assert find_token("NOPE") is None
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(tmp_path / "missing"))
    assert find_token(HDFS_DELEGATION_KIND) is None


def _pb(number: int, payload: bytes) -> bytes:
    return bytes([(number << 3) | 2]) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_protobuf_token_files_are_read_too(tmp_path):
    token = _pb(1, b"ident") + _pb(2, b"secret") + _pb(3, HDFS_DELEGATION_KIND.encode()) + _pb(4, b"127.0.0.1:9")
    entry = _pb(1, b"alias") + _pb(2, token)
    path = tmp_path / "pb.tokens"
    path.write_bytes(b"HDTS\x01" + _pb(1, entry) + _pb(2, _pb(1, b"k") + _pb(3, b"v")))
    assert read_token_file(path) == [HadoopToken("alias", b"ident", b"secret", HDFS_DELEGATION_KIND, "127.0.0.1:9")]


@pytest.mark.parametrize("content, message", [
    (b"", "no HDTS header"), (b"NOPE\x00", "no HDTS header"), (b"HDTS\x07", "version 7"),
    (b"HDTS\x00\x01\x05ab", "truncated"),
])
def test_malformed_token_files_are_refused(tmp_path, content, message):
    path = tmp_path / "bad"
    path.write_bytes(content)
    with pytest.raises(TokenFileError, match=message):
        read_token_file(path)


def test_a_token_never_shows_its_password():
    token = HadoopToken("a", b"id", b"hunter2", HDFS_DELEGATION_KIND, "s")
    assert "hunter2" not in repr(token) and base64.b64encode(b"hunter2").decode() not in repr(token)


def test_a_token_file_is_private_even_over_a_readable_file_and_never_through_a_link(tmp_path):
    """Issue #30 item 8: `tony tokens --out` over a 0644 file left the tokens readable by every user."""
    import os
    import stat

    tokens = [HadoopToken(alias="a", identifier=b"i", password=b"p", kind="HDFS_DELEGATION_TOKEN", service="s")]
    path = tmp_path / "tokens"
    path.write_bytes(b"old")
    path.chmod(0o644)
    write_token_file(path, tokens)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    victim = tmp_path / "elsewhere"
    victim.write_bytes(b"keep")
    link = tmp_path / "link"
    link.symlink_to(victim)
    with pytest.raises(OSError):
        write_token_file(link, tokens)
    assert victim.read_bytes() == b"keep" and os.path.islink(link)


def test_a_real_hdfs_token_says_whose_it_is_and_until_when_yarn_can_renew_it():
    ident = delegation_identifier(from_url_string(REAL))
    assert (ident.owner, ident.renewer, ident.real_user) == ("root", "yarn", "")
    assert ident.max_ms - ident.issue_ms == 7 * 24 * 3600 * 1000  # dfs.namenode.delegation.token.max-lifetime


def test_an_identifier_of_another_version_is_refused_by_name():
    with pytest.raises(TokenFileError, match="identifier version 1; allowed: 0"):
        delegation_identifier(HadoopToken("a", b"\x01rest", b"pw", HDFS_DELEGATION_KIND, "s"))
