"""callbacks/stop_on_request.py: a fit stops at the first step boundary after a stop
is requested, raising Preempted with the steps done and the signal's name; without a
request it runs to its end."""

import keras
import pytest

from callbacks.stop_on_request import StopOnRequest
from callbacks.stops import Preempted, StopRequest
from tiny_keras import tiny_data, tiny_model


def test_only_a_stop_request_is_taken():
    with pytest.raises(ValueError) as error:
        StopOnRequest(None)
    assert "request must be a StopRequest, received None" in str(error.value)


def test_a_request_stops_the_fit_at_the_next_step_and_is_taken():
    request = StopRequest()

    class RequestInStep3(keras.callbacks.Callback):  # as a SIGINT arriving in step 3
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                request.request("SIGINT")

    model = tiny_model()
    with pytest.raises(Preempted) as stop:
        model.fit(*tiny_data(64), batch_size=8, epochs=2, verbose=0,
                  callbacks=[RequestInStep3(), StopOnRequest(request)])
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 3  # no 4th step
    assert stop.value.step == 3 and stop.value.signal_name == "SIGINT"
    assert str(stop.value) == "preempted (SIGINT) at step 3; no checkpoint yet"
    assert request.taken.is_set()


def test_a_request_before_training_stops_it_before_any_step():
    request = StopRequest()
    request.request("SIGTERM")
    model = tiny_model()
    with pytest.raises(Preempted) as stop:
        model.fit(*tiny_data(32), batch_size=8, epochs=1, verbose=0,
                  callbacks=[StopOnRequest(request)])
    assert stop.value.step is None
    assert str(stop.value) == "preempted (SIGTERM) before training started; no checkpoint yet"
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 0


def test_without_a_request_the_fit_runs_to_its_end():
    request = StopRequest()
    stopper = StopOnRequest(request)
    history = tiny_model().fit(*tiny_data(32), batch_size=8, epochs=2, verbose=0,
                               callbacks=[stopper])
    assert len(history.history["loss"]) == 2 and stopper.steps == 4
    assert not request.taken.is_set()
