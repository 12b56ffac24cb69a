"""Watch a sealed container for lookups and connection attempts beyond it, and count them.

A container with network `none` has only a loopback interface, so a lookup or a connect to any
outside address fails at once inside the kernel and leaves no trace. To see them, the host
(as root) steps into the container's network namespace and routes every outside address to
loopback there: the attempt then becomes a packet on `lo`, where a raw socket sees it, and
goes nowhere (the namespace has no other interface and does not forward). The nameservers of
the container's resolv.conf are put on `lo` with a stub that logs each query and answers
NXDOMAIN, so a resolver fails as fast as before. Connections within loopback (the relay to the
gate, an agent's own local server) are the container's own business and are not counted.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import select
import socket
import struct
import subprocess
import threading

from pydantic import BaseModel, Field

CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
MAX_RECORDED = 200  # an agent that hammers the network must not grow the record without bound


class OutsideAttempts(BaseModel):
    """run-info's record of what the agent tried to reach beyond the gate."""

    observed: bool = Field(description="whether the container's network was watched at all (needs root on the host)")
    reason: str | None = Field(None, description="why it was not watched, when it was not")
    dns_queries: list[str] = Field(default_factory=list, description="distinct names looked up, in order (first 200)")
    connects: list[str] = Field(default_factory=list,
                                description="outside destinations tried, 'tcp 1.2.3.4:443' or 'udp ...' (first 200)")


def _in_netns(pid: int, fn):
    """Run fn() on a thread that has entered the network namespace of process `pid`; return its result."""
    out: dict = {}

    def body():
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns failed")
            finally:
                os.close(fd)
            out["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=body, name="egress-netns")
    thread.start()
    thread.join(30)
    if "error" in out:
        raise out["error"]
    if "value" not in out:
        raise OSError("entering the container's network namespace did not finish")
    return out["value"]


def _nameservers(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/root/etc/resolv.conf", "rb") as f:
            text = f.read(65536).decode(errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                addr = ipaddress.ip_address(parts[1].split("%")[0])
            except ValueError:
                continue
            if not addr.is_loopback:
                found.append(str(addr))
    return found[:3]


def _qname(packet: bytes) -> str:
    labels, i = [], 12
    while i < len(packet) and packet[i] and len(labels) < 64:
        n = packet[i]
        labels.append(packet[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    return ".".join(labels) or "?"


def _nxdomain(query: bytes) -> bytes:
    if len(query) < 12:
        return b""
    flags = 0x8000 | (query[2] & 0x79) << 8 | 0x0080 | 3  # response, opcode+RD kept, RA, NXDOMAIN
    return query[:2] + struct.pack("!H", flags) + query[4:6] + b"\0\0\0\0\0\0" + query[12:]


class EgressWatch:
    """Watches one container from start to stop; `stop()` returns what it saw."""

    def __init__(self, pid: int):
        self.pid = pid
        self.result = OutsideAttempts(observed=False)
        self._seen: set = set()
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def start(cls, pid: int | None) -> "EgressWatch":
        watch = cls(pid or 0)
        if not pid:
            watch.result.reason = "the container's process is not known"
            return watch
        if os.geteuid() != 0:
            watch.result.reason = "watching the container's network needs root on the host"
            return watch
        try:
            watch._setup()
        except (OSError, subprocess.SubprocessError) as exc:
            watch._close()
            watch.result.reason = f"could not watch the container's network: {exc}"
            return watch
        watch.result.observed = True
        watch._thread = threading.Thread(target=watch._loop, name="egress-watch", daemon=True)
        watch._thread.start()
        return watch

    def _setup(self) -> None:
        servers = _nameservers(self.pid)
        netns = ["nsenter", f"--net=/proc/{self.pid}/ns/net", "ip"]
        steps = [["route", "replace", "default", "dev", "lo"]]
        steps += [["addr", "add", f"{s}/{32 if ':' not in s else 128}", "dev", "lo"] for s in servers]
        for step in steps:
            subprocess.run(netns + step, check=True, capture_output=True, timeout=20)
        # IPv6 may be off in the container; then there is nothing to route.
        subprocess.run(netns + ["-6", "route", "replace", "default", "dev", "lo"], capture_output=True, timeout=20)

        def sockets():
            made = [socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))]
            made[0].bind(("lo", 0))
            for server in servers:
                family = socket.AF_INET6 if ":" in server else socket.AF_INET
                stub = socket.socket(family, socket.SOCK_DGRAM)
                stub.bind((server, 53))
                made.append(stub)
            return made

        self._socks = _in_netns(self.pid, sockets)

    def _note(self, kind: str, value: str, key) -> None:
        if key in self._seen:
            return
        self._seen.add(key)
        target = self.result.dns_queries if kind == "dns" else self.result.connects
        if len(target) < MAX_RECORDED:
            target.append(value)

    def _loop(self) -> None:
        stubs = self._socks[1:]  # [0] is the packet sniffer
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select(self._socks, [], [], 0.2)
            except (OSError, ValueError):
                return
            for sock in ready:
                try:
                    data, addr = sock.recvfrom(65535)
                except OSError:
                    continue
                if sock in stubs:
                    name = _qname(data)
                    self._note("dns", name, ("dns", name))
                    try:
                        sock.sendto(_nxdomain(data), addr)
                    except OSError:
                        pass
                elif addr[2] != PACKET_OUTGOING:
                    self._packet(data[14:])

    def _packet(self, ip: bytes) -> None:
        """Count a SYN or a datagram to an address outside loopback (DNS is counted by the stub)."""
        if len(ip) < 20:
            return
        version = ip[0] >> 4
        if version == 4:
            proto, dst, payload = ip[9], ipaddress.ip_address(ip[16:20]), ip[(ip[0] & 0xF) * 4:]
        elif version == 6 and len(ip) >= 40:
            proto, dst, payload = ip[6], ipaddress.ip_address(ip[24:40]), ip[40:]
        else:
            return
        if dst.is_loopback or len(payload) < 4:
            return
        sport, dport = struct.unpack("!HH", payload[:4])
        if proto == 6 and len(payload) >= 14:
            flags = payload[13]
            if flags & 0x02 and not flags & 0x10:  # SYN without ACK: a connection attempt
                self._note("connect", f"tcp {dst}:{dport}", ("tcp", str(dst), dport, sport))
        elif proto == 17 and dport != 53 and sport != 53:  # the stub's own answers are not attempts
            self._note("connect", f"udp {dst}:{dport}", ("udp", str(dst), dport, sport))

    def _close(self) -> None:
        for sock in self._socks:
            try:
                sock.close()
            except OSError:
                pass
        self._socks = []

    def stop(self) -> OutsideAttempts:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._close()
        return self.result
