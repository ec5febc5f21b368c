"""The data door: what a folder dataset lets in (preprocessing/datasets/folder.py,
preprocessing/files.py) and what every decoder refuses before decoding (host/images.py,
tfdata/images.py, device/decode.py).

Every trap is a real file in a temporary folder: PNGs and JPEGs written by Pillow, a
20000 x 20000 PNG streamed through zlib (50 MB of pixels, 50 KB on disk), a JPEG whose
frame header says 20000 x 20000, a FIFO (os.mkfifo), a link to /dev/zero, names that
are not UTF-8 (bytes paths). Two real runs: the traps together on the JAX backend, and
a folder of one class (exit 2, one line, no run folder).
"""

import contextlib
import io
import json
import os
import signal
import struct
import zlib

import numpy as np
import pytest
from conftest import error_lines, run_cli
from PIL import Image

from preprocessing import spec
from preprocessing import files as paths
from preprocessing.datasets import folder
from preprocessing.spec import BatchShape, DataError, InputSpec

HUGE = 20_000  # pixels a side: 400 million, over paths.MAX_PIXELS


@contextlib.contextmanager
def deadline(seconds=20):
    """Fails the test instead of hanging it, should a FIFO's open ever block."""
    def expired(*_):
        raise TimeoutError(f"blocked for {seconds} s: a FIFO or a device was opened")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def image_bytes(color, kind="PNG", side=16) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((side, side, 3), color, np.uint8)).save(buffer, kind)
    return buffer.getvalue()


def huge_png() -> bytes:
    """A real, complete 20000 x 20000 1-bit PNG, its rows streamed through zlib."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    row = b"\x00" + bytes(-(-HUGE // 8))
    packer = zlib.compressobj(9)
    pixels = b"".join(packer.compress(row * 500) for _ in range(HUGE // 500)) + packer.flush()
    header = struct.pack(">IIBBBBB", HUGE, HUGE, 1, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels)
            + chunk(b"IEND", b""))


def huge_jpeg() -> bytes:
    """A Pillow JPEG whose frame header (SOF0) is made to say 20000 x 20000."""
    data = bytearray(image_bytes((200, 30, 30), "JPEG"))
    at = 2
    while data[at + 1] != 0xC0:  # walk the markers to the frame header
        at += 2 + int.from_bytes(data[at + 2:at + 4], "big")
    data[at + 5:at + 9] = struct.pack(">HH", HUGE, HUGE)
    return bytes(data)


def corrupt_jpeg() -> bytes:
    return image_bytes((10, 200, 10), "JPEG")[:200] + bytes(300)


def write(path, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def write_classes(root, classes=("c1", "c2", "c3"), per_split=(4, 2)) -> None:
    for index, label in enumerate(classes):
        color = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30)][index % 4]
        for split, count in zip(("train", "validation"), per_split):
            for i in range(count):
                write(os.path.join(root, split, label, f"{i}.png"), image_bytes(color))


def write_traps(root) -> dict:
    """Every trap of the door in one folder of 3 real classes; returns what the
    listing and the decoders must skip."""
    root = str(root)
    write_classes(root)
    train = os.path.join(root, "train")
    write(os.path.join(train, ".ipynb_checkpoints", "0.png"), image_bytes((9, 9, 9)))
    write(os.path.join(train, ".DS_Store"), b"\x00\x00\x00\x01Bud1")
    os.makedirs(os.path.join(train, "empty"))
    os.mkfifo(os.path.join(train, "c1", "pipe.jpg"))
    os.symlink("/dev/zero", os.path.join(train, "c1", "zero.jpg"))
    write(os.path.join(train, "c2", "huge.png"), huge_png())
    write(os.path.join(train, "c2", "huge.jpg"), huge_jpeg())
    write(os.path.join(train, "c3", "bad.jpg"), corrupt_jpeg())
    latin1 = os.path.join(os.fsencode(train), b"caf\xe9")  # a class name, not UTF-8
    os.makedirs(latin1)
    write(os.path.join(latin1, b"0.png"), image_bytes((1, 2, 3)))
    write(os.path.join(os.fsencode(train), b"c3", b"\xff.png"), image_bytes((30, 30, 200)))
    return {"folders": ["train/.ipynb_checkpoints (hidden)", "train/caf\\xe9 (name not UTF-8)",
                        "train/empty (no usable .jpg/.jpeg/.png files)"],
            "files": ["train/c1/pipe.jpg (not a regular file)",
                      "train/c1/zero.jpg (not a regular file)",
                      "train/c3/\\xff.png (name not UTF-8)"],
            "undecodable": ["train/c2/huge.jpg", "train/c2/huge.png", "train/c3/bad.jpg"]}


def input_spec(pipeline, **extra):
    return InputSpec(data_dir="", image_size=8, batch=BatchShape(4), seed=0, preset="small",
                     input_pipeline=pipeline, **extra)


# ---- the listing -------------------------------------------------------------------

def test_classes_are_visible_non_empty_folders_and_the_rest_is_named(tmp_path, capsys):
    traps = write_traps(tmp_path)
    with deadline():
        listed = folder.scan_split(str(tmp_path), "train")
        assert folder.check_root(str(tmp_path), with_validation=True) == 4 * 3 + 3
    assert listed.labels == ["c1", "c2", "c3"]
    assert listed.skipped_folders == traps["folders"]
    assert listed.skipped_files == traps["files"]
    assert sorted(os.path.relpath(p, tmp_path) for p, _ in listed.records if "/c2/" in p) == [
        "train/c2/0.png", "train/c2/1.png", "train/c2/2.png", "train/c2/3.png",
        "train/c2/huge.jpg", "train/c2/huge.png"]  # regular files: the decoders judge them
    note = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert len(note) == 1 and "3 folder(s) that are not classes" in note[0]
    assert "train/.ipynb_checkpoints (hidden)" in note[0] and "3 file(s) never opened" in note[0]


def test_the_checks_listing_is_reused_until_a_folder_changes(tmp_path):
    write_classes(tmp_path)
    folder.check_root(str(tmp_path), with_validation=True)
    first = folder._splits(str(tmp_path), True)
    assert folder._splits(str(tmp_path), True) is first  # no second stat of every file
    os.mkfifo(tmp_path / "train" / "c2" / "late.jpg")  # the folder changes: listed again
    again = folder._splits(str(tmp_path), True)
    assert again is not first and again[0].skipped_files == [
        "train/c2/late.jpg (not a regular file)"]


def test_a_label_folder_that_links_back_is_refused_in_one_line(tmp_path):
    write_classes(tmp_path)
    os.symlink(".", tmp_path / "train" / "c4")
    with pytest.raises(DataError, match=r"train/c4 links back to .*, a loop") as error:
        folder.check_root(str(tmp_path), with_validation=True)
    assert "\n" not in str(error.value)
    os.remove(tmp_path / "train" / "c4")
    os.symlink("..", tmp_path / "train" / "c4")  # the dataset's root: a loop too
    with pytest.raises(DataError, match="a loop"):
        folder.scan_split(str(tmp_path), "train")


@pytest.mark.parametrize("extra", [{}, {"train/.ipynb_checkpoints/0.png": 1, "train/empty/": 0}])
def test_one_class_is_refused_naming_the_folder_and_the_class(tmp_path, extra):
    write_classes(tmp_path, classes=("cat",))
    for name, content in extra.items():
        if content:
            write(os.path.join(tmp_path, name), image_bytes((5, 5, 5)))
        else:
            os.makedirs(os.path.join(tmp_path, name))
    with pytest.raises(DataError) as error:
        folder.check_root(str(tmp_path), with_validation=True)
    assert f"{tmp_path / 'train'} has one class folder (cat); a classifier needs at least 2" \
        in str(error.value)
    assert ("not classes: train/.ipynb_checkpoints (hidden)" in str(error.value)) == bool(extra)


def test_only_regular_files_of_bounded_size_are_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.jpg")
    os.symlink("/dev/zero", tmp_path / "zero.jpg")
    os.symlink(tmp_path / "nowhere.jpg", tmp_path / "dangling.jpg")
    write(tmp_path / "ok.png", image_bytes((1, 2, 3)))
    assert paths.unreadable_why(str(tmp_path / "pipe.jpg")) == "not a regular file"
    assert paths.unreadable_why(str(tmp_path / "zero.jpg")) == "not a regular file"
    assert paths.unreadable_why(str(tmp_path / "dangling.jpg")).startswith("cannot be read")
    assert paths.unreadable_why(str(tmp_path / "ok.png")) is None
    with open(tmp_path / "sparse.png", "wb") as f:  # 2 GiB, sparse: nothing is written
        f.truncate(2 << 30)
    assert paths.unreadable_why(str(tmp_path / "sparse.png")) == "larger than 1 GiB"
    from preprocessing.host import images as host_images
    from preprocessing.tfdata import images as tf_images

    with deadline():
        for name in ("pipe.jpg", "zero.jpg", "sparse.png"):
            assert not host_images.decodes_file(str(tmp_path / name))
            assert not tf_images.decodes_file(str(tmp_path / name))
            with pytest.raises(host_images.UndecodableImage):
                host_images.read_image_file(str(tmp_path / name))
        assert host_images.decodes_file(str(tmp_path / "ok.png"))


def test_a_dataset_path_that_is_not_utf8_is_one_line(tmp_path):
    root = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"caf\xe9"))
    write_classes(root)
    with pytest.raises(DataError, match=r"caf\\xe9/train: the path is not UTF-8 text"):
        folder.check_root(root, with_validation=True)


def test_names_that_are_not_utf8_are_shown_escaped():
    assert paths.shown(os.fsdecode(b"caf\xe9")) == "caf\\xe9"
    assert paths.shown("chat noir") == "chat noir"
    assert paths.shown("a\nb") == "a\\nb"


# ---- the pixel bound, from the header, in every decoder ------------------------------

@pytest.mark.parametrize("make", [huge_png, huge_jpeg], ids=["png", "jpeg"])
def test_an_image_over_the_pixel_bound_is_refused_from_its_header(make, tmp_path):
    import tensorflow as tf

    from preprocessing.device.decode import decode_records
    from preprocessing.host import images as host_images
    from preprocessing.tfdata import images as tf_images

    data = make()
    assert HUGE * HUGE > paths.MAX_PIXELS
    with pytest.raises(host_images.UndecodableImage, match="pixel bound, not decoded"):
        host_images.decode(data)  # the grain and device pipelines' decoder
    with pytest.raises(host_images.UndecodableImage, match="pixel bound"):
        host_images.train_transform("standard", 8)(data, np.random.default_rng(0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="pixel bound, not decoded"):
        tf_images.decode(tf.constant(data))
    for crop in (lambda e: tf_images.decode_and_random_crop(e, tf.constant([1, 2])),
                 lambda e: tf_images.decode_and_center_crop(e, 8)):
        with pytest.raises(tf.errors.InvalidArgumentError, match="pixel bound"):
            crop(tf.constant(data))
    write(tmp_path / "huge.img", data)
    write(tmp_path / "ok.png", image_bytes((1, 2, 3)))
    split = decode_records([(str(tmp_path / "huge.img"), 0), (str(tmp_path / "ok.png"), 1)])
    assert (len(split), split.skipped, split.skipped_names) == (1, 1, [str(tmp_path / "huge.img")])


def test_the_size_sample_reads_a_bomb_without_a_traceback(tmp_path):
    write_classes(tmp_path, per_split=(1, 1))
    write(tmp_path / "train" / "c1" / "huge.png", huge_png())
    write(tmp_path / "train" / "c2" / "huge.jpg", huge_jpeg())
    assert folder.median_side(str(tmp_path)) == 16  # Pillow's DecompressionBombError, caught


def test_an_image_at_the_bound_still_decodes():
    from preprocessing.host import images as host_images

    assert host_images.decode(image_bytes((1, 2, 3), "PNG", side=300)).shape == (300, 300, 3)


# ---- the streams: counted and named, on tf.data, grain and the device pipeline ------

@pytest.mark.parametrize("pipeline", ["tf.data", "grain", "device"])
def test_what_is_skipped_is_counted_and_named_by_every_pipeline(pipeline, tmp_path):
    traps = write_traps(tmp_path)
    with deadline(120):
        data = folder.make(f"folder:{tmp_path}", input_spec(pipeline, backend="jax" if pipeline ==
                                                       "device" else "tensorflow"))
        assert data.num_classes == 3 and data.input_pipeline == pipeline
        batches = iter(data.train)
        for _ in range(8):  # two epochs of the 12 good images, by 4
            images, labels = next(batches)[:2]
            assert tuple(images.shape) == (4, 8, 8, 3) and int(np.max(labels)) <= 2
        if data.validation is not None:
            for _ in data.validation:
                pass
        skipped = len(traps["files"]) + len(traps["undecodable"])
        assert data.skipped_images() == skipped  # each once, not once per epoch
        assert sorted(data.skipped_names()) == sorted(traps["files"] + traps["undecodable"])


def test_tf_data_reads_a_corrupt_jpeg_again_without_libjpegs_bare_line(tmp_path, capfd):
    from preprocessing.tfdata import images as tf_images

    write(tmp_path / "bad.jpg", corrupt_jpeg())
    assert not tf_images.decodes_file(str(tmp_path / "bad.jpg"))
    assert "Input file read error" not in capfd.readouterr().err


def test_the_closing_line_names_the_first_skipped_images():
    assert spec.skipped_line(0, []) is None
    assert spec.skipped_line(1, ["train/cat/bad.jpg"]) == (
        "skipped 1 image that could not be read or decoded: train/cat/bad.jpg")
    assert spec.skipped_line(5, ["a", "b", "c", "d"]) == (
        "skipped 5 images that could not be read or decoded: a, b, c and 2 more")
    assert spec.skipped_line(2, None) == "skipped 2 images that could not be read or decoded"


# ---- real runs ---------------------------------------------------------------------

@pytest.mark.slow
def test_a_run_on_jax_trains_past_every_trap_with_the_right_classes(tmp_path):
    traps = write_traps(tmp_path / "traps")
    logdir = tmp_path / "run"
    done = run_cli(f"--dataset=folder:{tmp_path / 'traps'}", "--backend=jax",
                   "--model=small_resnet", "--global_batch_size=4", "--epochs=1",
                   "--verbose=0", "--seed=0", f"--logdir={logdir}", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["num_classes"] == 3 and summary["train_examples"] == 4 * 3 + 3
    assert summary["corrupt_images_skipped"] == len(traps["files"]) + len(traps["undecodable"])
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "train/caf\\xe9 (name not UTF-8)" in notes[0]
    # The closing lines name the first skipped images, as summary.json does.
    skipped = summary["corrupt_images_skipped"]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("skipped ")]
    assert line.startswith(f"skipped {skipped} images that could not be read or decoded: ")
    assert summary["skipped_image_names"] and all(
        name in line for name in summary["skipped_image_names"][:3])
    assert "(not a regular file)" in line


def test_a_run_on_one_class_is_one_line_and_no_run_folder(tmp_path):
    write_classes(tmp_path / "cats", classes=("cat",))
    done = run_cli(f"--dataset=folder:{tmp_path / 'cats'}", f"--logdir={tmp_path / 'run'}",
                   "--epochs=1", timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert error_lines(done.stderr) == [
        f"error: {tmp_path / 'cats' / 'train'} has one class folder (cat); a classifier "
        f"needs at least 2; expected {folder.LAYOUT}"]
    assert "Traceback" not in done.stderr and not (tmp_path / "run").exists()


# ---- where the data comes from -----------------------------------------------------

def test_a_data_dir_that_is_not_there_is_one_line_and_the_banner_names_what_was_read(
        tmp_path):
    """--dataset=fashion_mnist --data_dir=/nothing_here trained 97 minutes from Debian's copy
    with no word of it: a --data_dir that is not there is one line, and the banner names
    the folder read. "~" in a path flag is the user's home, as a shell would have it."""
    from fashion_files import write_fashion
    from processes import run

    home = tmp_path / "home"
    done = run(["--dataset=fashion_mnist", f"--data_dir={tmp_path / 'nothing_here'}",
                f"--logdir={tmp_path / 'run'}"])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert error_lines(done.stderr) == [
        f"error: --data_dir={tmp_path / 'nothing_here'} is not there (no such folder); "
        "accepted: an existing folder that holds the data (or no --data_dir: its default)"]
    write_fashion(str(home / "fm"))
    done = run(["--dataset=fashion_mnist", "--data_dir=~/fm", "--epochs=1",
                "--steps_per_epoch=2", "--validation_steps=1", "--global_batch_size=16",
                f"--logdir={tmp_path / 'run'}", "--verbose=0"],
               env={"HOME": str(home), "MPLCONFIGDIR": str(home / ".config" / "matplotlib")})
    assert done.returncode == 0, done.stderr[-2000:]
    banner = done.stdout.splitlines()[0]
    assert banner.startswith(f"[small_resnet on fashion_mnist from {home / 'fm'}] "), banner
    # A fresh machine: matplotlib, which Keras (and so TensorFlow) would import, built its
    # font cache and said so in an absl line before the banner. The run imports it no
    # more (app/engine/cold_start.py): no font cache, no line.
    assert not (home / ".config" / "matplotlib").exists() and "fontManager" not in done.stderr

    write_classes(home / "photos")  # 12 training images
    done = run(["--dataset=folder:~/photos", "--global_batch_size=64",
                f"--logdir={tmp_path / 'run2'}"], env={"HOME": str(home)})
    assert error_lines(done.stderr) == [
        f"error: --global_batch_size=64 is more than the 12 training images of folder:"
        f"{home / 'photos'}; accepted: at most 12 images a call (e.g. --global_batch_size=8), "
        "or --steps_per_epoch to repeat the images"]
