"""A run resumes only on the same data, by content: two classes swapped or one image
replaced between a kill and the rerun is refused in one line, the same data resumes.
The fingerprint itself: preprocessing/datasets/fingerprint.py."""

import os
import random

import pytest
from conftest import error_lines
from image_files import class_image, encode, write_folder_dataset
from processes import killed_at, run, snapshot

from app.run import resume
from app.run.rundir import RunDirError
from preprocessing.datasets import fingerprint, folder

LISTING = [("train/cat/a.jpg", 1200, 1_700_000_000_000_000_001),
           ("train/cat/b.jpg", 1300, 1_700_000_000_000_000_002),
           ("train/dog/c.jpg", 900, 1_700_000_000_000_000_003),
           ("validation/cat/d.jpg", 800, 1_700_000_000_000_000_004)]


def changed(index, path=None, size=None, mtime=None):
    entries = list(LISTING)
    old = entries[index]
    entries[index] = (path or old[0], size or old[1], mtime or old[2])
    return entries


def test_the_same_listing_gives_the_same_digest_in_any_order():
    first = fingerprint.of_listing(LISTING)
    shuffled = list(LISTING)
    random.Random(3).shuffle(shuffled)
    assert fingerprint.of_listing(shuffled) == first == fingerprint.of_listing(list(LISTING))
    assert set(first["parts"]) == {"train/cat", "train/dog", "validation/cat"}
    assert fingerprint.differences(first, fingerprint.of_listing(shuffled)) is None


def test_a_rename_between_classes_a_size_or_a_time_changes_the_digest():
    first = fingerprint.of_listing(LISTING)
    moved = fingerprint.of_listing(changed(1, path="train/dog/b.jpg"))
    resized = fingerprint.of_listing(changed(2, size=901))
    touched = fingerprint.of_listing(changed(3, mtime=1_700_000_000_000_000_005))
    assert len({first["digest"], moved["digest"], resized["digest"], touched["digest"]}) == 4
    assert fingerprint.differences(first, moved) == \
        "2 class folders differ: train/cat, train/dog"
    assert fingerprint.differences(first, resized) == "1 class folder differs: train/dog"
    assert fingerprint.differences(first, touched) == "1 class folder differs: validation/cat"


def test_a_recorded_fingerprint_is_read_as_untrusted():
    now = fingerprint.of_listing(LISTING)
    assert fingerprint.differences(["not", "one"], now) == \
        "its recorded fingerprint cannot be read"
    assert fingerprint.differences({"digest": "x", "kind": "files", "parts": 7}, now) == \
        "its content differs"
    odd = {"digest": "x", "kind": "files", "parts": {**now["parts"], "train/\n" + "e" * 500: "1"}}
    line = fingerprint.differences(odd, now)
    assert "\n" not in line and len(line) < 200 and line.endswith("(gone)")
    # validation turned off since: its folders are not a difference of the data
    train_only = fingerprint.of_listing([e for e in LISTING if e[0].startswith("train/")])
    assert fingerprint.differences(now, train_only) is None


def test_a_checkpoint_from_before_fingerprints_resumes_on_its_counts(monkeypatch):
    counts = {"train_examples": 3, "validation_examples": 1, "num_classes": 2,
              "steps_per_epoch": 1}
    now = {**counts, "fingerprint": fingerprint.of_listing(LISTING)}
    saved = {"data": dict(counts)}  # an older run folder's checkpoint: no fingerprint
    monkeypatch.setattr(resume, "latest_checkpoint", lambda logdir: ("ckpt", saved))
    resume.check_same_data("run", now)  # resumes, as it did before
    saved["data"]["fingerprint"] = fingerprint.of_listing(changed(0, size=1))
    with pytest.raises(RunDirError, match="^--logdir=run was trained on other data: 1 class "
                                          "folder differs: train/cat; rerun on the same data"):
        resume.check_same_data("run", now)


def test_the_folder_listing_gives_the_fingerprint_of_its_files(tmp_path):
    write_folder_dataset(str(tmp_path), classes=("cat", "dog"), per_class=3, corrupt=0)
    entries = []
    for base, _, files in os.walk(tmp_path):
        for name in files:
            path = os.path.join(base, name)
            info = os.stat(path)
            entries.append((os.path.relpath(path, tmp_path), info.st_size, info.st_mtime_ns))
    splits = [folder.scan_split(str(tmp_path), "train")]
    splits.append(folder.scan_split(str(tmp_path), "validation", splits[0].labels))
    parts = {k: v for split in splits for k, v in split.digests.items()}
    assert fingerprint.of_parts("files", parts) == fingerprint.of_listing(entries)


def folder_flags(root, logdir):
    return [f"--dataset=folder:{root}", f"--logdir={logdir}", "--image_size=16",
            "--global_batch_size=8", "--epochs=3", "--validation_steps=1", "--seed=1",
            "--verbose=0"]


def refused(root, logdir, what):
    """The rerun is one line naming `what`, and changes neither folder."""
    run_before, data_before = snapshot(logdir), snapshot(root)
    done = run(folder_flags(root, logdir))
    errors = error_lines(done.stderr)
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    assert errors[0] == (f"error: --logdir={logdir} was trained on other data: {what}; rerun "
                         "on the same data to resume, or pass --fresh to start over")
    assert "Traceback" not in done.stderr
    assert snapshot(logdir) == run_before and snapshot(root) == data_before


def test_a_rerun_on_swapped_classes_or_a_replaced_image_is_refused_the_same_data_resumes(
        tmp_path):
    root, logdir = tmp_path / "animals", tmp_path / "run"
    write_folder_dataset(str(root), corrupt=0)  # cat, dog, fox: 12 training images each
    killed_at(folder_flags(root, logdir), "checkpoint_committed", 2)
    train = root / "train"
    os.rename(train / "cat", train / "swap")  # the same counts, the labels swapped
    os.rename(train / "dog", train / "cat")
    os.rename(train / "swap", train / "dog")
    refused(root, logdir, "2 class folders differ: train/cat, train/dog")
    os.rename(train / "cat", train / "swap")
    os.rename(train / "dog", train / "cat")
    os.rename(train / "swap", train / "dog")

    image = train / "fox" / "fox_003.jpg"
    original, times = image.read_bytes(), os.stat(image)
    image.write_bytes(encode(class_image("n1", 3)))  # a cat's picture in the fox folder
    refused(root, logdir, "1 class folder differs: train/fox")
    image.write_bytes(original)
    os.utime(image, ns=(times.st_atime_ns, times.st_mtime_ns))

    done = run(folder_flags(root, logdir))  # the same data again: it resumes
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resuming from " in done.stdout and "status: completed" in done.stdout


def test_a_tfds_dataset_is_its_builder_splits_and_record_files(tmp_path):
    import numpy as np
    from tiny_tfds import TINY, tiny_builder

    from preprocessing.datasets import tfds_data
    from preprocessing.spec import InputSpec

    tiny_builder(tmp_path).download_and_prepare()
    spec = InputSpec(data_dir=str(tmp_path), image_size=0)
    first = tfds_data._fingerprint(TINY, spec, "tfrecord")
    assert first["parts"]["builder"] == "tiny_shapes:1.0.0"
    assert first["parts"]["split train"] == "60" and first["parts"]["split test"] == "15"
    records = [name for name in first["parts"] if ".tfrecord-" in name]
    assert records and tfds_data._fingerprint(TINY, spec, "tfrecord") == first
    with open(tmp_path / "tiny_shapes" / "1.0.0" / records[0], "ab") as f:
        f.write(b"\0")  # a record file of another size
    assert fingerprint.differences(first, tfds_data._fingerprint(TINY, spec, "tfrecord")) \
        == f"1 part differs: {records[0]}"

    images = np.zeros((3, 4, 4), np.uint8)
    idx = fingerprint.of_arrays({"train-images-idx3-ubyte": images})
    images[1, 2, 3] = 1  # one pixel of one image
    assert fingerprint.differences(idx, fingerprint.of_arrays(
        {"train-images-idx3-ubyte": images})) == "1 file differs: train-images-idx3-ubyte"
