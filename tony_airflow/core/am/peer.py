"""Who is at the other end of a TCP connection made on this host: the owner of the peer's socket, as the
kernel lists it in /proc/net/tcp and tcp6 (what identd answers from). The AM's pages use it to admit, on
its own host, only processes of its own user: skein's web UI (behind the RM's proxy and its view ACLs,
itself admitting only the proxy's addresses through Hadoop's AmIpFilter) and the job owner's own shells,
and not the containers other users run on the same NodeManager."""

from __future__ import annotations

import ipaddress
from pathlib import Path

TABLES = ("tcp", "tcp6")


def socket_owner(peer: tuple[str, int], local: tuple[str, int], proc_net: Path = Path("/proc/net")) -> int | None:
    """The uid owning the socket at `peer` connected to `local` (both on this host); None: not listed
    (another network namespace, or gone); raises OSError when the tables cannot be read."""
    wanted = {(_hex(peer[0], v6), f"{peer[1]:04X}", _hex(local[0], v6), f"{local[1]:04X}")
              for v6 in (False, True) if _hex(peer[0], v6) and _hex(local[0], v6)}
    for table in TABLES:
        with open(proc_net / table) as fh:
            next(fh, None)  # the header
            for line in fh:
                fields = line.split()
                if len(fields) < 8:
                    continue
                src, _, src_port = fields[1].partition(":")
                dst, _, dst_port = fields[2].partition(":")
                if (src, src_port, dst, dst_port) in wanted:
                    return int(fields[7])
    return None


def _hex(address: str, v6: bool) -> str:
    """The address as /proc/net/tcp{,6} spell it: each 32-bit word in the host's (little-endian) order.
    An IPv4 address in tcp6 is IPv4-mapped; an IPv6 address has no tcp form ('' then)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if v6 and ip.version == 4:
        ip = ipaddress.IPv6Address(f"::ffff:{ip}")
    elif not v6 and ip.version == 6:
        if ip.ipv4_mapped is None:
            return ""
        ip = ip.ipv4_mapped
    packed = ip.packed
    return "".join(packed[i:i + 4][::-1].hex().upper() for i in range(0, len(packed), 4))
