"""The GPU JPEG pipeline, run on the CPU with decoder="cpu": the same planning, canvas
and compiled crop/resize step as on the GPU, with host_images.decode instead of nvJPEG.

Compared with the tf.data path (image_ops) on the same files: evaluation images
within JPEG tolerance, training crops with the same distribution.
"""

import io
import json
import os

import numpy as np
import pytest
from PIL import Image

from conftest import ROOT, run_python
from photos import assorted_jpegs, encode, photo
from preprocessing import augment
from preprocessing.gpu.canvas import make_canvas_step, normalize_host, resize_bilinear_host
from preprocessing.gpu.stream import GpuJpegStream
from preprocessing.gpu.jpeg_header import read_jpeg_header
from preprocessing.gpu.planning import PlanSpec, plan_batch

NO_TF = os.path.join(ROOT, "tests", "no_tensorflow")
STD = np.asarray(augment.STDDEV_RGB, np.float32)
# JPEG tolerance, in gray levels (0-255): TensorFlow decodes and crops in one step
# (decode_and_crop_jpeg) while the pipeline decodes, then crops; both use
# libjpeg-turbo's fast integer DCT, so only chroma upsampling at the crop's edge
# and float rounding can differ.
MEAN_TOLERANCE, MAX_TOLERANCE = 0.5, 8.0


def write(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """24 JPEGs of assorted sizes (gray and progressive among them) with labels."""
    return assorted_jpegs(tmp_path_factory.mktemp("jpegs"))


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory):
    """(path, label, kind): a PNG named .JPEG, a CMYK JPEG, a truncated and a corrupt
    file; each label's color is a solid color, so a wrong label would show."""
    folder = tmp_path_factory.mktemp("odd")
    files = []
    for label in range(4):
        color = np.array(COLORS[label], np.uint8)
        pixels = np.tile(color, (48 + 8 * label, 64, 1))
        kind, data = "jpeg", encode(pixels)
        if label == 1:
            kind, data = "png", encode(pixels, fmt="PNG")
        elif label == 2:
            kind, data = "cmyk", encode(pixels, mode="CMYK")
        files.append((write(folder / f"good_{label}.JPEG", data), label, kind))
    whole = encode(photo(96, 128, 1))  # long enough that the cut falls inside the scan
    files.append((write(folder / "truncated.JPEG", whole[: len(whole) * 3 // 4]), 3, "truncated"))
    files.append((write(folder / "corrupt.JPEG", b"\xff\xd8\xff\xe0 not a JPEG"), 3, "corrupt"))
    return files


COLORS = [(200, 40, 40), (40, 200, 40), (40, 40, 200), (200, 200, 40)]


def pixels_of(images) -> np.ndarray:
    """Normalized model input back to [0, 255] float32."""
    return np.asarray(images, np.float32) * STD + np.asarray(augment.MEAN_RGB, np.float32)


def planned(stream, position):
    """The slots the stream plans for one batch (of its one device)."""
    records, future, block = stream._submit(position)
    try:
        return stream._finish(position, records, future.result(), block)[1][0]
    finally:
        stream._release(block)


def batches(stream, count):
    return [tuple(np.asarray(a) for a in next(stream)) for _ in range(count)]


# ---- the pieces --------------------------------------------------------------------


def test_jpeg_header_reads_size_and_routes_odd_files(jpegs, odd_files):
    for path, _ in jpegs:
        data = open(path, "rb").read()
        header = read_jpeg_header(data)
        width, height = Image.open(path).size
        assert (header.height, header.width) == (height, width) and header.gpu_decodable
    kinds = {kind: open(path, "rb").read() for path, _, kind in odd_files}
    assert read_jpeg_header(kinds["png"]) is None and read_jpeg_header(kinds["corrupt"]) is None
    cmyk = read_jpeg_header(kinds["cmyk"])
    assert cmyk.components == 4 and not cmyk.gpu_decodable
    truncated = read_jpeg_header(kinds["truncated"])
    assert truncated is not None and not truncated.complete and not truncated.gpu_decodable


def test_jpeg_header_knows_what_the_hardware_decoder_takes(tmp_path):
    image = Image.fromarray(photo(64, 80, 3))
    kinds = {}
    for name, kwargs in {"420": {}, "444": {"subsampling": 0}, "progressive":
                         {"progressive": True}}.items():
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90, **kwargs)
        kinds[name] = read_jpeg_header(buffer.getvalue())
    buffer = io.BytesIO()
    image.convert("L").save(buffer, format="JPEG", quality=90)
    kinds["gray"] = read_jpeg_header(buffer.getvalue())
    assert kinds["420"].sampling == ((2, 2), (1, 1), (1, 1)) and kinds["420"].hw_decodable
    assert kinds["444"].sampling == ((1, 1), (1, 1), (1, 1)) and kinds["444"].hw_decodable
    assert kinds["gray"].hw_decodable
    assert kinds["progressive"].gpu_decodable and not kinds["progressive"].hw_decodable


def test_gpu_planning_routes_each_kind_of_file(tmp_path, odd_files):
    """What goes to nvImageCodec, what to the CPU, what is skipped (no GPU needed)."""
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


def test_the_device_step_resizes_like_tensorflow():
    import tensorflow as tf

    rng = np.random.default_rng(1)
    step = make_canvas_step(24, "float32")
    canvas = rng.integers(0, 256, (3, 64, 96, 3), dtype=np.uint8)
    boxes = np.array([[0, 0, 64, 96], [5, 9, 30, 17], [10, 3, 1, 50]], np.int32)
    flips = np.array([False, True, False])
    sources = np.array([0, 1, 1], np.int32)  # the third image stands in from slot 1
    images, _ = step(canvas, sources, boxes, flips, np.array([True, True, False]))
    images = np.asarray(images)
    for i in range(2):
        y, x, h, w = boxes[i]
        expected = tf.image.resize(canvas[sources[i], y:y + h, x:x + w], [24, 24],
                                   method="bilinear", antialias=False).numpy()
        expected = expected[:, ::-1] if flips[i] else expected
        np.testing.assert_allclose(images[i], normalize_host(expected), atol=1e-4)
        np.testing.assert_allclose(resize_bilinear_host(canvas[sources[i], y:y + h, x:x + w], 24,
                                                        flip=bool(flips[i])), expected, atol=1e-3)
    assert not images[2].any()  # not valid: zeros


# ---- against the tf.data path ----------------------------------------------------------


def test_eval_images_equal_the_tf_data_eval_transform(jpegs):
    import tensorflow as tf

    from preprocessing.tfdata import images as tf_images

    transform = tf_images.eval_transform("standard", 48)
    stream = GpuJpegStream(jpegs, 16, 48, seed=0, train=False, decoder="cpu")
    got = [b for b in stream]
    images = np.concatenate([np.asarray(b[0]) for b in got])[:len(jpegs)]
    labels = np.concatenate([np.asarray(b[1]) for b in got])[:len(jpegs)]
    assert labels.tolist() == [label for _, label in jpegs]
    for image, (path, _) in zip(images, jpegs):
        expected = transform(tf.constant(open(path, "rb").read())).numpy()
        diff = np.abs((image - expected) * STD)  # in gray levels
        assert diff.mean() < MEAN_TOLERANCE and diff.max() < MAX_TOLERANCE, (path, diff.max())


def test_train_crops_follow_the_tf_crop_distribution_and_flip_half(tmp_path):
    import tensorflow as tf

    from preprocessing.tfdata import images as tf_images

    shape = (120, 200)
    path = write(tmp_path / "one.JPEG", encode(photo(*shape, 0)))
    stream = GpuJpegStream([(path, 0)] * 64, 64, 32, seed=3, train=True, decoder="cpu")
    rng = np.random.default_rng(0)
    ours, flips = [], []
    for batch in range(40):  # the windows and flips the planner draws
        for slot in planned(stream, (batch, 0)):
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


def test_train_batches_use_the_planned_windows_and_flips(jpegs):
    """The images are the planned crops, resized and flipped (host reference)."""
    stream = GpuJpegStream(jpegs, 8, 32, seed=5, train=True, decoder="cpu", prefetch=1)
    plan = planned(stream, (0, 0))
    images, labels = (np.asarray(a) for a in next(stream))
    from preprocessing.host import images as host_images

    flipped = 0
    for image, label, slot in zip(images, labels, plan):
        assert label == stream.records[slot.record][1]
        y, x, h, w = slot.window
        pixels = host_images.decode(open(stream.records[slot.record][0], "rb").read())
        expected = resize_bilinear_host(pixels[y:y + h, x:x + w], 32, flip=slot.flip)
        np.testing.assert_allclose(pixels_of(image), expected, atol=0.05)
        flipped += slot.flip
    stream.close()


# ---- the stream's contract ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_shapes_dtypes_and_eval_padding(jpegs, dtype):
    train = GpuJpegStream(jpegs, 10, 32, seed=1, train=True, dtype=dtype, decoder="cpu")
    images, labels = next(train)
    assert images.shape == (10, 32, 32, 3) and str(images.dtype) == dtype
    assert labels.shape == (10,) and str(labels.dtype) == "int32"
    assert train.steps_per_epoch == 2
    train.close()
    evaluation = GpuJpegStream(jpegs, 10, 32, seed=1, train=False, dtype=dtype, decoder="cpu")
    assert evaluation.num_batches == 3
    for _ in range(2):  # every evaluation reads everything again
        got = list(evaluation)
        assert len(got) == 3
        weights = np.concatenate([np.asarray(w) for _, _, w in got])
        assert weights.tolist() == [1.0] * 24 + [0.0] * 6
        assert not np.asarray(got[-1][0], np.float32)[4:].any()  # padding is zeros
        assert np.asarray(got[-1][1])[4:].tolist() == [0] * 6


def test_odd_files_are_decoded_on_the_cpu_or_skipped_and_counted(odd_files):
    records = [(path, label) for path, label, _ in odd_files]
    evaluation = GpuJpegStream(records, 4, 16, seed=0, train=False, decoder="cpu")
    images, labels, weights = (np.concatenate([np.asarray(b[i]) for b in evaluation])
                               for i in range(3))
    kinds = [kind for _, _, kind in odd_files]
    assert weights[:6].tolist() == [0.0 if k in ("truncated", "corrupt") else 1.0 for k in kinds]
    for image, label, weight in zip(images, labels, weights):
        if weight:  # the right color for the label: no image got another's label
            assert np.abs(pixels_of(image).mean((0, 1)) - COLORS[label]).max() < 12
    assert evaluation.skipped_images() == 2

    train = GpuJpegStream(records * 3, 6, 16, seed=0, train=True, decoder="cpu")
    for _ in range(9):  # 3 epochs: each bad file met 9 times, counted once
        images, labels = (np.asarray(a) for a in next(train))
        assert images.shape[0] == 6
        for image, label in zip(images, labels):
            assert np.abs(pixels_of(image).mean((0, 1)) - COLORS[label]).max() < 12
    assert train.skipped_images() == 2
    train.close()


NVIMGCODEC = pytest.mark.skipif(
    __import__("preprocessing.gpu.native.nvimgcodec_c", fromlist=["package_dir"]).package_dir() is None,
    reason="needs nvidia-nvimgcodec-cu13 (installed by the [test] and [gpu] extras)")


@NVIMGCODEC
def test_nvimgcodec_through_its_c_api_gives_the_cpu_decoders_batches(jpegs, odd_files):
    """The api="c" path end to end (planning, code streams with windows, decoding into
    the canvas slots, odd files to the CPU, the compiled step), with nvImageCodec's
    CPU backend standing in for the GPU's: the same batches as decoder="cpu"."""
    def stream(records, batch, train, **kwargs):
        return GpuJpegStream(records, batch, 32, seed=4, train=train, workers=0, **kwargs)

    for train in (False, True):
        cpu = stream(jpegs, 8, train, decoder="cpu")
        c_api = stream(jpegs, 8, train, decoder="nvimgcodec", api="c", backend="default")
        assert c_api.decoder == "nvimgcodec"
        for ours, theirs in zip(batches(c_api, 3), batches(cpu, 3)):
            assert all(np.array_equal(a, b) for a, b in zip(ours[1:], theirs[1:]))  # labels
            diff = np.abs(pixels_of(ours[0]) - pixels_of(theirs[0]))
            # Two libjpeg set-ups (IDCT, chroma upsampling at the window's edge) differ
            # by about a gray level on average: nvJPEG against the CPU decoder measured
            # 0.73 (eval) and 0.96 (train) on an H200 (2026-11-30-h200-gpu-jpeg.json).
            assert diff.mean() < 1.5 and diff.max() < MAX_TOLERANCE, (diff.mean(), diff.max())
        # nvImageCodec decoded every image, none went to the CPU decoder instead (a
        # training stream decodes a few batches ahead).
        decoded = sum(filler.decoded for filler in c_api._fillers)
        assert decoded >= 3 * 8 if train else decoded == 3 * 8
        c_api.close()
        cpu.close()

    records = [(path, label) for path, label, _ in odd_files]
    evaluation = stream(records, 4, False, decoder="nvimgcodec", api="c")
    images, labels, weights = (np.concatenate([np.asarray(b[i]) for b in evaluation])
                               for i in range(3))
    kinds = [kind for _, _, kind in odd_files]
    assert weights[:6].tolist() == [0.0 if k in ("truncated", "corrupt") else 1.0 for k in kinds]
    for image, label, weight in zip(images, labels, weights):
        if weight:
            assert np.abs(pixels_of(image).mean((0, 1)) - COLORS[label]).max() < 12
    assert evaluation.skipped_images() == 2


def test_a_seed_decides_everything_and_state_resumes_the_same_sequence(jpegs):
    def stream(seed):
        return GpuJpegStream(jpegs, 7, 24, seed=seed, train=True, decoder="cpu")

    first, again, other = stream(11), stream(11), stream(12)
    a, b, c = batches(first, 5), batches(again, 5), batches(other, 5)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
    assert any(not np.array_equal(x[0], z[0]) for x, z in zip(a, c))
    state = first.get_state()  # 5 batches of 3 per epoch: epoch 1, batch 2
    assert (state["epoch"], state["batch"]) == (1, 2)
    json.dumps(state)
    following = batches(first, 4)
    resumed = stream(11)
    resumed.set_state(state)
    for x, y in zip(following, batches(resumed, 4)):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
    # A stream made with another seed (a resumed run without --seed draws a new
    # one) adopts the state's: the same sequence again.
    adopted = stream(12)
    adopted.set_state(state)
    for x, y in zip(following, batches(adopted, 4)):
        np.testing.assert_array_equal(x[0], y[0])
    for s in (first, again, other, resumed, adopted):
        s.close()


def test_planning_in_worker_processes_or_in_process_gives_the_same_batches(jpegs):
    here = GpuJpegStream(jpegs, 6, 24, seed=2, train=True, decoder="cpu", workers=0)
    there = GpuJpegStream(jpegs, 6, 24, seed=2, train=True, decoder="cpu", workers=2)
    for x, y in zip(batches(here, 5), batches(there, 5)):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
    here.close()
    there.close()


def test_several_decoding_lanes_hand_out_the_same_batches_in_the_same_order(jpegs):
    """Lanes finish out of order; the consumer still gets one lane's sequence."""
    one = GpuJpegStream(jpegs, 6, 24, seed=2, train=True, decoder="cpu", decoders=1)
    three = GpuJpegStream(jpegs, 6, 24, seed=2, train=True, decoder="cpu", decoders=3,
                          prefetch=1)
    assert (one.decoders, three.decoders) == (1, 3)
    for x, y in zip(batches(one, 9), batches(three, 9)):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], y[1])
    assert one.get_state() == three.get_state()
    evaluation = [GpuJpegStream(jpegs, 4, 24, seed=2, train=False, decoder="cpu",
                                decoders=n) for n in (1, 3)]
    for _ in range(2):  # each pass ends, and a new one starts from the beginning
        passes = [[tuple(np.asarray(a) for a in batch) for batch in stream]
                  for stream in evaluation]
        assert len(passes[0]) == len(passes[1]) == -(-len(jpegs) // 4)
        for x, y in zip(*passes):
            for a, b in zip(x, y):
                np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="decoders"):
        GpuJpegStream(jpegs, 6, 24, seed=2, train=True, decoder="cpu", decoders=0)
    for s in (one, three, *evaluation):
        s.close()


def test_windows_too_large_for_any_canvas_are_resized_on_the_host(jpegs):
    import tensorflow as tf

    from preprocessing.tfdata import images as tf_images

    transform = tf_images.eval_transform("standard", 32)
    big = [(p, l) for p, l in jpegs if min(Image.open(p).size) * 0.875 > 64][:6]
    stream = GpuJpegStream(big, 6, 32, seed=0, train=False, decoder="cpu", canvas_sides=(32, 64))
    images = np.asarray(next(iter(stream))[0])
    for image, (path, _) in zip(images, big):
        expected = transform(tf.constant(open(path, "rb").read())).numpy()
        diff = np.abs((image - expected) * STD)
        assert diff.mean() < MEAN_TOLERANCE + 0.5 and diff.max() < MAX_TOLERANCE  # + rounding


def test_native_libraries_load_once_per_class_whichever_thread_asks_first():
    import concurrent.futures

    from preprocessing.gpu.native.cuda_driver import LoadedOnce

    made = []

    class First(LoadedOnce):
        def __init__(self):
            made.append(self)
            if len(made) == 1:
                raise OSError("library not found")  # a failed load is tried again

    class Second(LoadedOnce):
        def __init__(self):
            self.first = First.get()  # one library's set-up may load another

    with pytest.raises(OSError):
        First.get()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        seconds = list(pool.map(lambda _: Second.get(), range(32)))
    assert len({id(s) for s in seconds}) == 1 and len(made) == 2
    assert seconds[0].first is First.get() is made[1]
    assert not isinstance(Second.get(), First)


def test_native_handles_are_closed_when_collected_and_failures_then_ignored():
    import gc

    from preprocessing.gpu.native.cuda_driver import ClosedWhenCollected

    closed = []

    class Handle(ClosedWhenCollected):
        def __init__(self, fail):
            self.fail = fail

        def close(self):
            closed.append(self.fail)
            if self.fail:
                raise RuntimeError("library already unloaded")

    Handle(False), Handle(True)  # noqa: B018 - made and dropped at once
    gc.collect()
    assert sorted(closed) == [False, True]  # both closed; the failure did not escape


def test_a_refused_batch_is_bisected_down_to_the_images_refused_alone():
    """nvJPEG refuses a whole batch for one bad image: the halves are tried again, so
    only the bad images go to the CPU, every good one is decoded exactly once by a
    call that succeeded, and one bad image in 256 costs 2 log2(256) + 1 calls."""
    from preprocessing.gpu.decoders import decode_bisecting

    def run(items, bad):
        calls, decoded = [], []

        def decode(part):
            calls.append(list(part))
            ok = not any(item in bad for item in part)
            decoded.extend(part if ok else [])
            return ok

        refused, count = decode_bisecting(decode, items)
        assert count == len(calls)
        assert sorted(decoded) == sorted(set(items) - set(bad))  # each exactly once
        return refused, count

    assert run(list(range(10)), set()) == ([], 1)
    assert run(list(range(10)), {3, 7})[0] == [3, 7]  # in the batch's order
    assert run(list(range(256)), {200}) == ([200], 17)
    assert run(list(range(4)), {0, 1, 2, 3}) == ([0, 1, 2, 3], 7)


def test_the_step_is_compiled_for_every_canvas_shape_up_front(jpegs):
    """On GPUs the stream compiles its step for each canvas shape when it is made, in
    the background (`warmed`), so no batch waits for a compile in training: run here
    by hand (the CPU decoder does not warm up), no batch then compiles anything."""
    from preprocessing.gpu.canvas import canvas_step

    stream = GpuJpegStream(jpegs, 4, 23, seed=0, train=True, decoder="cpu", workers=0,
                           canvas_sides=(64, 128))
    assert stream.warmed is None
    step = canvas_step(23, "float32")
    assert stream._compile_steps() == 2 and step._cache_size() == 2
    for _ in range(4):
        next(stream)
    assert step._cache_size() == 2
    stream.close()


def test_arguments_are_checked(jpegs):
    with pytest.raises(ValueError, match="cannot fill one batch"):
        GpuJpegStream(jpegs[:3], 4, 32, seed=0, train=True, decoder="cpu")
    with pytest.raises(ValueError, match="decoder must be one of"):
        GpuJpegStream(jpegs, 4, 32, seed=0, train=True, decoder="pil")
    with pytest.raises(ValueError, match="needs GPU devices"):
        GpuJpegStream(jpegs, 4, 32, seed=0, train=True, decoder="nvimgcodec")
    with pytest.raises(ValueError, match=r"backend must be one of .*'hw\+cuda'.*got 'cuda'"):
        GpuJpegStream(jpegs, 4, 32, seed=0, train=True, decoder="cpu", backend="cuda")
    with pytest.raises(ValueError, match=r"api must be one of \('python', 'c', 'nvjpeg'\), "
                                         "got 'cffi'"):
        GpuJpegStream(jpegs, 4, 32, seed=0, train=True, decoder="cpu", api="cffi")
    with pytest.raises(ValueError, match="api='nvjpeg' drives the hardware JPEG engines only: "
                                         "backend must be 'hw', got 'hybrid'"):
        GpuJpegStream(jpegs, 4, 32, seed=0, train=True, decoder="cpu", api="nvjpeg",
                      backend="hybrid")
    with pytest.raises(ValueError, match="read_in must be 'shared', 'workers' or 'stream', "
                                         "got 'disk'"):
        GpuJpegStream(jpegs, 4, 32, seed=0, train=True, decoder="cpu", read_in="disk")
    for read_in in ("shared", "workers"):
        with pytest.raises(ValueError, match=f"read_in='{read_in}' needs api='nvjpeg'"):
            GpuJpegStream(jpegs, 4, 32, seed=0, train=True, decoder="cpu", backend="default",
                          read_in=read_in)
    with pytest.raises(ValueError, match=r"read_in='shared' needs planning processes"):
        GpuJpegStream(jpegs, 4, 32, seed=0, train=True, decoder="cpu", workers=0,
                      read_in="shared")
    for share in (0.0, 1.5):
        with pytest.raises(ValueError, match="hw_share must be in"):
            GpuJpegStream(jpegs, 4, 32, seed=0, train=True, decoder="cpu", backend="hw+cuda",
                          hw_share=share)


# ---- in fresh processes: no TensorFlow, and two devices --------------------------------


def test_the_pipeline_imports_no_tensorflow(jpegs):
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {ROOT!r})\n"
        "from preprocessing.gpu.stream import GpuJpegStream\n"
        f"s = GpuJpegStream({jpegs!r}, 8, 32, seed=0, train=True)\n"
        "x, y = next(s)\n"
        "print(json.dumps({'tf': 'tensorflow' in sys.modules, 'decoder': s.decoder,"
        " 'shape': list(x.shape)}))\n")
    result = run_python(code, {"PYTHONPATH": NO_TF, "JAX_PLATFORMS": "cpu"})
    assert result == {"tf": False, "decoder": "cpu", "shape": [8, 32, 32, 3]}


def test_two_devices_get_their_slices_of_a_sharded_batch(jpegs):
    code = (
        "import json, sys, numpy as np, jax\n"
        f"sys.path.insert(0, {ROOT!r})\n"
        "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
        "from preprocessing.gpu.stream import GpuJpegStream\n"
        "sharding = NamedSharding(Mesh(np.array(jax.devices()), ('batch',)), P('batch'))\n"
        f"records = {jpegs!r}\n"
        "two = GpuJpegStream(records, 8, 16, seed=4, train=True, decoder='cpu',"
        " sharding=sharding)\n"
        "one = GpuJpegStream(records, 8, 16, seed=4, train=True, decoder='cpu')\n"
        "result = {'devices': len(jax.devices())}\n"
        "for _ in range(3):\n"
        "    (x, y), (x1, y1) = next(two), next(one)\n"
        "    result['sharding'] = x.sharding == sharding\n"
        "    result['labels_sharded'] = y.sharding.spec == P('batch')\n"
        "    result['shards'] = sorted(s.data.shape[0] for s in x.addressable_shards)\n"
        "    result['same'] = bool(np.array_equal(np.asarray(x), np.asarray(x1))"
        " and np.array_equal(np.asarray(y), np.asarray(y1)))\n"
        "    assert result['same']\n"
        "ev = GpuJpegStream(records, 10, 16, seed=4, train=False, decoder='cpu',"
        " sharding=sharding)\n"
        "result['eval_weights'] = float(sum(np.asarray(w).sum() for _, _, w in ev))\n"
        "print(json.dumps(result))\n")
    result = run_python(code, {"XLA_FLAGS": "--xla_force_host_platform_device_count=2",
                               "JAX_PLATFORMS": "cpu", "PYTHONPATH": NO_TF})
    assert result == {"devices": 2, "sharding": True, "labels_sharded": True,
                      "shards": [4, 4], "same": True, "eval_weights": 24.0}


FIT_COMPILES = """
import json, logging, sys, numpy as np, jax
sys.path.insert(0, {root!r})
import keras
from preprocessing.feed import Feed
from preprocessing.gpu.stream import GpuJpegStream
compiles = []

class Count(logging.Handler):
    def emit(self, record):
        if "Finished XLA compilation of jit(train_step)" in record.getMessage():
            compiles.append(record.getMessage())

logging.getLogger("jax").addHandler(Count())
jax.config.update("jax_log_compiles", True)
sharding = None
if {devices} > 1:
    distribution = keras.distribution.DataParallel(devices=jax.devices())
    keras.distribution.set_distribution(distribution)
    sharding = distribution.get_data_layout((8, 16, 16, 3)).backend_layout
stream = GpuJpegStream({records!r}, 8, 16, seed=1, train=True, dtype="float32",
                       decoder="cpu", workers=0, sharding=sharding)
x, _ = next(stream)
model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Conv2D(4, 3),
                          keras.layers.BatchNormalization(),
                          keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)])
model.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(Feed(stream, None), epochs=3, steps_per_epoch=3, verbose=0)
stream.close()
print(json.dumps({{"compiles": len(compiles), "committed": x.committed}}))
"""


@pytest.mark.parametrize("devices", [1, 2])
def test_fit_compiles_the_training_step_once(jpegs, devices):
    """One device: the batches are uncommitted, like Keras's state; were they committed,
    the first step would commit the state it returns and each change of commitment
    (that step, the metrics reset at every epoch's end) would compile the step again
    (on an H200, ~10 s each for ResNet-50). Two devices: laid out as DataParallel's."""
    code = FIT_COMPILES.format(root=ROOT, records=jpegs, devices=devices)
    result = run_python(code, {"XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
                               "JAX_PLATFORMS": "cpu", "KERAS_BACKEND": "jax",
                               "PYTHONPATH": NO_TF})
    assert result == {"compiles": 1, "committed": devices > 1}


def test_made_up_jpegs_have_the_layout_side_and_bytes_asked_for():
    """nvJPEG's warm-up images: each chroma layout the engines take, square, at least
    the bytes asked for (more noise rows), and a JPEG the CPU decodes to that size."""
    import simplejpeg

    from preprocessing.gpu.planning import made_up_jpeg

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
    from preprocessing.gpu.planning import warm_up_jpegs

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
    from preprocessing.gpu.planning import warm_up_jpegs

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


def test_a_failed_warm_up_warns_and_is_not_tried_again():
    """The warm-up only saves time: if it fails (no device memory for its scratch, a
    CUDA error, nvJPEG refusing the batch, the made-up JPEGs not made), it warns, the
    decoder counts as warmed up, and it is not tried again."""
    import types

    from preprocessing.gpu.decoders import NvImageCodecCanvases

    class NoMemory:
        calls = 0

        def use(self, ordinal):
            pass

        def alloc(self, size, pinned=False):
            NoMemory.calls += 1
            raise RuntimeError("cuMemAlloc failed: CUDA error 2")

    canvases = NvImageCodecCanvases.__new__(NvImageCodecCanvases)
    canvases.api, canvases.warmed_up, canvases.on_gpu = "nvjpeg", False, True
    canvases.cuda, canvases.ordinal = NoMemory(), 0
    canvases.decoder = types.SimpleNamespace(warm_scratch_bytes=lambda: 256 * 64 * 64 * 3)
    with pytest.warns(RuntimeWarning, match="warm-up failed .*CUDA error 2"):
        assert canvases.warm([b"jpeg"]) is False
    assert canvases.warmed_up and canvases.warm([b"jpeg"]) is True  # not tried again
    assert NoMemory.calls == 1

    class Memory(NoMemory):
        def alloc(self, size, pinned=False):
            return 1

        def free(self, pointer, pinned=False):
            pass

    canvases.cuda, canvases.warmed_up, canvases.stream = Memory(), False, 0
    canvases.decoder.warm = lambda jpegs, scratch, stream: False  # nvJPEG said no
    with pytest.warns(RuntimeWarning, match="refused a warm-up batch"):
        assert canvases.warm([b"jpeg"]) is False

    import concurrent.futures

    stream = GpuJpegStream.__new__(GpuJpegStream)  # the lane's side: the future failed
    stream._warm_jpegs = concurrent.futures.Future()
    stream._warm_jpegs.set_exception(BrokenPipeError("the planning process died"))
    filler = types.SimpleNamespace(warmed_up=False, warm=lambda jpegs: pytest.fail("warmed"))
    with pytest.warns(RuntimeWarning, match="could not be made .*planning process died"):
        stream._warm(filler)
    assert filler.warmed_up
