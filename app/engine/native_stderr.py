"""What C++ code writes to stderr (fd 2) at the frameworks' start, filtered.

TensorFlow and XLA log from C++ about every device they probe, and some lines
("Could not find cuda drivers") come before their logging reads
TF_CPP_MIN_LOG_LEVEL, so no setting hides them. On a CPU run the lines about
other devices are dropped, and TensorFlow's oneDNN notice (on CPUs with AVX-512
VNNI) on every run. Every other line is held until the devices are found
(`release`, called by app/engine/distribute.py), else printed at exit, so a
device error comes first. libjpeg's bare lines about an image tf.data cannot
decode ("Input file read error": no file name) become one warning saying the
closing lines name the images skipped; the rest of them are dropped. Python's own
stderr (error lines, tracebacks) is not filtered: it writes to the terminal directly.

Only the command line starts the filter (`start`); tests that run in-process do not.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import threading

# What TensorFlow and XLA print (from C++) on every start about devices they probe:
# on a CPU run, noise.
FOREIGN_DEVICE_LINE = re.compile(
    r"cuda|cuInit|libtpu|backend 'tpu'|absl::InitializeLog|TensorRT", re.IGNORECASE)
# What TensorFlow prints at import on CPUs with AVX-512 VNNI (before it reads
# TF_CPP_MIN_LOG_LEVEL), whatever the run: a notice about its CPU kernels, dropped.
START_NOTICE = re.compile(r"oneDNN custom operations are on")
# What TensorFlow's libjpeg writes (from C, with no file name) for an image the input
# pipeline cannot decode: libjpeg's messages (jerror.h) that end a decode or warn of one.
LIBJPEG_LINE = re.compile(
    r"^(Input file read error|Premature end of JPEG file|Corrupt JPEG data|Not a JPEG "
    r"file|Invalid JPEG file structure|Bogus (marker|Huffman|DQT|DHT|input colorspace)|"
    r"Unsupported (JPEG|marker)|JPEG datastream contains no image|Empty JPEG image)")
LIBJPEG_WARNING = ("warning: libjpeg: {line} (an image the input pipeline cannot decode; "
                   "it is skipped, and the closing lines name the images skipped)\n")


class _Filter:
    """fd 2 through a pipe and a thread that forwards, holds or drops each line."""

    def __init__(self):
        self._started = self._drop = False
        self._released = True
        self._held = []
        self._lock = threading.Lock()
        self._terminal = self._thread = None
        self._libjpeg_said = False

    def start(self, accelerator: str):
        if self._started:
            return
        self._started, self._drop, self._released = True, accelerator == "cpu", False
        sys.stderr.flush()
        self._terminal = os.dup(2)
        sys.stderr = open(self._terminal, "w", buffering=1, closefd=False,
                          errors="backslashreplace")
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self._thread = threading.Thread(target=self._forward, args=(read_end,), daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def _forward(self, read_end: int):
        pending = b""
        while chunk := os.read(read_end, 65536):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                self._line(line + b"\n")
        if pending:
            self._line(pending)
        os.close(read_end)

    def _line(self, line: bytes):
        with self._lock:
            text = line.decode("utf-8", "replace")
            if START_NOTICE.search(text) or (self._drop and FOREIGN_DEVICE_LINE.search(text)):
                return
            if LIBJPEG_LINE.match(text):
                if self._libjpeg_said:
                    return
                self._libjpeg_said = True
                line = LIBJPEG_WARNING.format(line=text.strip()).encode()
            if not self._released:  # until the devices are found, every line waits
                self._held.append(line)
                return
            os.write(self._terminal, line)

    def release(self):
        with self._lock:
            self._released = True
            for line in self._held:
                os.write(self._terminal, line)
            self._held = []

    def stop(self):
        """At exit: fd 2 back to the terminal, the rest of the pipe, the held lines."""
        os.dup2(self._terminal, 2)  # closes the pipe's write end: the thread drains it
        self._thread.join(timeout=2)
        self.release()


_filter = _Filter()


def start(accelerator: str) -> None:
    """Filters fd 2 for the rest of the process; call before a framework is imported."""
    _filter.start(accelerator)


def release() -> None:
    """The devices were found: held lines, and all later ones, go out."""
    _filter.release()
