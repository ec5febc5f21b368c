"""TensorBoard event files without TensorFlow (a helper, not a callback).

Keras's TensorBoard callback needs TensorFlow even on the JAX backend, and the GPU
machines have none. TensorBoard's own `EventFileWriter` imports TensorFlow whenever
it is installed (through `tensorboard.compat.tf`), which costs seconds and breaks
the rule that a JAX run never loads TensorFlow. So the files are written here with
protobuf and TensorBoard's record framing alone; the real server reads them.
"""

from __future__ import annotations

import glob
import os
import socket
import struct
import time

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.summary.writer.record_writer import RecordWriter
from tensorboard.util import tensor_util

from callbacks.records import durable

_counter = 0


def _new_event_path(logdir: str, suffix: str = "") -> str:
    global _counter
    _counter += 1
    return os.path.join(logdir, f"events.out.tfevents.{time.time():.6f}."
                                f"{socket.gethostname()}.{os.getpid()}.{_counter}{suffix}")


class EventWriter:
    """Appends scalars and raw summaries to a new event file in one folder.

    Each event is flushed as it is written: runs are watched live and may be
    killed at any moment.
    """

    def __init__(self, logdir: str, suffix: str = ""):
        """Raises FileNotFoundError where the folder above `logdir` is missing."""
        try:
            os.mkdir(logdir)  # not makedirs: a run folder deleted mid-run stays deleted
        except FileExistsError:
            pass
        self.path = _new_event_path(logdir, suffix)
        self._file = open(self.path, "wb")
        self._records = RecordWriter(self._file)
        self._metadata = {}
        self.add(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def add(self, event: event_pb2.Event):
        self._records.write(event.SerializeToString())
        self._records.flush()

    def scalar(self, tag: str, value: float, step: int, wall_time: float | None = None,
               description: str = ""):
        """Writes one point of the scalar time series `tag`; its first point also
        carries the `description` TensorBoard shows on the tag's card."""
        if tag not in self._metadata:
            self._metadata[tag] = summary_pb2.SummaryMetadata(
                plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
                data_class=summary_pb2.DataClass.DATA_CLASS_SCALAR,
                summary_description=description)
        event = event_pb2.Event(wall_time=wall_time or time.time(), step=int(step))
        event.summary.value.add(tag=tag, tensor=tensor_util.make_tensor_proto(float(value)),
                                metadata=self._metadata[tag])
        self.add(event)

    def summary(self, summary: summary_pb2.Summary, step: int = 0):
        """Writes a prepared Summary proto (e.g. the HParams plugin's)."""
        self.add(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

    def close(self):
        if not self._records.closed:
            self._records.flush()
            os.fsync(self._file.fileno())
            self._records.close()


def scan_events(path: str) -> tuple[list, str | None]:
    """(the Event protos of one event file, what is wrong with it or None).

    Reading stops at the first record whose framing or CRC is wrong. A record cut
    short at the end is a writer killed mid-record ("torn"), not damage.
    """
    with open(path, "rb") as f:
        data = f.read()
    found, offset = [], 0
    while offset < len(data):
        if offset + 12 > len(data):
            return found, "torn"
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack_from("<I", data, offset + 8)
        if masked_crc32c(header) != header_crc:
            return found, f"bad record length at byte {offset}"
        end = offset + 12 + length + 4
        if end > len(data):
            return found, "torn"
        body = data[offset + 12:offset + 12 + length]
        (body_crc,) = struct.unpack_from("<I", data, end - 4)
        event = event_pb2.Event()
        try:
            if masked_crc32c(body) != body_crc:
                raise ValueError("CRC mismatch")
            event.ParseFromString(body)
        except Exception as error:  # protobuf's DecodeError, or the CRC
            return found, f"bad record at byte {offset} ({error})"
        found.append(event)
        offset = end
    return found, None


def read_events(path: str):
    """Yields the Event protos of one event file, up to a torn or damaged record."""
    yield from scan_events(path)[0]


def event_files(logdir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))


def rewind(logdir: str, last_step) -> int:
    """Drops every summary after its tag's last step from the event files of `logdir`.

    Used when a run resumes from a checkpoint: what the interrupted attempt
    logged after that checkpoint is redone, so it must not appear twice. The kept
    events (one per tag and step) go into one new file before the old files are
    removed, so a kill in between loses nothing (duplicates are dropped next time).
    A file with a damaged record gives up every record before it and is then kept
    aside under a name TensorBoard does not read, with a warning.

    Args:
        logdir: the folder of the event files.
        last_step: a function tag -> the last step of that tag to keep (epoch
            series and step series of one folder end at different steps).

    Returns:
        How many summary values were dropped.
    """
    paths = event_files(logdir)
    if not paths:
        return 0
    kept, seen, dropped, damaged = [], set(), 0, []
    for path in paths:
        found, problem = scan_events(path)
        if problem and problem != "torn":
            damaged.append((path, problem))
        for event in found:
            values = []
            for value in event.summary.value:
                key = (value.tag, event.step)
                late = event.step > last_step(value.tag)
                if late or key in seen:
                    dropped += late
                    continue
                seen.add(key)
                values.append(value)
            if values:
                copy = event_pb2.Event(wall_time=event.wall_time, step=event.step)
                copy.summary.value.extend(values)
                kept.append(copy)
    writer = EventWriter(logdir, suffix=".rewound")
    for event in sorted(kept, key=lambda e: e.wall_time):
        writer.add(event)
    writer.close()
    for path in set(paths) - {p for p, _ in damaged}:
        os.remove(path)
    for path, problem in damaged:  # kept, under a name TensorBoard does not read
        aside = os.path.join(os.path.dirname(path), "damaged." + os.path.basename(path)
                             .replace("events.out.tfevents.", "events."))
        os.replace(path, aside)
        durable.warn(f"{path}: {problem}; every record before it is kept, the file as it "
                     f"was is kept as {aside}")
    return dropped
