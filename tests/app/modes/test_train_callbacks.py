"""app/modes/train_callbacks.py: the run's callbacks as training makes them."""

import time

import pytest

from callbacks.records import events


@pytest.mark.parametrize("readers, said, not_said", [
    ({"read_power": lambda: 300.0}, "board-power samples", "energy counter"),
    ({"read_energy": lambda: 1.0}, "NVML's energy counter", "power samples")])
def test_the_energy_cards_say_how_the_energy_was_measured(tmp_path, monkeypatch, readers,
                                                          said, not_said):
    """The run's callbacks as app/modes/train_callbacks.py makes them, on a GPU that has
    an energy counter or only power samples: the power card says which was used."""
    import types

    from app.engine.distribute import Topology
    from app.pricing.prices import resolve_billing
    from app.modes import train, train_callbacks
    from app.run import resume
    from flags import Config
    from preprocessing.spec import BatchShape

    monkeypatch.setattr(train_callbacks, "gpu_energy_readers", lambda *_: readers)
    config = Config(logdir=str(tmp_path), epochs=1, steps_per_epoch=4, global_batch_size=8)
    topology = Topology("tensorflow", "cpu", 1, 0, 1, "cpu")
    context = types.SimpleNamespace(
        config=config, topology=topology, logdir=str(tmp_path), started_at=time.time(),
        batch=BatchShape(8), billing=resolve_billing("auto", "on_demand", None, None, "cpu", 1))
    data = types.SimpleNamespace(input_state=None, validation_examples=0)
    parts = train_callbacks.make_callbacks(context, train.Plan(
        data, 4, 0, 1e6, resume.NEW_RUN, context.billing.bill(context.started_at)))
    logger = parts.logger
    logger.on_train_begin()
    logger.on_epoch_begin(0)
    logger.on_epoch_end(0, {"epoch_power_watts": 300.0})
    logger.on_train_end()
    (text,) = {v.metadata.summary_description for path in events.event_files(str(
        tmp_path / "train")) for e in events.read_events(path) for v in e.summary.value
        if v.tag == "energy/epoch_power_watts"}
    assert said in text and not_said not in text and "*Unit: watts.*" in text
