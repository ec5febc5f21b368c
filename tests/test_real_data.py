"""Real data, offline: ImageNet's manual download through TFDS's own builder, a folder
of JPEG/PNG files (with corrupt ones), a prepared TFDS dataset, the input benchmark."""

import json
import os
import sys

import pytest
from conftest import error_lines, run_cli
from image_files import write_folder_dataset, write_imagenet_manual_download


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory):
    root = tmp_path_factory.mktemp("imagenet")
    made = write_imagenet_manual_download(str(root / "manual"))
    return root, made


def test_imagenet_is_prepared_from_its_tars_by_tfds_then_trained_and_reused(imagenet):
    root, made = imagenet
    common = ["--dataset=imagenet2012", f"--manual_dir={root / 'manual'}",
              f"--data_dir={root / 'data'}", "--image_size=32", "--global_batch_size=16",
              "--verbose=0", "--seed=0"]
    done = run_cli(*common, "--epochs=4", f"--logdir={root / 'run'}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "preparing ImageNet 2012 from" in done.stdout
    assert os.path.exists(root / "data" / "imagenet2012" / "5.1.0" / "dataset_info.json")
    summary = json.loads((root / "run" / "summary.json").read_text())
    assert summary["num_classes"] == 1000 and summary["train_examples"] == made["train"]
    # Every validation image counted: 16 images, padded to one batch of 16.
    assert summary["validation_examples"] == made["validation"] == 16
    assert all(round(t * 16, 6) == int(round(t * 16)) for t in summary["val_top1_by_epoch"])
    assert summary["val_top5_by_epoch"] and summary["best_val_top1"] >= 0.25  # 17 classes: learns
    again = run_cli(*common, "--epochs=1", f"--logdir={root / 'again'}")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "preparing" not in again.stdout  # prepared once, reused


def test_imagenet_cmyk_and_png_files_come_out_as_rgb_jpegs(imagenet):
    import tensorflow_datasets as tfds

    root, _ = imagenet
    builder = tfds.builder("imagenet2012", data_dir=str(root / "data"))
    if not builder.is_prepared():  # when run alone
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
            manual_dir=str(root / "manual")))
    names = {}
    for example in builder.as_dataset(split="train", decoders={
            "image": tfds.decode.SkipDecoding()}):
        names[example["file_name"].numpy().decode()] = example["image"].numpy()
    for name in ("n01739381_1309.JPEG", "n02105855_2933.JPEG"):
        assert names[name][:2] == b"\xff\xd8"  # converted to JPEG by the builder


def test_a_folder_dataset_trains_and_skips_and_counts_corrupt_images(tmp_path):
    write_folder_dataset(str(tmp_path / "animals"), corrupt=2)
    done = run_cli(f"--dataset=folder:{tmp_path / 'animals'}", "--image_size=32",
                   "--global_batch_size=8", "--epochs=3", "--verbose=0", "--seed=1",
                   f"--logdir={tmp_path / 'run'}")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["num_classes"] == 3 and summary["train_examples"] == 38
    assert summary["validation_examples"] == 12
    assert summary["corrupt_images_skipped"] >= 2
    assert summary["best_val_top1"] >= 0.66


def write_digit_jpegs(root, size, per_split=(400, 100)):
    """scikit-learn's digits as size-pixel JPEGs in root/train/<label>/ and
    root/validation/<label>/ (a user's folder of small images)."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for split, (start, count) in zip(("train", "validation"),
                                     ((0, per_split[0]), (per_split[0], per_split[1]))):
        for index in range(start, start + count):
            folder = root / split / str(digits.target[index])
            folder.mkdir(parents=True, exist_ok=True)
            pixels = np.clip(digits.images[index] * 16, 0, 255).astype("uint8")
            Image.fromarray(pixels).resize((size, size)).convert("RGB").save(
                folder / f"{index:04d}.jpg", quality=95)


def test_auto_preprocessing_looks_at_a_folder_of_small_images(tmp_path):
    """32-pixel digits get the `small` preset at their own size, and the banner and
    summary.json say so; ImageNet-sized images keep the ImageNet crop at 224."""
    from preprocessing.datasets import folder
    from preprocessing.spec import BatchShape, InputSpec

    write_digit_jpegs(tmp_path / "digits32", 32)
    done = run_cli(f"--dataset=folder:{tmp_path / 'digits32'}", "--global_batch_size=32",
                   "--epochs=1", "--steps_per_epoch=4", "--verbose=0",
                   f"--logdir={tmp_path / 'run'}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("image_size=32 input_pipeline=device [held in host memory (tf.data's cache)] "
            "preprocessing=small") in done.stdout  # where summary.json's input.held_in says
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["preprocessing"] == "small" and summary["image_size"] == 32
    write_digit_jpegs(tmp_path / "large", 300, per_split=(20, 10))
    spec = InputSpec(data_dir="", image_size=0, batch=BatchShape(8))
    assert folder.median_side(str(tmp_path / "large")) == 300
    data = folder.make(f"folder:{tmp_path / 'large'}", spec)
    assert (data.preset, data.image_size) == ("standard", 224)


def test_a_prepared_tfds_dataset_is_read_offline_by_name(tmp_path):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tfds_builders"))
    try:
        from tiny_shapes import tiny_shapes_dataset_builder
    finally:
        sys.path.pop(0)
    tiny_shapes_dataset_builder.Builder(data_dir=str(tmp_path / "tfds")).download_and_prepare()
    done = run_cli("--dataset=tfds:tiny_shapes:1.0.0", f"--data_dir={tmp_path / 'tfds'}",
                   "--global_batch_size=10", "--epochs=3", "--verbose=0",
                   f"--logdir={tmp_path / 'run'}")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["num_classes"] == 3 and summary["image_size"] == 12
    assert summary["train_examples"] == 60 and summary["validation_examples"] == 15
    assert summary["best_val_top1"] >= 0.6


@pytest.mark.parametrize("args, message", [
    (["--dataset=imagenet2012", "--manual_dir={tmp}/nothing"],
     "lacks ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar"),
    (["--dataset=tfds:mnist"], "is not prepared in"),
    (["--dataset=tfds:no_such_dataset", "--download"], "TFDS has no dataset called"),
    (["--dataset=folder:{tmp}/nothing"], "is not a folder"),
])
def test_missing_data_is_one_line_before_anything_is_written(tmp_path, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    done = run_cli(*args, f"--data_dir={tmp_path / 'data'}", f"--logdir={tmp_path / 'run'}")
    assert done.returncode == 2 and message in error_lines(done.stderr)[0]
    assert not (tmp_path / "run").exists() and not (tmp_path / "data").exists()


def test_the_input_benchmark_times_the_pipeline_and_the_model(tmp_path):
    write_folder_dataset(str(tmp_path / "animals"), corrupt=0)
    done = run_cli("--benchmark=input", f"--dataset=folder:{tmp_path / 'animals'}",
                   "--image_size=32", "--global_batch_size=8", "--steps_per_epoch=10",
                   f"--logdir={tmp_path / 'bench'}")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "bench" / "input_benchmark.json").read_text())
    assert result["input_images_per_sec"] > 0 and result["cpu_cores"] >= 1
    assert result["input_images_per_sec_per_core"] == pytest.approx(
        result["input_images_per_sec"] / result["cpu_cores"], rel=0.01)
    assert result["input_to_model_ratio"] == pytest.approx(
        result["input_images_per_sec"] / result["model_images_per_sec"], rel=0.01)
    assert result["bottleneck"] in ("input", "accelerator")
    assert "input pipeline:" in done.stdout and "bottleneck" in done.stdout
