"""Hadoop delegation tokens from `HADOOP_TOKEN_FILE_LOCATION` (Hadoop's token storage format).

YARN writes the tokens of an application into every container, and Azkaban and Oozie
hand them to their jobs the same way. A task on a Kerberos cluster has no keytab: it
reads HDFS over WebHDFS with the HDFS delegation token (`delegation=` parameter), in
the URL form Hadoop's `Token.encodeToUrlString` gives.

The file is `HDTS`, a version byte, then the credentials: version 0 is Hadoop's
Writable form (what `Credentials.writeTokenStorageToStream` writes by default),
version 1 a `CredentialsProto` message.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

TOKEN_FILE_ENV = "HADOOP_TOKEN_FILE_LOCATION"
HDFS_DELEGATION_KIND = "HDFS_DELEGATION_TOKEN"
RM_DELEGATION_KIND = "RM_DELEGATION_TOKEN"
_MAGIC = b"HDTS"


class TokenFileError(ValueError):
    """The file is not in Hadoop's token storage format."""


@dataclass(frozen=True)
class HadoopToken:
    alias: str
    identifier: bytes
    password: bytes
    kind: str
    service: str

    def url_string(self) -> str:
        """Hadoop's `Token.encodeToUrlString`: the Writable form, base64url without padding."""
        raw = (_vint(len(self.identifier)) + self.identifier + _vint(len(self.password)) + self.password
               + _text(self.kind) + _text(self.service))
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def __repr__(self) -> str:  # never the password, never the identifier
        return f"HadoopToken(kind={self.kind!r}, service={self.service!r})"


@dataclass(frozen=True)
class DelegationIdentifier:
    """What a delegation token's identifier says (Hadoop's AbstractDelegationTokenIdentifier): whose it
    is, who may renew it, and until when it can be renewed at all (`max_ms`, the token's max lifetime)."""

    owner: str
    renewer: str
    real_user: str
    issue_ms: int
    max_ms: int


def delegation_identifier(token: HadoopToken) -> DelegationIdentifier:
    """The identifier of an HDFS or RM delegation token, in its Writable form: a version byte (0), owner,
    renewer and real user as Text, then issue and max dates as VLongs (ms since the epoch)."""
    reader = _Reader(token.identifier)
    version = reader.take(1)[0]
    if version != 0:
        raise TokenFileError(f"{token.kind}: identifier version {version}; allowed: 0 (Writable)")
    owner, renewer, real_user = reader.text(), reader.text(), reader.text()
    return DelegationIdentifier(owner, renewer, real_user, reader.vlong(), reader.vlong())


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TokenFileError("truncated token file")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def vlong(self) -> int:
        """Hadoop's WritableUtils.readVLong."""
        first = int.from_bytes(self.take(1), "big", signed=True)
        if first >= -112:
            return first
        size = (-119 - first) if first < -120 else (-111 - first)
        value = int.from_bytes(self.take(size - 1), "big")
        negative = first < -120
        return ~value if negative else value

    def text(self) -> str:
        return self.take(self.vlong()).decode("utf-8", errors="replace")

    def blob(self) -> bytes:
        return self.take(self.vlong())

    def varint(self) -> int:
        """Protocol Buffers' base-128 varint."""
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7


def _vint(value: int) -> bytes:
    """Hadoop's WritableUtils.writeVLong (lengths are never negative here)."""
    if -112 <= value <= 127:
        return value.to_bytes(1, "big", signed=True)
    body = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return (-112 - len(body)).to_bytes(1, "big", signed=True) + body


def _text(value: str) -> bytes:
    raw = value.encode()
    return _vint(len(raw)) + raw


def _writable(reader: _Reader) -> list[HadoopToken]:
    tokens = []
    for _ in range(reader.vlong()):
        alias = reader.text()
        identifier, password = reader.blob(), reader.blob()
        tokens.append(HadoopToken(alias, identifier, password, reader.text(), reader.text()))
    return tokens  # the secret keys that follow are not ours to read


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    reader, out = _Reader(data), []
    while reader.pos < len(data):
        key = reader.varint()
        if key & 7 != 2:
            raise TokenFileError("unexpected protobuf field type in token file")
        out.append((key >> 3, reader.take(reader.varint())))
    return out


def _protobuf(reader: _Reader) -> list[HadoopToken]:
    tokens = []
    for number, entry in _fields(reader.data[reader.pos:]):
        if number != 1:  # 1: tokens (CredentialsKVProto); 2: secrets
            continue
        kv = dict(_fields(entry))
        tok = dict(_fields(kv.get(2, b"")))
        tokens.append(HadoopToken(kv.get(1, b"").decode(), tok.get(1, b""), tok.get(2, b""),
                                  tok.get(3, b"").decode(), tok.get(4, b"").decode()))
    return tokens


def read_token_file(path: str | Path) -> list[HadoopToken]:
    data = Path(path).read_bytes()
    if not data.startswith(_MAGIC) or len(data) < 5:
        raise TokenFileError(f"{path}: not a Hadoop token file (no HDTS header)")
    version, reader = data[4], _Reader(data)
    reader.pos = 5
    if version == 0:
        return _writable(reader)
    if version == 1:
        return _protobuf(reader)
    raise TokenFileError(f"{path}: token storage version {version}; allowed: 0 (Writable), 1 (protobuf)")


def token_file() -> Path | None:
    """The token file this process was given, if any."""
    location = os.environ.get(TOKEN_FILE_ENV)
    return Path(location) if location and Path(location).is_file() else None


def find_token(kind: str, path: str | Path | None = None) -> HadoopToken | None:
    """The first token of `kind` in the token file (the given one, else `HADOOP_TOKEN_FILE_LOCATION`)."""
    where = Path(path) if path else token_file()
    if where is None:
        return None
    for token in read_token_file(where):
        if token.kind == kind:
            return token
    return None


def from_url_string(url_string: str, alias: str = "", kind: str | None = None,
                    service: str | None = None) -> HadoopToken:
    """A token in Hadoop's URL form (what WebHDFS and the RM REST API hand out), kind and service
    replaceable: RPC clients pick a token by kind and by the service address they connect to."""
    reader = _Reader(base64.urlsafe_b64decode(url_string + "=" * (-len(url_string) % 4)))
    identifier, password = reader.blob(), reader.blob()
    token_kind, token_service = reader.text(), reader.text()
    return HadoopToken(alias or (service if service is not None else token_service), identifier, password,
                       kind if kind is not None else token_kind, service if service is not None else token_service)


def write_token_file(path: str | Path, tokens: list[HadoopToken]) -> None:
    """Hadoop's token storage format, version 0 (Writable), readable by every Hadoop 2.x/3.x."""
    body = bytearray(_MAGIC + b"\x00" + _vint(len(tokens)))
    for token in tokens:
        body += _text(token.alias)
        body += _vint(len(token.identifier)) + token.identifier + _vint(len(token.password)) + token.password
        body += _text(token.kind) + _text(token.service)
    body += _vint(0)  # no secret keys
    # Private whatever was there: never through a symbolic link (ELOOP), and 0600 before a byte is written
    # (an existing file keeps its mode under open(); fchmod fixes it, or fails for another user's file).
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600), "wb") as out:
        os.fchmod(out.fileno(), 0o600)
        out.truncate(0)
        out.write(bytes(body))
