"""grain_pipeline: order, shards, resumable state, corrupt files, padding, no TF.

Every good image is one flat gray level that names its record, so any batch can
be checked image by image against its labels (crops, resizes and flips keep a
flat image flat).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from preprocessing.host import grain_stream
from preprocessing.host import images as host_images
from tests.conftest import PATIENCE_SECONDS, ROOT
from tests.image_files import encode

GOOD = 48
BAD_LABELS = (1000, 1001, 1002)  # two corrupt files and one missing file


def _level(label: int) -> int:
    return 12 + 4 * label


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("images")
    out = []
    for i in range(GOOD):
        path = folder / f"{i:03d}.jpg"
        path.write_bytes(encode(np.full((20, 16, 3), _level(i), np.uint8)))
        out.append((str(path), i))
        if i == 10:  # the bad ones sit among the good ones
            (folder / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a JPEG")
            out.append((str(folder / "broken.jpg"), BAD_LABELS[0]))
            (folder / "truncated.jpg").write_bytes(encode(np.zeros((64, 64, 3), np.uint8))[:200])
            out.append((str(folder / "truncated.jpg"), BAD_LABELS[1]))
    out.append((str(folder / "missing.jpg"), BAD_LABELS[2]))
    return out


def _labels_of_images(images):
    """The record each image shows, from its gray level (normalized back)."""
    mean, std = np.asarray(host_images.augment.MEAN_RGB), np.asarray(host_images.augment.STDDEV_RGB)
    levels = (np.asarray(images, np.float32)[:, 0, 0] * std + mean).mean(-1)
    return np.rint((levels - 12) / 4).astype(int)


def _take(iterator, n):
    batches = [next(iterator) for _ in range(n)]
    return [(np.array(images, np.float32), np.array(labels)) for images, labels in batches]


def _train(records, seed=3, batch_size=8, workers=0, **kwargs):
    source = grain_stream.FileSource(records)
    transform = host_images.train_transform("standard", 8)
    return source, grain_stream.train_stream(source, batch_size, transform, seed,
                                               workers=workers, **kwargs)


def test_train_stream_is_deterministic_and_reshuffles_every_epoch(records):
    _, first = _train(records)
    _, again = _train(records)
    _, other = _train(records, seed=4)
    batches = _take(first, 2 * GOOD // 8)  # two epochs exactly: the bad are skipped
    labels = np.concatenate([b[1] for b in batches])
    assert labels.dtype == np.int32 and batches[0][0].shape == (8, 8, 8, 3)
    epochs = labels[:GOOD], labels[GOOD:]
    assert sorted(epochs[0]) == sorted(epochs[1]) == list(range(GOOD))
    assert list(epochs[0]) != list(epochs[1])  # reshuffled
    for (images, labels), (images2, labels2) in zip(batches, _take(again, len(batches))):
        np.testing.assert_array_equal(images, images2)
        np.testing.assert_array_equal(labels, labels2)
        np.testing.assert_array_equal(_labels_of_images(images), labels)  # right labels
    assert not np.array_equal(labels[:GOOD], np.concatenate([b[1] for b in _take(other, 6)]))


def test_shards_are_disjoint_and_cover_the_dataset(records):
    seen = []
    for index in range(3):
        good = sum(label < GOOD for _, label in records[index::3])
        _, stream = _train(records, batch_size=1, shard_index=index, shard_count=3)
        seen.append([int(b[1][0]) for b in _take(stream, good)])  # one epoch
    assert sorted(sum(seen, [])) == list(range(GOOD))


@pytest.mark.parametrize("workers", [0, 2])
def test_state_resumes_the_exact_sequence_mid_epoch(records, workers):
    _, original = _train(records, workers=workers)
    _take(original, 3)
    kept = original.get_state()
    state = json.loads(json.dumps(kept))  # JSON, as a checkpoint keeps it
    expected = _take(original, 8)  # across an epoch boundary
    assert kept == state  # a state handed out is not changed as the stream moves on
    original.close()
    _, resumed = _train(records, seed=None, workers=workers)  # the state brings the seed
    resumed.set_state(state)
    for (images, labels), (images2, labels2) in zip(expected, _take(resumed, 8)):
        np.testing.assert_array_equal(images, images2)
        np.testing.assert_array_equal(labels, labels2)
    resumed.close()


def test_state_before_the_first_batch_is_the_start_of_the_stream(records):
    _, original = _train(records, workers=2)
    original.start()  # the first batch is taken in the background, not handed out
    state = json.loads(json.dumps(original.get_state()))
    assert state["grain"] is None  # the start: the seed alone decides what follows
    expected = _take(original, 3)
    original.close()
    _, resumed = _train(records, seed=None, workers=2)
    resumed.set_state(state)
    for (images, labels), (images2, labels2) in zip(expected, _take(resumed, 3)):
        np.testing.assert_array_equal(images, images2)
        np.testing.assert_array_equal(labels, labels2)
    resumed.close()


def _grain_workers() -> int:
    import multiprocessing
    return sum(p.is_alive() for p in multiprocessing.active_children())


@pytest.mark.parametrize("resumed", [False, True])
def test_every_worker_runs_once_the_first_batch_is_out(records, resumed):
    """Grain's first epoch ran at 786 images/sec against 4,955 in its second,
    because its 16 workers started one at a time, as the round robin reached each.
    Here all of them run once the first batch is handed out (fresh, and resumed
    mid-epoch), which is what lets the first epoch go at the second's pace."""
    workers = 3
    _, stream = _train(records, workers=workers, batch_size=2)
    if resumed:
        _take(stream, 5)
        state = stream.get_state()
        stream.close()
        _, stream = _train(records, workers=workers, batch_size=2)
        stream.set_state(state)
    else:
        stream.start()
    _take(stream, 1)
    running = _grain_workers()
    stream.close()
    assert running >= workers


def test_state_of_another_pipeline_is_refused(records):
    _, stream = _train(records)
    state = stream.get_state()
    _, other = _train(records, batch_size=4)
    with pytest.raises(ValueError, match="batch_size=8"):
        other.set_state(state)


def test_corrupt_images_count_once_across_epochs_and_workers(records):
    source, stream = _train(records, workers=2, batch_size=4)
    for images, labels in _take(stream, 3 * GOOD // 4):  # three epochs
        assert set(labels.tolist()).isdisjoint(BAD_LABELS)
        np.testing.assert_array_equal(_labels_of_images(images), labels)
    stream.close()
    assert source.skipped_images() == stream.skipped_images() == len(BAD_LABELS)


def test_skipped_indices_name_each_skipped_record_once(records):
    """Which records were skipped, by index, whichever process failed them (the
    closing lines name their files: preprocessing/streams.py)."""
    source, stream = _train(records, workers=2, batch_size=4)
    assert source.skipped_indices() == []
    _take(stream, 3 * GOOD // 4)  # three epochs: each bad record failed three times
    stream.close()
    bad = [i for i, (_, label) in enumerate(records) if label in BAD_LABELS]
    assert len(bad) == 3 and source.skipped_indices() == bad
    assert grain_stream.FileSource([]).skipped_indices() == []  # its file has one byte


def test_bfloat16_batches(records):
    source = grain_stream.FileSource(records)
    stream = grain_stream.train_stream(
        source, 4, host_images.train_transform("heavy", 8, "bfloat16"), seed=0, workers=0)
    images, labels = next(stream)
    assert str(images.dtype) == "bfloat16" and images.shape == (4, 8, 8, 3)


@pytest.mark.parametrize("workers", [0, 2])
def test_eval_stream_gives_every_image_once_then_weight_0_padding(records, workers):
    source = grain_stream.FileSource(records)
    stream, batches = grain_stream.eval_stream(
        source, 16, host_images.eval_transform("standard", 8), 8, "float32", workers=workers)
    assert batches == -(-len(records) // 16)  # fixed: corrupt images do not change it
    for _ in range(2):  # iterated again at every evaluation
        out = list(stream)
        assert len(out) == batches
        assert all(b[0].shape == (16, 8, 8, 3) and len(b[1]) == len(b[2]) == 16 for b in out)
        images, labels, weights = (np.concatenate(x) for x in zip(*out))
        real = weights == 1
        assert sorted(labels[real]) == list(range(GOOD))
        np.testing.assert_array_equal(_labels_of_images(images[real]), labels[real])
        assert (weights[~real] == 0).all() and (images[~real] == 0).all()
        assert weights.sum() == GOOD
    assert source.skipped_images() == stream.skipped_images() == len(BAD_LABELS)


def test_eval_stream_pads_to_the_largest_shard(records):
    source = grain_stream.FileSource(records[:10])
    transform = host_images.eval_transform("small", 8)
    stream, batches = grain_stream.eval_stream(source, 4, transform, 8, examples=13,
                                                 workers=0)
    out = list(stream)
    assert batches == len(out) == 4 and sum(w.sum() for _, _, w in out) == 10
    with pytest.raises(ValueError, match="examples=9 is fewer than the 10 images"):
        grain_stream.eval_stream(source, 4, transform, 8, examples=9)


def test_eval_stream_shards(records):
    seen = []
    for index in range(2):
        stream, _ = grain_stream.eval_stream(
            grain_stream.FileSource(records), 8, host_images.eval_transform("small", 8), 8,
            shard_index=index, shard_count=2, workers=0)
        seen += [int(l) for _, labels, weights in stream for l, w in zip(labels, weights) if w]
    assert sorted(seen) == list(range(GOOD))


SCRIPT = """
import sys
from preprocessing import augment
from preprocessing.host import grain_stream
from preprocessing.host import images as host_images
records = [(path, label) for path, label in {records!r}]
source = grain_stream.FileSource(records)
stream = grain_stream.train_stream(
    source, 4, host_images.train_transform("heavy", 8, "bfloat16"), seed=1, workers=1)
images, labels = next(stream)
state = stream.get_state()
stream.close()
evaluation, batches = grain_stream.eval_stream(
    source, 8, host_images.eval_transform("standard", 8), 8, "bfloat16", workers=0)
assert len(list(evaluation)) == batches
assert "tensorflow" not in sys.modules, "tensorflow was imported"
print("ok", images.shape, images.dtype, source.skipped_images())
"""


def test_works_without_tensorflow(records, tmp_path):
    script = tmp_path / "no_tf.py"
    script.write_text(f"if __name__ == '__main__':\n" + "".join(
        f"    {line}\n" for line in SCRIPT.format(records=records[:20]).splitlines()))
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "tests", "no_tensorflow"), ROOT])}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=PATIENCE_SECONDS)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok (4, 8, 8, 3) bfloat16" in result.stdout
