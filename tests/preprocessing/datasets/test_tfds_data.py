"""TFDS datasets on the JAX backend where TensorFlow is missing (like the H200 hosts).

Preparing a TFDS dataset needs TensorFlow; reading its ArrayRecord files does not. So
the tests prepare with TensorFlow (here, or through `python -m preprocessing.datasets.tfds_data`)
and then train through the real command line in a subprocess where `import tensorflow`
fails (tests/no_tensorflow first on PYTHONPATH).
"""

import dataclasses
import json
import os
import pickle
import subprocess
import sys

import pytest
from conftest import PATIENCE_SECONDS, ROOT, error_lines, run_cli
from image_files import write_imagenet_manual_download
from tiny_tfds import TINY, tiny_builder

NO_TF = {"PYTHONPATH": os.path.join(ROOT, "tests", "no_tensorflow")}
TRAIN = ["--backend=jax", "--input_pipeline=grain", "--model=small_resnet",
         "--global_batch_size=8", "--epochs=1", "--steps_per_epoch=4", "--verbose=0",
         "--seed=0"]


def prepare_for_grain(*args):
    """`python -m preprocessing.datasets.tfds_data ARGS`, with TensorFlow (the CPU machine's step)."""
    return subprocess.run([sys.executable, "-m", "preprocessing.datasets.tfds_data", *args],
                          capture_output=True, text=True,
                          timeout=PATIENCE_SECONDS, cwd=ROOT)


def summary_of(logdir):
    return json.loads((logdir / "summary.json").read_text())


def assert_trained_without_tensorflow(done, logdir, train, validation, classes,
                                      indexed=False):
    assert done.returncode == 0, done.stderr[-3000:]
    assert "preparing" not in done.stdout and "adding" not in done.stdout  # read only
    assert ("indexing the labels" in done.stdout) == indexed
    summary = summary_of(logdir)
    assert summary["input_pipeline"] == "grain" and summary["backend"] == "jax"
    assert summary["num_classes"] == classes and summary["train_examples"] == train
    assert summary["validation_examples"] == validation  # every validation image counted
    assert summary["corrupt_images_skipped"] == 0
    assert len(summary["val_top1_by_epoch"]) == 1  # validated after the epoch
    assert "tensorflow" not in summary["versions"] and summary["versions"]["jax"]


def test_imagenet_prepared_as_array_record_trains_without_tensorflow(tmp_path):
    made = write_imagenet_manual_download(str(tmp_path / "manual"))
    data, manual = tmp_path / "data", tmp_path / "manual"
    prepared = prepare_for_grain("--dataset=imagenet2012", f"--manual_dir={manual}",
                                 f"--data_dir={data}")
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    assert "preparing ImageNet 2012 from" in prepared.stdout
    folder = data / "imagenet2012" / "5.1.0"
    info = json.loads((folder / "dataset_info.json").read_text())
    assert info["fileFormat"] == "array_record"
    assert (folder / "app-labels-train.npz").exists()
    assert (folder / "app-labels-validation.npz").exists()

    logdir = tmp_path / "run"
    done = run_cli(*TRAIN, "--dataset=imagenet2012", f"--manual_dir={manual}",
                   f"--data_dir={data}", "--image_size=32", f"--logdir={logdir}", env=NO_TF)
    assert_trained_without_tensorflow(done, logdir, made["train"], made["validation"], 1000)
    assert summary_of(logdir)["preprocessing"] == "standard"


def test_a_tfds_dataset_prepared_as_array_record_trains_without_tensorflow(tmp_path):
    tiny_builder(tmp_path / "tfds", file_format="array_record").download_and_prepare()
    logdir = tmp_path / "run"
    done = run_cli(*TRAIN, f"--dataset={TINY}", f"--data_dir={tmp_path / 'tfds'}",
                   f"--logdir={logdir}", env=NO_TF)
    # TFDS alone prepared it, so the first run reads the labels once and keeps them.
    assert_trained_without_tensorflow(done, logdir, 60, 15, 3, indexed=True)
    assert summary_of(logdir)["image_size"] == 12
    assert summary_of(logdir)["preprocessing"] == "small"
    assert (tmp_path / "tfds" / "tiny_shapes" / "1.0.0" / "app-labels-train.npz").exists()


@pytest.fixture(scope="module")
def tfrecord_only(tmp_path_factory):
    """tiny_shapes prepared the default way: TFRecord files only."""
    data_dir = tmp_path_factory.mktemp("tfrecord")
    tiny_builder(data_dir).download_and_prepare()
    return data_dir


def test_a_tfrecord_only_dataset_is_one_line_without_tensorflow(tfrecord_only, tmp_path):
    listing = sorted(os.listdir(tfrecord_only / "tiny_shapes" / "1.0.0"))
    done = run_cli(*TRAIN, f"--dataset={TINY}", f"--data_dir={tfrecord_only}",
                   f"--logdir={tmp_path / 'run'}", env=NO_TF)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = error_lines(done.stderr)
    assert len(errors) == 1 and "as TFRecord only" in errors[0]
    assert (f"`python -m preprocessing.datasets.tfds_data --dataset={TINY} "
            f"--data_dir={tfrecord_only}`") in errors[0]
    assert not (tmp_path / "run").exists()
    assert sorted(os.listdir(tfrecord_only / "tiny_shapes" / "1.0.0")) == listing


def test_imagenet_not_prepared_without_tensorflow_is_one_line(tmp_path):
    done = run_cli(*TRAIN, "--dataset=imagenet2012", f"--manual_dir={tmp_path / 'manual'}",
                   f"--data_dir={tmp_path / 'data'}", f"--logdir={tmp_path / 'run'}",
                   env=NO_TF)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = error_lines(done.stderr)
    assert len(errors) == 1 and "preparing it needs TensorFlow" in errors[0]
    assert (f"`python -m preprocessing.datasets.tfds_data --dataset=imagenet2012 "
            f"--data_dir={tmp_path / 'data'} --manual_dir={tmp_path / 'manual'}`") in errors[0]
    assert not (tmp_path / "run").exists() and not (tmp_path / "data").exists()


def test_array_record_files_are_added_beside_tfrecord_ones_then_read_without_tf(
        tfrecord_only, tmp_path):
    import shutil

    data_dir = tmp_path / "tfds"
    shutil.copytree(tfrecord_only, data_dir)
    prepared = prepare_for_grain(f"--dataset={TINY}", f"--data_dir={data_dir}")
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    assert "adding ArrayRecord files beside the TFRecord files" in prepared.stdout
    folder = data_dir / "tiny_shapes" / "1.0.0"
    info = json.loads((folder / "dataset_info.json").read_text())
    assert info["fileFormat"] == "tfrecord"  # tf.data still reads the TFRecord files
    assert info["alternativeFileFormats"] == ["array_record"]
    logdir = tmp_path / "run"
    done = run_cli(*TRAIN, f"--dataset={TINY}", f"--data_dir={data_dir}",
                   f"--logdir={logdir}", env=NO_TF)
    assert_trained_without_tensorflow(done, logdir, 60, 15, 3)


@pytest.fixture(scope="module")
def array_record_only(tmp_path_factory):
    """tiny_shapes prepared by TFDS as ArrayRecord files only."""
    data_dir = tmp_path_factory.mktemp("array_record")
    tiny_builder(data_dir, file_format="array_record").download_and_prepare()
    return data_dir


def test_an_array_record_only_dataset_on_tf_data_is_one_line(array_record_only, tmp_path):
    done = run_cli("--backend=tensorflow", f"--dataset={TINY}",
                   f"--data_dir={array_record_only}", f"--logdir={tmp_path / 'run'}")
    assert done.returncode == 2, done.stderr[-3000:]
    errors = error_lines(done.stderr)
    assert len(errors) == 1 and "as ArrayRecord only" in errors[0]
    assert "--input_pipeline=grain" in errors[0] and not (tmp_path / "run").exists()


def test_records_are_lazy_picklable_getters_of_encoded_bytes(array_record_only):
    """What streams.make gets: (callable -> bytes, int) pairs made only when asked for;
    a getter pickles small (grain's spawned workers receive it) and reads the record."""
    from preprocessing.datasets import tfds_data, tfds_records
    from preprocessing.spec import BatchShape, InputSpec

    spec = InputSpec(data_dir=str(array_record_only), image_size=0, batch=BatchShape(4),
                     backend="jax", input_pipeline="grain")
    builder = tfds_data.prepare_array_record(TINY, spec)
    reader = tfds_records.SplitReader(builder, "train", "image", "label")
    records = tfds_records.Records(reader, tfds_records.labels_of(TINY, reader))
    assert len(records) == 60 and len(records[1::2]) == 30
    getter, label = records[1::2][3]  # record 7
    assert isinstance(label, int) and label == records[7][1]
    data = pickle.loads(pickle.dumps(getter))()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"  # encoded, not decoded by TFDS
    assert len(pickle.dumps(list(records))) < 20_000  # one reader, shared by all getters
    assert sorted(set(records.labels.tolist())) == [0, 1, 2]
    shard = records[1::3]
    assert shard.label_array().tolist() == [label for _, label in shard]
    assert shard.read(2) == shard[2][0]()


def test_the_gpu_pipeline_is_refused_until_it_reads_records(array_record_only):
    from preprocessing.datasets import tfds_data
    from preprocessing.spec import BatchShape, DataError, InputSpec

    if tfds_data.GPU_READS_CALLABLES:
        pytest.skip("gpu_pipeline reads callables")
    spec = InputSpec(data_dir=str(array_record_only), image_size=0, batch=BatchShape(4),
                     backend="jax", input_pipeline="gpu", accelerator="gpu")
    with pytest.raises(DataError, match="use --input_pipeline=grain"):
        tfds_data._check_for_random_access(TINY, spec)


def test_a_partial_copy_is_one_line_before_anything_is_read(array_record_only, tmp_path):
    import shutil

    from preprocessing.datasets import tfds_data
    from preprocessing.spec import BatchShape, DataError, InputSpec

    shutil.copytree(array_record_only, tmp_path / "copy")
    folder = tmp_path / "copy" / "tiny_shapes" / "1.0.0"
    os.remove(folder / "tiny_shapes-test.array_record-00000-of-00001")
    spec = InputSpec(data_dir=str(tmp_path / "copy"), image_size=0, batch=BatchShape(4),
                     backend="jax", input_pipeline="grain")
    with pytest.raises(DataError, match="holds 0 of the 1 ArrayRecord shards of split 'test'"):
        tfds_data.check(TINY, spec)
    tfds_data.check(TINY, dataclasses.replace(spec, with_validation=False))


def test_grain_source_keeps_a_tfds_split_whole_not_a_getter_per_record(array_record_only):
    """grain's FileSource takes a Records view as one reader plus a label array, so what
    its spawned workers unpickle does not grow with an object per record."""
    from preprocessing.datasets import tfds_data, tfds_records
    from preprocessing.host.grain_stream import FileSource
    from preprocessing.spec import BatchShape, InputSpec

    spec = InputSpec(data_dir=str(array_record_only), image_size=0, batch=BatchShape(4),
                     backend="jax", input_pipeline="grain")
    builder = tfds_data.prepare_array_record(TINY, spec)
    reader = tfds_records.SplitReader(builder, "train", "image", "label")
    records = tfds_records.Records(reader, tfds_records.labels_of(TINY, reader))[1::2]
    source = FileSource(records)
    again = pickle.loads(pickle.dumps(source))
    assert len(again) == 30
    index, data, label = again[3]  # record 7 of the split
    assert data == records.read(3) and label == records[3][1]
    assert source._getters is None  # no per-record objects were built
