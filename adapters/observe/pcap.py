"""``groupcoord record --pcap FILE``: a packet capture (``tcpdump -w``, pcap or pcapng) turned
into the same observed trace the proxy writes, for brokers no proxy can be put in front of.

dpkt reads the packets (Ethernet, Linux cooked v1/v2, BSD loopback, raw IP; IPv4 and IPv6).
Each TCP connection to the broker's port is put back together per direction in sequence
order (segments out of order, retransmitted or overlapping are placed by their sequence
numbers, wrapping at 2^32), cut into Kafka frames and paired as the proxy pairs them
(``pairing``). A frame's time is that of the packet that completed it. A connection whose
start the capture missed cannot be cut into frames (where a frame begins is unknown): it is
counted, not read."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Iterator

import dpkt

from groupcoord.adapters.observe.pairing import (
    MalformedFrame,
    Pending,
    correlation_id_of,
    decode_response,
    metadata_record,
    note_request,
    pair_record,
)
from groupcoord.adapters.observe.trace import undecodable_text
from groupcoord.adapters.protocol import codec

MAX_FRAME_BYTES = 104_857_600
_WRAP = 1 << 32


class CaptureError(ValueError):
    """A file that is not a capture dpkt can read; the message names it."""


class _Direction:
    """One direction's bytes, in sequence order."""

    def __init__(self) -> None:
        self.next_seq: int | None = None
        self.early: dict[int, bytes] = {}  # segments ahead of the next expected byte
        self.buf = bytearray()
        self.missed_start = False

    def add(self, seq: int, data: bytes, syn: bool) -> None:
        if syn:
            self.next_seq = (seq + 1) % _WRAP
        if not data:
            return
        if self.next_seq is None:
            self.missed_start = True
            return
        self.early[seq] = max(self.early.get(seq, b""), data, key=len)
        progressed = True
        while progressed:
            progressed = False
            for s in list(self.early):
                ahead = (s - self.next_seq) % _WRAP
                if ahead >= _WRAP // 2:  # starts before the next byte: trim what we have
                    behind = _WRAP - ahead
                    chunk = self.early.pop(s)[behind:]
                elif ahead == 0:
                    chunk = self.early.pop(s)
                else:
                    continue
                if chunk:
                    self.buf += chunk
                    self.next_seq = (self.next_seq + len(chunk)) % _WRAP
                progressed = True

    def frames(self) -> Iterator[bytes]:
        while len(self.buf) >= 4:
            size = int.from_bytes(self.buf[:4], "big", signed=True)
            if not 0 <= size <= MAX_FRAME_BYTES:
                raise MalformedFrame(f"malformed frame: size {size}")
            if len(self.buf) < 4 + size:
                return
            frame = bytes(self.buf[4:4 + size])
            del self.buf[:4 + size]
            yield frame


class _Connection:
    def __init__(self, number: int) -> None:
        self.number = number
        self.to_broker = _Direction()
        self.to_client = _Direction()
        self.pending: dict[int, Pending] = {}
        self.last_us = 0
        self.broken: str | None = None


class CaptureReader:
    """The pairs of every connection to ``port`` in the capture at ``path``, with counts."""

    def __init__(self, path: str | Path, port: int) -> None:
        self.path, self.port = Path(path), port
        self.passed_through: dict[str, int] = {}
        self.undecoded_: dict[str, int] = {}
        self.data_plane_pairs: dict[str, int] = {}
        self.connections: dict[tuple, _Connection] = {}
        self.problems: list[str] = []

    def passed(self, api: str) -> None:
        self.passed_through[api] = self.passed_through.get(api, 0) + 1

    def undecoded(self, api: str) -> None:
        self.undecoded_[api] = self.undecoded_.get(api, 0) + 1

    def paired(self, api: str) -> None:
        self.data_plane_pairs[api] = self.data_plane_pairs.get(api, 0) + 1

    def records(self) -> list[dict]:
        out: list[dict] = []
        for ts_us, src, dst, tcp in self._segments():
            to_broker = tcp.dport == self.port
            key = (src, tcp.sport, dst, tcp.dport) if to_broker else (dst, tcp.dport, src, tcp.sport)
            conn = self.connections.get(key)
            if conn is None:
                conn = self.connections[key] = _Connection(len(self.connections) + 1)
            conn.last_us = ts_us
            if conn.broken:
                continue
            side = conn.to_broker if to_broker else conn.to_client
            side.add(tcp.seq, bytes(tcp.data), bool(tcp.flags & dpkt.tcp.TH_SYN))
            try:
                for frame in side.frames():
                    if to_broker:
                        note_request(frame, ts_us, conn.pending, self)
                    else:
                        out.extend(self._answer(conn, frame, ts_us))
            except MalformedFrame as e:
                conn.broken = f"connection {conn.number}: {e}; the rest of it is not read"
                self.problems.append(conn.broken)
        for conn in self.connections.values():
            if conn.to_broker.missed_start or conn.to_client.missed_start:
                self.problems.append(f"connection {conn.number}: the capture missed its start; not read")
            for correlation_id, pending in conn.pending.items():
                if pending.request is not None:
                    out.append(pair_record(conn.number, -1, correlation_id, pending, None, None, conn.last_us))
        return sorted(out, key=lambda r: (r["recv_us"], r["conn"], r["correlation_id"]))

    def _answer(self, conn: _Connection, frame: bytes, ts_us: int) -> list[dict]:
        pending = conn.pending.pop(correlation_id_of(frame), None)
        if pending is None:
            return []
        if pending.counted is not None:  # a data-plane pair: counted only
            self.paired(pending.counted)
            return []
        if pending.request is None:  # a Metadata answer: its topics (the topics image), when read
            try:
                body, _ = decode_response(pending, frame)
            except codec.FrameError:
                return []
            topics = metadata_record(conn.number, -1, correlation_id_of(frame), pending, ts_us, body)
            return [] if topics is None else [topics]
        try:
            _, fields = decode_response(pending, frame)
        except codec.FrameError as e:
            self.problems.append(f"connection {conn.number}: a response kio cannot decode ({e})")
            return [pair_record(conn.number, -1, correlation_id_of(frame), pending, ts_us, None,
                                undecodable=undecodable_text(frame))]
        return [pair_record(conn.number, -1, correlation_id_of(frame), pending, ts_us, fields)]

    def _segments(self) -> Iterator[tuple[int, str, str, dpkt.tcp.TCP]]:
        try:
            f = open(self.path, "rb")
        except OSError as e:
            raise CaptureError(f"{self.path}: {e.strerror or e}") from None
        with f:
            try:
                reader = dpkt.pcap.UniversalReader(f)
            except (ValueError, dpkt.dpkt.NeedData) as e:
                raise CaptureError(f"{self.path}: not a pcap or pcapng capture ({e})") from None
            decode = _LINK.get(reader.datalink())
            if decode is None:
                raise CaptureError(f"{self.path}: link type {reader.datalink()} is not read (Ethernet, Linux "
                                   f"cooked, loopback or raw IP are)")
            try:
                for ts, raw in reader:
                    ip = _ip(decode, raw)
                    if ip is not None and isinstance(ip.data, dpkt.tcp.TCP) and self.port in (ip.data.sport, ip.data.dport):
                        yield round(float(ts) * 1_000_000), _addr(ip.src), _addr(ip.dst), ip.data
            except (dpkt.dpkt.NeedData, ValueError) as e:
                self.problems.append(f"{self.path}: the capture ends in a torn packet ({e})")


def _ip(decode, raw: bytes):
    try:
        packet = decode(raw)
    except (dpkt.dpkt.UnpackError, IndexError):
        return None
    while packet is not None and not isinstance(packet, (dpkt.ip.IP, dpkt.ip6.IP6)):
        packet = getattr(packet, "data", None)
        if isinstance(packet, bytes):
            return None
    return packet


def _addr(raw: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


_LINK = {
    dpkt.pcap.DLT_EN10MB: dpkt.ethernet.Ethernet,
    dpkt.pcap.DLT_LINUX_SLL: dpkt.sll.SLL,
    dpkt.pcap.DLT_LINUX_SLL2: dpkt.sll2.SLL2,  # tcpdump -i any
    dpkt.pcap.DLT_NULL: dpkt.loopback.Loopback,
    dpkt.pcap.DLT_LOOP: dpkt.loopback.Loopback,
    dpkt.pcap.DLT_RAW: dpkt.ip.IP,
    101: dpkt.ip.IP,  # LINKTYPE_RAW
}
