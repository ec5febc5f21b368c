"""The host's share of the GPU pipeline (preprocessing/gpu/planning.py), no GPU needed:
each file's route, the crop windows and flips drawn, and nvJPEG's warm-up JPEGs."""

import io

import numpy as np
from PIL import Image

from gpu_helpers import odd_files, write  # noqa: F401 - odd_files: a fixture
from photos import encode, photo
from preprocessing.gpu.jpeg_header import read_jpeg_header
from preprocessing.gpu.planning import PlanSpec, made_up_jpeg, plan_batch, warm_up_jpegs


def test_gpu_planning_routes_each_kind_of_file(tmp_path, odd_files):
    """What goes to the GPU decoder, what to the CPU, what is skipped."""
    image = Image.fromarray(photo(300, 200, 5))
    files = {}
    for name, kwargs in {"baseline": {}, "progressive": {"progressive": True}}.items():
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90, **kwargs)
        files[name] = write(tmp_path / f"{name}.JPEG", buffer.getvalue())
    files.update({kind: path for path, _, kind in odd_files if kind != "jpeg"})
    names = list(files)
    paths = [files[n] for n in names] + [None]  # None: eval padding

    def routes(**spec):
        spec = PlanSpec(**{"seed": 0, "train": False, "roi": True, "max_side": 1024,
                           "image_size": 32, "gpu": True, **spec})
        return {n: s for n, s in zip(names + ["padding"], plan_batch(paths, (0, 0), spec))}

    default = routes()
    assert {n: s.route for n, s in default.items()} == {
        "baseline": "gpu", "progressive": "gpu", "png": "host", "cmyk": "host",
        "truncated": "bad", "corrupt": "bad", "padding": "bad"}
    y, x, h, w = default["baseline"].window  # eval: the center 87.5%, decoded alone (ROI)
    assert (h, w) == (175, 175) and default["baseline"].region == (y, x, h, w)
    assert default["baseline"].box == (0, 0, 175, 175) and default["png"].pixels.dtype == np.uint8
    assert routes(hw_only=True)["progressive"].route == "host"
    whole = routes(roi=False)["baseline"]
    assert whole.region is None and whole.content == (300, 200) and whole.box == (y, x, h, w)
    small = routes(max_side=128)["baseline"]  # window beyond every canvas: resized on the host
    assert small.route == "host" and small.pixels.shape == (32, 32, 3)
    # The bytes travel with the plan only when asked, and only for the GPU's slots.
    assert all(s.data is None for s in default.values())
    carried = routes(keep_bytes=True)
    for name, slot in carried.items():
        expected = open(files[name], "rb").read() if slot.route == "gpu" else None
        assert slot.data == expected, name


def test_train_crops_follow_the_tf_crop_distribution_and_flip_half(tmp_path):
    import tensorflow as tf

    from preprocessing.tfdata import images as tf_images

    shape = (120, 200)
    path = write(tmp_path / "one.JPEG", encode(photo(*shape, 0)))
    spec = PlanSpec(seed=3, train=True, roi=True, max_side=1024, image_size=32, gpu=False)
    rng = np.random.default_rng(0)
    ours, flips = [], []
    for epoch in range(40):  # the windows and flips the planner draws
        for slot in plan_batch([path] * 64, (epoch, 0), spec):
            ours.append(slot.window)
            flips.append(slot.flip)
    tf_windows = [tf_images.random_crop_window(tf.constant([*shape, 3]),
                                               tf.constant([int(s), 9], tf.int64)).numpy()
                  for s in rng.integers(0, 2**31, 800)]

    def stats(windows):
        windows = np.asarray(windows, np.float64)
        area = windows[:, 2] * windows[:, 3] / (shape[0] * shape[1])
        aspect = windows[:, 3] / windows[:, 2]
        return area.mean(), aspect.mean(), (area == 1).mean()

    (a_ours, r_ours, full_ours), (a_tf, r_tf, full_tf) = stats(ours), stats(tf_windows)
    assert abs(a_ours - a_tf) < 0.03 and abs(r_ours - r_tf) < 0.03
    assert abs(full_ours - full_tf) < 0.04
    assert 0.45 < np.mean(flips) < 0.55


def test_made_up_jpegs_have_the_layout_side_and_bytes_asked_for():
    """nvJPEG's warm-up images: each chroma layout the engines take, square, at least
    the bytes asked for (more noise rows), and a JPEG the CPU decodes to that size."""
    import simplejpeg

    for layout in ("gray", "444", "422", "420", "440"):
        for min_bytes in (0, 300_000):
            data = made_up_jpeg(layout, 640, min_bytes)
            header = read_jpeg_header(data)
            assert (header.layout, header.height, header.width) == (layout, 640, 640)
            assert header.hw_decodable and len(data) >= min_bytes
            assert simplejpeg.decode_jpeg(data).shape[:2] == (640, 640)
    all_noise = len(made_up_jpeg("420", 640, 10**9))  # more than noise can give
    assert len(made_up_jpeg("420", 640, 300_000)) < 0.8 * all_noise  # not all noise


def test_warm_up_jpegs_match_the_largest_file_of_each_layout(tmp_path):
    """One made-up JPEG per layout among the files the engines take: its side the
    longest of that layout's (rounded up to 64), its bytes at least the largest
    file's; progressive and non-JPEG files are not counted."""
    files = {"a.jpg": encode(photo(300, 700, 1)),  # 4:2:0 (PIL's default)
             "b.jpg": encode(photo(500, 410, 2)),
             "c.jpg": encode(photo(200, 260, 3), subsampling=0),  # 4:4:4
             "d.jpg": encode(photo(900, 1300, 4), progressive=True),  # the CPU's
             "e.jpg": encode(photo(100, 100, 5)[..., 0], mode="L"),
             "f.jpg": encode(photo(64, 64, 6), fmt="PNG")}
    paths = []
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    jpegs = warm_up_jpegs(paths)
    assert sorted(jpegs) == ["420", "444", "gray"]
    sides = {k: read_jpeg_header(v).height for k, v in jpegs.items()}
    assert sides == {"420": 704, "444": 320, "gray": 128}
    assert all(read_jpeg_header(v).layout == k for k, v in jpegs.items())
    assert len(jpegs["420"]) >= max(len(files["a.jpg"]), len(files["b.jpg"]))
    assert len(jpegs["444"]) >= len(files["c.jpg"])
    assert warm_up_jpegs([]) == {}
    capped = warm_up_jpegs(paths, cap=256)  # a rare huge photo: not 256 huge images
    assert {k: read_jpeg_header(v).height for k, v in capped.items()} == {
        "420": 256, "444": 256, "gray": 128}


def test_one_outsized_file_does_not_set_the_warm_up_bytes(tmp_path):
    """The made-up JPEG's bytes stop at 4x the 99th percentile of the files': one huge
    file among a hundred small ones would make every lane hold buffers for a batch of it."""
    paths = []
    for i in range(100):
        (tmp_path / f"{i}.jpg").write_bytes(encode(photo(64, 80, i)))
        paths.append(str(tmp_path / f"{i}.jpg"))
    noise = np.random.default_rng(0).integers(0, 256, (700, 900, 3), dtype=np.uint8)
    huge = encode(noise)
    (tmp_path / "huge.jpg").write_bytes(huge)
    jpegs = warm_up_jpegs(paths + [str(tmp_path / "huge.jpg")])
    assert read_jpeg_header(jpegs["420"]).height == 960  # the side still covers it
    assert len(jpegs["420"]) < len(huge) / 2, (len(jpegs["420"]), len(huge))
