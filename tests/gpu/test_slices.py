"""One device's slice of a batch (preprocessing/gpu/slices.py), from hand-made slots:
the canvas bucket, the stand-in for an unreadable image in training and its weight 0
in evaluation, and nvJPEG's warm-up when its JPEGs could not be made."""

import concurrent.futures
import types

import numpy as np
import pytest

from preprocessing.gpu.slices import SliceMaker


def maker(train):
    return SliceMaker([("a.jpg", 0)], step=None, canvas_sides=(64, 128, 256), train=train,
                      skipped=set(), spec=None, warm_jpegs=None)


def slot(index, label, route="gpu", box=(0, 0, 8, 8), flip=False):
    return types.SimpleNamespace(index=index, label=label, route=route, box=box, flip=flip)


def test_the_bucket_is_the_smallest_canvas_that_holds_the_content():
    slices = maker(True)
    assert [slices.bucket(n) for n in (1, 64, 65, 128, 200, 256)] == [64, 64, 128, 128,
                                                                        256, 256]
    with pytest.raises(AssertionError, match="beyond the canvas cap"):
        slices.bucket(257)


def test_an_unreadable_image_takes_the_next_good_ones_pixels_and_label_in_training():
    """Slots 1 and 3 unreadable: in training slot 1 becomes slot 2 (the next good one)
    and slot 3 wraps round to slot 0, labels, boxes and flips with them, all valid."""
    slots = [slot(0, 5, box=(0, 0, 10, 10)), slot(1, 6, "bad"), slot(2, 7, flip=True),
             slot(3, 8, "bad")]
    sources, labels, boxes, flips, valid = maker(True)._arrays(slots, [0, 2])
    assert sources.tolist() == [0, 2, 2, 0] and labels.tolist() == [5, 7, 7, 5]
    assert boxes[3].tolist() == [0, 0, 10, 10] and flips.tolist() == [False, True, True, False]
    assert valid.all()


def test_an_unreadable_image_weighs_nothing_in_evaluation():
    slots = [slot(0, 5), slot(1, 6, "bad"), slot(2, 7)]
    sources, labels, _, _, valid = maker(False)._arrays(slots, [0, 2])
    assert sources.tolist() == [0, 1, 2] and labels.tolist() == [5, 0, 7]
    assert valid.tolist() == [True, False, True]
    assert np.asarray(valid, np.float32).tolist() == [1.0, 0.0, 1.0]


def test_a_warm_up_whose_jpegs_were_not_made_warns_and_counts_as_done():
    """The lane's side of nvJPEG's warm-up: its made-up JPEGs' future failed."""
    failed = concurrent.futures.Future()
    failed.set_exception(BrokenPipeError("the planning process died"))
    slices = SliceMaker([], step=None, canvas_sides=(64,), train=True, skipped=set(),
                        spec=None, warm_jpegs=failed)
    filler = types.SimpleNamespace(warmed_up=False, warm=lambda jpegs: pytest.fail("warmed"))
    with pytest.warns(RuntimeWarning, match="could not be made .*planning process died"):
        slices.warm(filler)
    assert filler.warmed_up
