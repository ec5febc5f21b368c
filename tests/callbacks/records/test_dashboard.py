"""callbacks/records/dashboard.py: every figure logged has a unit, a description and
one TensorBoard tag."""

from callbacks.records import dashboard


def test_every_logged_figure_has_a_unit_and_a_description():
    for key, figure in dashboard.FIGURES.items():
        assert figure.unit and figure.description.endswith("."), key
        assert figure.tag("epoch") == f"{figure.group}/epoch_{figure.name}"
    assert dashboard.figure_of("val_top1").tag("epoch") == dashboard.figure_of(
        "top1").tag("epoch")
    assert dashboard.figure_of("mystery").tag("batch") == "other/batch_mystery"
