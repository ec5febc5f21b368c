"""preprocessing/host/native/prctl.py: the host wing's foreign call, prctl's parent-death
signal, asked and read back in a forked child (this test's own process is left as it
was), and refused with the errno named."""

import errno
import os
import signal
import struct

from preprocessing.host.native import prctl


def _in_a_child(work) -> tuple[int, int]:
    """(first, second) int that `work()` returns in a forked child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no test machinery, only the call and its answer
        code = 0
        try:
            os.write(write, struct.pack("<ii", *work()))
        except BaseException:  # noqa: BLE001 - the parent sees the missing answer
            code = 1
        os._exit(code)
    os.close(write)
    data = os.read(read, 8)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and len(data) == 8
    return struct.unpack("<ii", data)


def test_the_parent_death_signal_is_asked_and_read_back():
    def work():
        before = prctl.parent_death_signal()
        prctl.set_parent_death_signal(signal.SIGKILL)
        return before, prctl.parent_death_signal()

    assert _in_a_child(work) == (0, int(signal.SIGKILL))


def test_a_signal_prctl_refuses_is_an_oserror_with_its_errno():
    def work():
        try:
            prctl.set_parent_death_signal(1000)
        except OSError as error:
            return error.errno, prctl.parent_death_signal()
        return 0, -1

    assert _in_a_child(work) == (errno.EINVAL, 0)
