"""rosbag2 bags (MCAP) for the nodes: record topics, write, read, iterate (``rosbags``).

The bags are the ones ``ros2 bag record -s mcap`` writes and ``ros2 bag play`` reads: rosbag2
format version 9, one MCAP file, CDR messages. Messages are serialised and deserialised by rclpy
(``rclpy.serialization``), so what is written is exactly what went over DDS; ``rosbags`` only
frames them (and needs each type's definition, from its typestore for the standard ROS 2
messages or from the interface package's ``share/<pkg>/msg/<Type>.msg`` otherwise).

- ``BagRecorder(node, {topic: msg_class})`` subscribes and keeps (receive time ns, msg) per
  topic; ``.messages(topic)``; ``.write(path)``.
- ``write_bag(path, {topic: (msg_class, [(time_ns, msg), ...])})``: any recorded messages.
- ``read_bag(path, topics=None)`` -> ``{topic: [(time_ns, msg), ...]}``;
  ``bag_topics(path)`` -> ``{topic: type name}``; ``iter_bag(path, topics)``: messages in
  time order, as a player needs them.

Errors a user can cause (a missing bag, a topic the bag lacks, a type not installed) raise
``ValueError`` with one line naming it; so does a damaged bag (``iter_bag``: the file, the
topic, and the byte offset of the broken record or the message's index and time).
"""

from __future__ import annotations

import importlib
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

TYPESTORE = "ROS2_KILTED"


# ====================================================================== types
def type_name(msg_class: type) -> str:
    """ROS type name of an rclpy message class: ``sensor_msgs.msg.JointState`` ->
    ``sensor_msgs/msg/JointState``."""
    package, kind = msg_class.__module__.split(".")[:2]
    return f"{package}/{kind}/{msg_class.__name__}"


def message_class(name: str) -> type:
    """rclpy message class of a type name (``pkg/msg/Type``; ``pkg/Type`` accepted)."""
    parts = name.split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"message type '{name}' is not of the form package/msg/Type")
    try:  # a ROS 2 install has it; the wheels do not
        from rosidl_runtime_py.utilities import get_message

        return get_message("/".join(parts))
    except ImportError:
        pass
    except (AttributeError, ValueError, ModuleNotFoundError) as exc:
        raise ValueError(f"message type '{name}' is not installed ({exc})") from None
    try:
        return getattr(importlib.import_module(f"{parts[0]}.{parts[1]}"), parts[2])
    except (ImportError, AttributeError):
        raise ValueError(f"message type '{name}' is not installed: no Python module "
                         f"{parts[0]}.{parts[1]} with {parts[2]}") from None


def _typestore(names: Iterable[str]):
    """rosbags typestore knowing ``names``: its own for the standard messages, the rest from
    the installed interface packages' ``.msg`` files (with their dependencies)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(getattr(Stores, TYPESTORE))
    todo = [n for n in names if n not in store.fielddefs]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in store.fielddefs or name in seen:
            continue
        seen.add(name)
        package, kind, leaf = name.split("/")
        path = _definition_file(package, kind, leaf)
        if path is None:
            raise ValueError(f"message type '{name}': no definition {package}/{kind}/{leaf}"
                             f".msg found under share/{package} (is {package} installed?)")
        types = get_types_from_msg(path.read_text(), name)
        store.register(types)
        for fields in types.values():
            for _, field in fields[1]:
                todo.extend(_nested(field))
    return store


def _nested(field: Any) -> list[str]:
    """Type names a rosbags field definition refers to (it registers them unresolved)."""
    out = []
    stack = [field]
    while stack:
        x = stack.pop()
        if isinstance(x, str) and x.count("/") == 2:
            out.append(x)
        elif isinstance(x, (tuple, list)):
            stack.extend(x)
    return out


def _definition_file(package: str, kind: str, leaf: str) -> Path | None:
    roots = [Path(sys.prefix) / "share"]
    try:
        from ament_index_python.packages import get_package_share_directory

        roots.insert(0, Path(get_package_share_directory(package)).parent)
    except Exception:  # noqa: BLE001 - no index (the wheels set no AMENT_PREFIX_PATH)
        pass
    module = sys.modules.get(f"{package}.{kind}")
    if module is not None and getattr(module, "__file__", None):
        roots.append(Path(module.__file__).resolve().parents[2] / "share")
    for root in roots:
        path = root / package / kind / f"{leaf}.{kind}"
        if path.is_file():
            return path
    return None


# ====================================================================== writing
def write_bag(path: Path | str, topics: dict[str, tuple[type, Iterable[tuple[int, Any]]]]
              ) -> Path:
    """Write a rosbag2 (MCAP) bag directory at ``path`` (replaced if it exists):
    ``topics`` maps a topic to (message class, [(time ns, message), ...]); messages are
    serialised by rclpy. Returns the path."""
    from rclpy.serialization import serialize_message
    from rosbags.rosbag2 import StoragePlugin, Writer

    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    typestore = _typestore(type_name(cls) for cls, _ in topics.values())
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for topic, (cls, items) in topics.items():
            conn = writer.add_connection(topic, type_name(cls), typestore=typestore)
            for stamp_ns, msg in items:
                writer.write(conn, int(stamp_ns), serialize_message(msg))
    return path


class BagRecorder:
    """Record ``topics`` ({name: message class}) on ``node``: every message with its receive
    time in ns (``clock``: default the node's clock, as ``ros2 bag record``; pass e.g.
    ``time.monotonic_ns``). ``keep(topic, msg) -> bool`` may drop messages.

    ``qos``: the subscriptions' QoS (default reliable, depth 1000: every publisher of this
    package is reliable; pass a best-effort profile to hear best-effort publishers too)."""

    def __init__(self, node, topics: dict[str, type], qos=None,
                 clock: Callable[[], int] | None = None,
                 keep: Callable[[str, Any], bool] | None = None) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        if not topics:
            raise ValueError("BagRecorder: give at least one topic")
        self.node = node
        self.types = dict(topics)
        self.qos = qos if qos is not None else QoSProfile(
            depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self._clock = clock or (lambda: node.get_clock().now().nanoseconds)
        self._keep = keep
        self._lock = threading.Lock()
        self._messages: dict[str, list[tuple[int, Any]]] = {t: [] for t in topics}
        self.subscriptions = [node.create_subscription(cls, topic, self._callback(topic),
                                                       self.qos)
                              for topic, cls in topics.items()]

    def _callback(self, topic: str) -> Callable[[Any], None]:
        store = self._messages[topic]

        def on_message(msg) -> None:
            stamp = self._clock()
            if self._keep is None or self._keep(topic, msg):
                with self._lock:
                    store.append((stamp, msg))

        return on_message

    def messages(self, topic: str) -> list[tuple[int, Any]]:
        """(receive time ns, message) received on ``topic`` so far (a copy)."""
        if topic not in self._messages:
            raise ValueError(f"topic '{topic}' is not recorded (recorded: "
                             f"{sorted(self._messages)})")
        with self._lock:
            return list(self._messages[topic])

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {t: len(m) for t, m in self._messages.items()}

    def close(self) -> None:
        """Stop recording (destroy the subscriptions); the messages stay."""
        for sub in self.subscriptions:
            self.node.destroy_subscription(sub)
        self.subscriptions = []

    def write(self, path: Path | str) -> Path:
        """The recorded messages as a rosbag2 (MCAP) bag directory at ``path``."""
        with self._lock:
            topics = {t: (self.types[t], list(m)) for t, m in self._messages.items()}
        return write_bag(path, topics)


# ====================================================================== reading
def _open(path: Path | str):
    from rosbags.rosbag2 import Reader

    path = Path(path)
    if path.is_file() and (path.parent / "metadata.yaml").is_file():
        path = path.parent  # the .mcap or metadata.yaml inside the bag directory
    if not (path / "metadata.yaml").is_file():
        raise ValueError(f"bag '{path}' not found (a rosbag2 directory with metadata.yaml)")
    try:
        reader = Reader(path)
        reader.open()
    except Exception as exc:  # noqa: BLE001 - rosbags' own errors: one line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        for file in sorted(path.glob("*.mcap")):  # where the damage is, when it is MCAP's
            where = mcap_damage(file)
            if where is not None:
                raise ValueError(f"bag '{file}' cannot be read: {where} ({reason})") from None
        raise ValueError(f"bag '{path}' cannot be read: {reason}") from None
    return reader


def bag_topics(path: Path | str) -> dict[str, str]:
    """{topic: type name} of a bag."""
    reader = _open(path)
    try:
        return {c.topic: c.msgtype for c in reader.connections}
    finally:
        reader.close()


def bag_counts(path: Path | str) -> dict[str, int]:
    """{topic: number of messages} of a bag."""
    reader = _open(path)
    try:
        out: dict[str, int] = {}
        for c in reader.connections:
            out[c.topic] = out.get(c.topic, 0) + c.msgcount
        return out
    finally:
        reader.close()


def _check_topics(available: dict[str, str], topics: Iterable[str] | None, path) -> list[str]:
    if topics is None:
        return list(available)
    topics = list(topics)
    unknown = [t for t in topics if t not in available]
    if unknown:
        raise ValueError(f"topic {', '.join(unknown)} is not in bag '{path}' (it has: "
                         f"{', '.join(sorted(available))})")
    return topics


def iter_bag(path: Path | str, topics: Iterable[str] | None = None
             ) -> Iterator[tuple[str, int, Any]]:
    """(topic, time ns, rclpy message) of ``topics`` (default all) in time order.

    A corrupt bag (a chunk the reader cannot decode, a message that does not deserialise, or
    deserialises from fewer bytes than it holds) raises ``ValueError`` with one line naming the
    file, the topic and where: the byte offset of the broken record (MCAP) or the message's
    index and time."""
    reader = _open(path)
    try:
        available = {c.topic: c.msgtype for c in reader.connections}
        wanted = set(_check_topics(available, topics, path))
        classes = {t: message_class(available[t]) for t in wanted}
        connections = [c for c in reader.connections if c.topic in wanted]
        deserialize = _Deserializer()
        messages = reader.messages(connections=connections)
        index, stamp = 0, None
        while True:
            try:
                conn, stamp, raw = next(messages)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 - whatever a corrupt file makes rosbags
                raise ValueError(_corrupt_chunk(reader, path, index, stamp, exc)) from None
            msg = deserialize(raw, classes[conn.topic])
            if isinstance(msg, str):
                file = _file_of(reader, path)
                offset = _mcap_message_offset(file, conn.topic, stamp)
                at = f", byte {offset}" if offset is not None else ""
                raise ValueError(f"bag '{file}': the {conn.topic} message at t = {stamp} ns "
                                 f"(message {index} read{at}) is not a valid {conn.msgtype}: "
                                 f"{msg}")
            index += 1
            yield conn.topic, stamp, msg
    finally:
        reader.close()


class _Deserializer:
    """rclpy's deserialisation checked: a message must deserialise and serialise back to the
    bytes it came from (±3 bytes of CDR end padding; a payload zeroed or cut yields a shorter
    message). What the middleware prints on stderr while failing (one line such as 'sequence
    size exceeds remaining buffer') is caught and goes into the error. Returns the message or
    the reason it is invalid (a ``str``)."""

    def __init__(self) -> None:
        import tempfile

        from rclpy.serialization import deserialize_message, serialize_message

        self._de, self._ser = deserialize_message, serialize_message
        self._capture = tempfile.TemporaryFile()

    def __call__(self, raw: bytes, cls: type) -> Any:
        import os

        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(self._capture.fileno(), 2)
        try:
            msg = self._de(raw, cls)
            error = None
        except Exception as exc:  # noqa: BLE001 - rclpy's RMWError and friends: one line
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        if error is not None:
            self._capture.seek(0)
            said = self._capture.read().decode(errors="replace").strip().splitlines()
            self._capture.seek(0)
            self._capture.truncate()
            return f"{error} ({said[-1]})" if said else error
        size = len(self._ser(msg))
        if abs(size - len(raw)) > 3:
            return f"{len(raw)} bytes hold a message of {size} bytes (corrupt payload)"
        return msg


def _file_of(reader, path: Path | str) -> Path:
    """The bag's storage file when it has one (what a byte offset refers to), else the bag."""
    base = Path(path).parent if Path(path).is_file() else Path(path)
    files = sorted(base.glob("*.mcap")) + sorted(base.glob("*.db3"))
    return files[0] if len(files) == 1 else base


def _corrupt_chunk(reader, path: Path | str, index: int, stamp: int | None,
                   exc: Exception) -> str:
    """One line for a reader failure: where the MCAP record walk finds the damage, else after
    which message it happened."""
    file = _file_of(reader, path)
    reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    where = mcap_damage(file) if file.suffix == ".mcap" and file.is_file() else None
    after = (f"after message {index} (t = {stamp} ns)" if stamp is not None
             else "before its first message")
    if where is None:
        return f"bag '{file}': unreadable {after}: {reason}"
    return f"bag '{file}': {where}; reading stopped {after} ({reason})"


_MCAP_MAGIC = b"\x89MCAP0\r\n"


def mcap_damage(file: Path | str) -> str | None:
    """The first damaged record of an MCAP file, walking its records (MCAP spec: opcode u8,
    length u64, body; chunks: start/end time, uncompressed size and CRC, compression, records),
    as "<what> at byte <offset> (<topics>)", or None if every record is whole."""
    import struct
    import zlib

    data = Path(file).read_bytes()
    if data[:8] != _MCAP_MAGIC:
        return "no MCAP magic at byte 0"
    topics: dict[int, str] = {}
    if len(data) >= 45 and data[-37] == 0x02:  # the footer: where the summary (channels) is
        summary = struct.unpack_from("<Q", data, len(data) - 28)[0]
        if 8 < summary < len(data):
            for cid, topic in _channels(data, summary):
                topics.setdefault(cid, topic)

    def walk(buf: bytes, base: int, inner: bool) -> tuple[str, int, set[int]] | None:
        """(problem, file offset, channel ids seen) of the first bad record in ``buf``."""
        pos, seen = 0, set()
        while pos < len(buf):
            if pos + 9 > len(buf):
                return "record header cut short", base + pos, seen
            op, size = buf[pos], struct.unpack_from("<Q", buf, pos + 1)[0]
            body = pos + 9
            if not 0x01 <= op <= 0x10 or (inner and op not in (0x03, 0x04, 0x05)):
                return f"unknown record type 0x{op:02x}", base + pos, seen
            if body + size > len(buf):
                if op == 0x06:  # a chunk cut short: the channels of what is left of it
                    for cid, topic in _channels(buf[body:], 40, inner=True):
                        seen.add(cid)
                        if topic:
                            topics.setdefault(cid, topic)
                return f"record of {size} bytes past the end", base + pos, seen
            rec = buf[body:body + size]
            try:
                if op == 0x04:  # channel: id, schema id, topic
                    cid, _, n = struct.unpack_from("<HHI", rec)
                    topics[cid] = rec[8:8 + n].decode()
                elif op == 0x05:  # message: channel id, ...
                    seen.add(struct.unpack_from("<H", rec)[0])
                elif op == 0x07:  # message index of the chunk before: channel id
                    seen.add(struct.unpack_from("<H", rec)[0])
                elif op == 0x06:
                    _, _, usize, crc, n = struct.unpack_from("<QQQII", rec)
                    compression = rec[32:32 + n].decode()
                    (csize,) = struct.unpack_from("<Q", rec, 32 + n)
                    start = 40 + n
                    if start + csize > len(rec):
                        return "chunk data past its record", base + pos, seen
                    if compression:
                        from rosbags.rosbag2.storage_mcap import DECOMPRESSORS

                        inner_buf = DECOMPRESSORS[compression](rec[start:start + csize], usize)
                    else:
                        inner_buf = rec[start:start + csize]
                    if len(inner_buf) != usize or (crc and zlib.crc32(inner_buf) != crc):
                        return "chunk size or checksum mismatch", base + pos, seen
                    bad = walk(inner_buf, base + body + start if not compression else base + pos,
                               True)
                    if bad is not None:
                        chunk_ids = bad[2] | _index_ids(buf, body + size)
                        return (f"{bad[0]} at byte {bad[1]} in the chunk at byte {base + pos}",
                                -1, chunk_ids)
            except Exception as exc:  # noqa: BLE001 - a field cut or not UTF-8
                return f"unreadable record ({type(exc).__name__})", base + pos, seen
            pos = body + size
            if op == 0x02 and not inner:  # footer
                return None if data[base + pos:] == _MCAP_MAGIC else (
                    "no MCAP magic after the footer", base + pos, seen)
        return None if inner else ("file cut short (no footer)", base + pos, seen)

    bad = walk(data[8:], 8, False)
    if bad is None:
        return None
    problem, offset, ids = bad
    named = sorted(topics.get(i, f"channel {i}") for i in ids)
    return (problem + (f" at byte {offset}" if offset >= 0 else "")
            + (f" (messages of {', '.join(named)})" if named else ""))


def _channels(buf: bytes, pos: int, inner: bool = False) -> list[tuple[int, str]]:
    """(channel id, topic) of the channel records (or, ``inner``, message records: topic '')
    from ``pos`` on, as far as the records are whole."""
    import struct

    out = []
    while pos + 9 <= len(buf):
        op, size = buf[pos], struct.unpack_from("<Q", buf, pos + 1)[0]
        body = pos + 9
        if op == 0x04 and body + 8 <= len(buf):
            cid, _, n = struct.unpack_from("<HHI", buf, body)
            out.append((cid, buf[body + 8:body + 8 + n].decode(errors="replace")))
        elif op == 0x05 and inner and body + 2 <= len(buf):
            out.append((struct.unpack_from("<H", buf, body)[0], ""))
        if not 0x01 <= op <= 0x10 or size > len(buf):
            break
        pos = body + size
    return out


def _mcap_message_offset(file: Path, topic: str, stamp: int) -> int | None:
    """Byte offset in an uncompressed MCAP file of the message record of ``topic`` logged at
    ``stamp`` ns (None if not found: another format, compressed chunks, damage before it)."""
    import struct

    if file.suffix != ".mcap" or not file.is_file():
        return None
    data = Path(file).read_bytes()
    channels = dict(_channels(data, 8))
    summary = struct.unpack_from("<Q", data, len(data) - 28)[0] if len(data) >= 45 else 0
    if 8 < summary < len(data):
        channels.update(_channels(data, summary))
    wanted = {cid for cid, name in channels.items() if name == topic}
    stack = [(8, len(data))]
    while stack:
        pos, end = stack.pop()
        while pos + 9 <= end:
            op, size = data[pos], struct.unpack_from("<Q", data, pos + 1)[0]
            body = pos + 9
            if not 0x01 <= op <= 0x10 or body + size > end:
                break
            if op == 0x05 and size >= 22:
                cid, _, log_time = struct.unpack_from("<HIQ", data, body)
                if cid in wanted and log_time == stamp:
                    return pos
            elif op == 0x06 and size >= 40:
                n = struct.unpack_from("<I", data, body + 28)[0]
                if n == 0:  # uncompressed: its records lie in the file as they are
                    (csize,) = struct.unpack_from("<Q", data, body + 32)
                    stack.append((pos, end))
                    pos, end = body + 40, min(body + 40 + csize, end)
                    continue
            pos = body + size
    return None


def _index_ids(buf: bytes, pos: int) -> set[int]:
    """Channel ids of the message-index records (0x07) that follow a chunk at ``pos``."""
    import struct

    ids = set()
    while pos + 11 <= len(buf) and buf[pos] == 0x07:
        size = struct.unpack_from("<Q", buf, pos + 1)[0]
        ids.add(struct.unpack_from("<H", buf, pos + 9)[0])
        pos += 9 + size
    return ids


def read_bag(path: Path | str, topics: Iterable[str] | None = None
             ) -> dict[str, list[tuple[int, Any]]]:
    """{topic: [(time ns, rclpy message), ...]} of ``topics`` (default all) of a bag."""
    available = bag_topics(path)
    wanted = _check_topics(available, topics, path)
    out: dict[str, list[tuple[int, Any]]] = {t: [] for t in wanted}
    for topic, stamp, msg in iter_bag(path, wanted):
        out[topic].append((stamp, msg))
    return out


# ====================================================================== playing
def play_bag(path: Path | str, topics: Iterable[str] | None = None, rate: float = 1.0,
             clock: bool = False, wait_for_subscribers: float = 0.0, delay: float = 0.0,
             domain: int | None = None, log: Callable[[str], None] = print) -> dict[str, int]:
    """Republish a bag with its timing, as ``ros2 bag play`` does: one publisher per topic
    with the recorded type, messages in time order, the recorded gaps scaled by 1/``rate``.

    ``clock``: publish ``/clock`` (the bag's time, before each message; ``use_sim_time``
    nodes then see the recorded times, as with ``ros2 bag play --clock``).
    ``wait_for_subscribers``: wait up to this many seconds until every replayed topic (and
    /clock) has a subscriber (``ValueError`` naming those without one). ``delay``: seconds
    to wait before the first message. Returns the number of messages published per topic."""
    import math
    import time

    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"--rate must be a positive number, got {rate}")
    for what, value in (("--wait-for-subscribers", wait_for_subscribers), ("--delay", delay)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{what} must be >= 0 s, got {value}")
    available = bag_topics(path)
    wanted = _check_topics(available, topics, path)
    if not wanted:
        raise ValueError(f"bag '{path}' has no topics")
    classes = {t: message_class(available[t]) for t in wanted}
    if clock and "/clock" in wanted:
        raise ValueError("--clock: the bag's own /clock is replayed; leave out one of them")

    import rclpy
    from rclpy.duration import Duration
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain)
    node = rclpy.create_node("underactuated_control_replay", context=context)
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    try:
        pubs = {t: node.create_publisher(classes[t], t, qos) for t in wanted}
        clock_pub = node.create_publisher(Clock, "/clock", qos) if clock else None
        if wait_for_subscribers > 0:
            waited = dict(pubs) | ({"/clock": clock_pub} if clock_pub else {})
            end = time.monotonic() + wait_for_subscribers
            while time.monotonic() < end and any(p.get_subscription_count() == 0
                                                 for p in waited.values()):
                time.sleep(0.05)
            lonely = [t for t, p in waited.items() if p.get_subscription_count() == 0]
            if lonely:
                raise ValueError(f"no subscriber on {', '.join(lonely)} within "
                                 f"{wait_for_subscribers:g} s (--wait-for-subscribers)")
        if delay:
            time.sleep(delay)
        counts = dict.fromkeys(wanted, 0)
        total = sum(n for t, n in bag_counts(path).items() if t in wanted)
        log(f"[replay] {path}: {total} messages on {', '.join(wanted)} at rate {rate:g}"
            + (" with /clock" if clock else ""))
        first: int | None = None
        start = time.monotonic()
        next_report = start + 1.0
        sent = 0
        for topic, stamp, msg in iter_bag(path, wanted):
            if first is None:
                first = stamp
            target = start + (stamp - first) * 1e-9 / rate
            while True:
                now = time.monotonic()
                if now >= target:
                    break
                time.sleep(min(target - now, 0.05))
            if clock_pub is not None:
                secs, nanos = divmod(stamp, 1_000_000_000)
                tick = Clock()
                tick.clock.sec, tick.clock.nanosec = int(secs), int(nanos)
                clock_pub.publish(tick)
            pubs[topic].publish(msg)
            counts[topic] += 1
            sent += 1
            if time.monotonic() >= next_report:
                next_report += 1.0
                log(f"[replay] {(stamp - first) * 1e-9:7.2f} s of bag time, {sent}/{total} "
                    "messages")
        for p in list(pubs.values()) + ([clock_pub] if clock_pub else []):
            p.wait_for_all_acked(Duration(seconds=2.0))
        log(f"[replay] done: {sent} messages in {time.monotonic() - start:.2f} s ("
            + ", ".join(f"{t} {n}" for t, n in counts.items()) + ")")
        return counts
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
