"""A small Kafka protocol client on kio: for the command line, the benchmark and tests.

``KafkaClient`` is one connection. It negotiates versions with ApiVersions (using the highest
version both sides know), then sends requests as field dicts and returns response field dicts
(``kafka_codec.to_fields``). Requests on a connection are answered in order; several may be
in flight. ``Cluster`` finds brokers and group coordinators, so the command line works against
a real Kafka cluster as well as against groupcoord.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.protocol import schema

# Versions this client can build: the coordinator's APIs as the core schema knows them, the
# rest as kio knows them (only the fields used here are filled in).
_CLIENT_MAX = {**{schema.API_KEYS[a]: v[1] for a, v in schema.SUPPORTED_VERSIONS.items()},
               18: 4, 3: 12, 2: 9, 1: 12}
_CLIENT_MIN = {**{schema.API_KEYS[a]: v[0] for a, v in schema.SUPPORTED_VERSIONS.items()},
               18: 0, 3: 0, 2: 1, 1: 4}


class KafkaError(Exception):
    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class BootstrapUnreachable(KafkaError):
    """No bootstrap server took a connection."""


def error_name(code: int) -> str:
    from groupcoord.core.errors import Error
    try:
        return Error(code).name
    except ValueError:
        from kio.schema.errors import ErrorCode
        try:
            return ErrorCode(code).name.upper()
        except ValueError:
            return str(code)


class KafkaClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str,
                 host: str, port: int) -> None:
        self._reader = reader
        self._writer = writer
        self.client_id = client_id
        self.host = host
        self.port = port
        self._correlation = 0
        self._waiting: list[tuple[int, int, int, asyncio.Future]] = []
        self._reader_task: asyncio.Task | None = None
        self.versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def connect(cls, host: str, port: int, client_id: str = "groupcoord-cli", timeout: float = 10.0,
                      negotiate: bool = True, local_addr: tuple | None = None) -> "KafkaClient":
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, local_addr=local_addr), timeout)
        client = cls(reader, writer, client_id, host, port)
        client._reader_task = asyncio.get_running_loop().create_task(client._read_loop())
        if negotiate:
            await asyncio.wait_for(client.negotiate(), timeout)
        return client

    async def negotiate(self) -> dict[int, tuple[int, int]]:
        response = await self.request(18, {"client_software_name": "groupcoord",
                                           "client_software_version": "0.1.0"}, version=3)
        if response["error_code"] == 35:  # UNSUPPORTED_VERSION: the broker's answer is v0
            response = await self.request(18, {}, version=0)
        if response["error_code"]:
            raise KafkaError(f"ApiVersions failed: {error_name(response['error_code'])}", response["error_code"])
        self.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}
        return self.versions

    def version(self, api_key: int, highest: int | None = None) -> int:
        """The highest version both sides support (capped at ``highest``)."""
        lo, hi = self.versions.get(api_key, (None, None))
        if lo is None:
            raise KafkaError(f"the broker does not support API key {api_key}")
        mine_lo, mine_hi = _CLIENT_MIN.get(api_key, 0), _CLIENT_MAX.get(api_key, hi)
        if highest is not None:
            mine_hi = min(mine_hi, highest)
        v = min(hi, mine_hi)
        if v < max(lo, mine_lo):
            raise KafkaError(f"no common version for API key {api_key} (broker {lo}-{hi}, client {mine_lo}-{mine_hi})")
        while v >= lo and not kc.has_schema(api_key, v):
            v -= 1
        return v

    @property
    def local_address(self) -> tuple:
        """(host, port) of this end of the connection: who the broker sees sending."""
        return tuple(self._writer.get_extra_info("sockname")[:2])

    @property
    def last_correlation_id(self) -> int:
        """The correlation id of the request sent last."""
        return self._correlation

    def send(self, api_key: int, fields: dict, version: int | None = None) -> asyncio.Future:
        """Send a request now; the future gets the response fields."""
        if version is None:
            version = self.version(api_key)
        self._correlation += 1
        frame = kc.encode_request(api_key, version, self._correlation, self.client_id,
                                  kc.request_body(api_key, version, fields))
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((self._correlation, api_key, version, future))
        self._writer.write(frame)
        return future

    async def request(self, api_key: int, fields: dict, version: int | None = None,
                      timeout: float | None = 30.0) -> dict:
        future = self.send(api_key, fields, version)
        return await asyncio.wait_for(future, timeout) if timeout else await future

    def send_raw(self, frame: bytes) -> None:
        self._writer.write(frame)

    async def _read_loop(self) -> None:
        error: BaseException = ConnectionError("connection closed")
        try:
            while True:
                (size,) = struct.unpack(">i", await self._reader.readexactly(4))
                frame = await self._reader.readexactly(size)
                if not self._waiting:
                    raise KafkaError("a response arrived with no request waiting")
                correlation, api_key, version, future = self._waiting.pop(0)
                got, body = kc.decode_response(api_key, version, frame)
                if got != correlation:
                    raise KafkaError(f"correlation id {got}, expected {correlation}")
                if not future.done():
                    future.set_result(kc.to_fields(body))
        except asyncio.CancelledError:
            error = ConnectionError("client closed")
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            error = ConnectionError(f"connection closed: {e}")
        except Exception as e:
            error = e
        for _c, _k, _v, future in self._waiting:
            if not future.done():
                if isinstance(error, ConnectionError) and str(error) == "client closed":
                    future.cancel()
                else:
                    future.set_exception(error)
        self._waiting.clear()

    async def close(self) -> None:
        if self._reader_task is not None:
            await cancel_and_wait(self._reader_task)
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def cancel_and_wait(task: asyncio.Task) -> None:
    """Cancels ``task`` and waits until it has ended, however it ends."""
    task.cancel()
    try:
        await task
    except BaseException:
        pass


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        host, sep, port = part.rpartition(":")
        if not sep:
            host, port = part, "9092"
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise ValueError("no bootstrap server given")
    return out


class Cluster:
    """Connections to a cluster's brokers, opened as needed, by node id or address."""

    def __init__(self, bootstrap: str, client_id: str = "groupcoord-cli", timeout: float = 10.0) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.timeout = timeout
        self._by_addr: dict[tuple[str, int], KafkaClient] = {}
        self.brokers: dict[int, tuple[str, int]] = {}

    async def connection(self, host: str, port: int) -> KafkaClient:
        client = self._by_addr.get((host, port))
        if client is None:
            client = await KafkaClient.connect(host, port, self.client_id, self.timeout)
            self._by_addr[(host, port)] = client
        return client

    async def any(self) -> KafkaClient:
        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                return await self.connection(host, port)
            except (OSError, asyncio.TimeoutError, KafkaError) as e:
                last = e
        raise BootstrapUnreachable(f"cannot reach any bootstrap server {self.bootstrap}: {last}")

    async def metadata(self, topics: list[str] | None = None, auto_create: bool = False) -> dict:
        """``auto_create``: the broker may create the topics asked for, where its settings allow
        (the request's flag, v4+; a broker speaking only older versions decides alone)."""
        client = await self.any()
        v = client.version(3)
        if topics is None:
            fields = {"topics": None if v >= 1 else []}
        else:
            fields = {"topics": [{"name": t, "topic_id": None} for t in topics]}
        fields["allow_auto_topic_creation"] = auto_create
        response = await client.request(3, fields, v)
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
        return response

    async def broker(self, node_id: int) -> KafkaClient:
        if node_id not in self.brokers:
            await self.metadata([])
        if node_id not in self.brokers:
            raise KafkaError(f"unknown broker {node_id}")
        return await self.connection(*self.brokers[node_id])

    async def coordinator(self, group_id: str) -> KafkaClient:
        client = await self.any()
        v = client.version(10)
        fields = {"key_type": 0, "key": group_id, "coordinator_keys": [group_id]}
        for _attempt in range(20):
            response = await client.request(10, fields, v)
            entry = response["coordinators"][0] if v >= 4 else response
            code = entry["error_code"]
            if code == 0:
                try:
                    return await self.connection(entry["host"], entry["port"])
                except OSError:  # a coordinator that just died, still named while ownership moves
                    await asyncio.sleep(0.25)
                    continue
            if code not in (14, 15):  # loading / not available: retry
                raise KafkaError(f"FindCoordinator({group_id}): {error_name(code)}", code)
            await asyncio.sleep(0.25)
        raise KafkaError(f"FindCoordinator({group_id}): coordinator not available")

    async def close(self) -> None:
        for client in self._by_addr.values():
            await client.close()
        self._by_addr.clear()


Json = dict[str, Any]
