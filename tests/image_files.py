"""Real image files for the data tests: JPEG (RGB and CMYK), PNG, and ImageNet's tars.

Each class gets its own color and stripe direction, so a small model can learn
them; the bytes are real encoded images, read back by the real decoders.
"""

import io
import os
import tarfile

import numpy as np

import tensorflow_datasets as tfds

from photos import encode  # noqa: F401 - the tests import it from here too

VALIDATION_LABELS = os.path.join(os.path.dirname(tfds.__file__), "datasets", "imagenet2012",
                                 "validation_labels.txt")
CMYK_NAME = "n01739381_1309.JPEG"  # listed in TFDS's imagenet2012 builder as CMYK
PNG_NAME = "n02105855_2933.JPEG"  # listed there as a PNG named .JPEG


def class_image(label: str, index: int, size: int = 40) -> np.ndarray:
    """An RGB image for class `label`: its color and stripes, with some noise."""
    rng = np.random.default_rng(abs(hash((label, index))) % 2**32)
    color = np.random.default_rng(int(label.strip("n") or 0) % 2**32).integers(30, 226, 3)
    image = np.tile(color, (size, size, 1)).astype("float32")
    stripes = (np.arange(size) // 5) % 2 == 0
    if int(label.strip("n") or 0) % 2:
        image[stripes, :, :] *= 0.5
    else:
        image[:, stripes, :] *= 0.5
    image += rng.normal(0, 8, image.shape)
    return np.clip(image, 0, 255).astype("uint8")


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def validation_labels(count: int) -> list[str]:
    with open(VALIDATION_LABELS) as f:
        return [line.strip() for line in f][:count]


def write_imagenet_manual_download(folder, validation_images=16, per_class=8):
    """ILSVRC2012_img_train.tar (one nXXXXXXXX.tar per class) and ILSVRC2012_img_val.tar
    (ILSVRC2012_val_00000001.JPEG, ...) in the official layout. The classes are those
    of the first validation images (TFDS assigns validation labels by position), plus
    the class of one of ImageNet's CMYK images; the PNG image is included too.

    Returns:
        {"train": images, "validation": images, "classes": sorted synsets}.
    """
    os.makedirs(folder, exist_ok=True)
    labels = validation_labels(validation_images)
    classes = sorted(set(labels) | {CMYK_NAME.split("_")[0], PNG_NAME.split("_")[0]})
    count = 0
    with tarfile.open(os.path.join(folder, "ILSVRC2012_img_train.tar"), "w") as train:
        for synset in classes:
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w") as class_tar:
                for i in range(per_class):
                    name, data = f"{synset}_{i + 1}.JPEG", encode(class_image(synset, i))
                    if synset == CMYK_NAME.split("_")[0] and i == 0:
                        name, data = CMYK_NAME, encode(class_image(synset, i), mode="CMYK")
                    if synset == PNG_NAME.split("_")[0] and i == 0:
                        name, data = PNG_NAME, encode(class_image(synset, i), fmt="PNG")
                    _add(class_tar, name, data)
                    count += 1
            _add(train, f"{synset}.tar", inner.getvalue())
    with tarfile.open(os.path.join(folder, "ILSVRC2012_img_val.tar"), "w") as val:
        for i, synset in enumerate(labels):
            _add(val, f"ILSVRC2012_val_{i + 1:08d}.JPEG", encode(class_image(synset, 1000 + i)))
    return {"train": count, "validation": len(labels), "classes": classes}


def write_folder_dataset(root, classes=("cat", "dog", "fox"), per_class=12, corrupt=1):
    """root/{train,validation}/<class>/*.jpg|png, with `corrupt` broken JPEG files in
    train/ and a CMYK JPEG and a PNG named .jpg among the rest."""
    for split, count in (("train", per_class), ("validation", 4)):
        for c, name in enumerate(classes):
            folder = os.path.join(root, split, name)
            os.makedirs(folder, exist_ok=True)
            for i in range(count):
                pixels = class_image(f"n{c + 1}", i + (0 if split == "train" else 500))
                if split == "train" and c == 0 and i == 0:
                    data, ext = encode(pixels, mode="CMYK"), "jpg"
                elif split == "train" and c == 1 and i == 0:
                    data, ext = encode(pixels, fmt="PNG"), "jpg"  # a PNG named .jpg
                elif split == "validation" and i == 0:
                    data, ext = encode(pixels, fmt="PNG"), "png"
                else:
                    data, ext = encode(pixels), "jpg"
                with open(os.path.join(folder, f"{name}_{i:03d}.{ext}"), "wb") as f:
                    f.write(data)
    for i in range(corrupt):
        with open(os.path.join(root, "train", classes[-1], f"broken_{i}.jpg"), "wb") as f:
            f.write(b"\xff\xd8\xff\xe0 this is not really a JPEG")
