"""What has one owner, enforced: the batch's shares are divided out once, by BatchShape
(preprocessing/spec.py, made by app/engine/distribute.py's topology), billed
seconds, hours and dollars are computed once, by the Bill (callbacks/figures/bill.py),
and images from steps once, by the run's Position (callbacks/figures/steps.py).
No other module multiplies or divides a batch by a process or device count, or a time
by a price, and no callback multiplies a step count by a batch. Each rule has a test
that it sees the code it replaced.
"""

import ast
import re

from test_layout import _modules


# ---- the batch is divided in one place: BatchShape -------------------------------------
# A process count, in any product or quotient; a device count, beside a batch.
PROCESS_COUNT = re.compile(r"\b(num_processes|process_count)\b")
DEVICE_COUNT = re.compile(r"\b(devices_per_process|num_replicas|local_device_count|device_count)\b"
                          r"|\blen\([^()]*devices[^()]*\)")
BATCH = re.compile(r"batch")
# What a name holds when it is one of the batch's shares.
BATCH_SHARE = re.compile(r"\b(per_device|per_process|per_replica|global_batch|global_size)\b")
DIVIDING = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
BATCH_SHAPE_HOME = ("preprocessing.spec", "BatchShape")  # the one place allowed


def _batch_arithmetic(tree) -> list[str]:
    """The products, quotients and remainders in `tree` that re-derive the batch's shares:
    one whose operand names a process count, one of a device count and a batch, and any
    such arithmetic whose result is stored under the name of a share (per_device...)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, DIVIDING):
            sides = [ast.unparse(node.left), ast.unparse(node.right)]
            if any(PROCESS_COUNT.search(side) for side in sides) or any(
                    DEVICE_COUNT.search(a) and BATCH.search(b) for a, b in (sides, sides[::-1])):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            shares = any(BATCH_SHARE.search(ast.unparse(t)) for t in targets)
            arithmetic = any(isinstance(n, ast.BinOp) and isinstance(n.op, DIVIDING)
                             for n in ast.walk(node.value))
            if isinstance(node, ast.AugAssign) and isinstance(node.op, DIVIDING):
                arithmetic = True
            if shares and arithmetic:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def _without_batch_shape(tree):
    """The module's tree with the BatchShape class taken out (the one place that divides)."""
    tree.body = [n for n in tree.body
                 if not (isinstance(n, ast.ClassDef) and n.name == BATCH_SHAPE_HOME[1])]
    return tree


def test_only_the_batch_shape_divides_the_batch():
    """Pipelines read BatchShape's fields (per_process, per_replica, global_size,
    largest_shard) by name: a pipeline that multiplies its batch by the process count,
    or divides it by its devices, has a second copy of the topology's arithmetic, and
    a second place to disagree with it."""
    found = []
    for module, path in _modules().items():
        if not module.startswith("preprocessing"):
            continue
        tree = ast.parse(open(path).read(), path)
        if module == BATCH_SHAPE_HOME[0]:
            tree = _without_batch_shape(tree)
        found += [f"{module} {hit}" for hit in _batch_arithmetic(tree)]
    assert not found, "the batch divided outside BatchShape:\n" + "\n".join(found)


# What the pipelines did before BatchShape was read by name (each one line of theirs).
REDERIVED = [
    "wanted = spec.validation_steps * spec.batch_size * spec.num_processes",
    "shape = (spec.batch_size * spec.num_processes, size, size, 3)",
    "largest = -(-len(validation_records) // spec.num_processes)",
    "self.per_device = batch_size // len(self.devices)",
    "ok = batch_size % len(self.devices)",
    "global_batch = self.batch_size * jax.process_count()",
    "per_device = self.batch_size // count",
    "self.per_device //= count",
]
NOT_THE_BATCH = [
    "workers = max(len(self.devices) * self.options.decoders, 4)",
    "start = batch * self.batch_size",
    "steps = len(self.records) // batch_size",
    "self.per_device = batch.per_replica",
]


def _hits(check, keep) -> list[str]:
    """`check`'s findings in every module whose name `keep` accepts, each named by it."""
    return [f"{module} {hit}" for module, path in _modules().items() if keep(module)
            for hit in check(ast.parse(open(path).read(), path))]


def _sees_each(check, before: list, not_it: list) -> None:
    """`check` finds each line of `before` (what it replaced) and none of `not_it`."""
    for line in before:
        assert check(ast.parse(line)), line
    for line in not_it:
        assert not check(ast.parse(line)), line


def test_the_batch_check_sees_each_old_re_derivation():
    _sees_each(_batch_arithmetic, REDERIVED, NOT_THE_BATCH)
    home = ast.parse("class BatchShape:\n    def f(self):\n        return self.global_size // "
                     "self.num_processes\n")
    assert _batch_arithmetic(home) and not _batch_arithmetic(_without_batch_shape(home))


# ---- the bill has one owner: callbacks/figures/bill.py -----------------------------------
BILL_HOME = "callbacks.figures.bill"
# A billed figure (billed seconds, hours, dollars) or a ledger attempt's end in any
# arithmetic: the Bill's to do.
BILLED = re.compile(r"\bbilled(_seconds|_hours|_usd)?\b|billed_seconds|billed_hours|last_seen")
# Dollars: a time (hours, seconds, 3,600) multiplied or divided by a price or an amount.
TIME = re.compile(r"hours|seconds|\b3600")
MONEY = re.compile(r"price|usd|dollars|\bcost")


def _bill_arithmetic(tree) -> list[str]:
    """Where `tree` computes billed seconds or dollars, or writes dollars ("$" before a
    formatted amount), which only the Bill's module may do."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            sides = [ast.unparse(node.left), ast.unparse(node.right)]
            if any(BILLED.search(side) for side in sides):
                found.append(f"line {node.lineno}: billed arithmetic: {ast.unparse(node)}")
            elif isinstance(node.op, (ast.Mult, ast.Div)) and any(
                    TIME.search(a) and MONEY.search(b) for a, b in (sides, sides[::-1])):
                found.append(f"line {node.lineno}: dollars: {ast.unparse(node)}")
        elif isinstance(node, ast.JoinedStr):
            for text, value in zip(node.values, node.values[1:]):
                if (isinstance(text, ast.Constant) and str(text.value).endswith("$")
                        and isinstance(value, ast.FormattedValue)
                        and (value.format_spec or MONEY.search(ast.unparse(value.value)))):
                    found.append(f"line {node.lineno}: dollars written: {ast.unparse(node)}")
    return found


def test_only_the_bill_computes_billed_seconds_and_dollars():
    """Billed seconds were computed in four places (the cost callback, the checkpoint, the
    summary, the ledger), dollars for hours in four, dollars written in three ways: each
    a place for the bill to disagree with itself. The Bill (callbacks/figures/bill.py)
    computes them; the rest call it."""
    found = _hits(_bill_arithmetic, lambda module: module != BILL_HOME)
    assert not found, "the bill computed outside callbacks/figures/bill.py:\n" + "\n".join(found)


# What the callbacks, the summary, the ledger and the decision did before the Bill.
BILL_BEFORE = [
    "billed = plan.billed_seconds_before + ended_at - context.started_at",
    'state = {"billed_seconds": self.billed_seconds_before + time.time() - self.started_at}',
    'x = sum(max(0.0, a["last_seen"] - a["started_at"]) for a in attempts)',
    "hours = billed_seconds(self.start_time, self.billed_seconds_before) / 3600.0",
    "cost = billed_seconds / 3600.0 * price_per_hour_usd",
    'cell = money(t["hours"] * price)',
    'option = {"dollars": option_hours * price}',
    "return {p: billed_hours * price for p, price in by_option.items()}",
    'line = f"cost: ${value:,.4f}"',
    "line = f\"at ${summary['price_per_hour_usd']}/h\"",
]
NOT_THE_BILL = [
    "share = interruptions_per_hour * resume_hours",
    'duration = (b["hours"] - a["hours"]) * 3600',
    'line = f"${variable}={text!r}"',
    "by_option = {p: row.price_per_hour_usd(p) * machines for p in row.pricings()}",
]


def test_the_bill_check_sees_each_old_computation():
    _sees_each(_bill_arithmetic, BILL_BEFORE, NOT_THE_BILL)


# ---- the run's position has one owner: Position (callbacks/figures/steps.py) ----------
POSITION_HOME = "callbacks.figures.steps"
# The callbacks, and the module that builds them from the run's facts.
POSITION_READERS = ("callbacks.", "app.modes.train_callbacks")
# A batch's size in any of its names: what a step count would be multiplied by.
BATCH_SIZE = re.compile(r"global_batch_size|batch_size|per_process|per_replica|"
                        r"images_per_step|global_size")


def _batch_products(tree) -> list[str]:
    """The products in `tree` with a batch's size as a factor (steps into images)."""
    return [f"line {node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
            and any(BATCH_SIZE.search(ast.unparse(side)) for side in (node.left, node.right))]


def test_no_callback_multiplies_a_step_count_by_a_batch():
    """Images so far, an epoch's images, a window's rate: each is Position's `images`,
    `process_images` or `images_at`. A callback that multiplied steps by its own copy of
    the batch counted a resumed run's images apart from the checkpoint's (three did)."""
    found = _hits(_batch_products, lambda module: module != POSITION_HOME
                  and module.startswith(POSITION_READERS))
    assert not found, "a step count multiplied by a batch outside Position:\n" + "\n".join(found)


# What the callbacks did before the Position (each one line of theirs).
POSITION_BEFORE = [
    "self.images += steps * self.global_batch_size",
    "images = self.images_before + (step - self.resume_step) * self.global_batch_size",
    "epoch_rate = sums['steps'] * self.global_batch_size / sums['seconds']",
    "seconds, images = (end - start, (last_step - first_step) * self.images_per_step)",
    "x = Meter(images_per_epoch=steps_per_epoch * context.batch.per_process)",
    "logs['r'] = (batch - start_batch) * self.global_batch_size / (now - start_time)",
]
NOT_A_BATCH_PRODUCT = [
    "kwh = per_image * self.images_per_epoch / 3.6e6",
    "self.save(epoch + 1, (epoch + 1) * self.steps_per_epoch)",
    "flops = self.flops_per_image * images_per_sec",
]


def test_the_position_check_sees_each_old_multiplication():
    _sees_each(_batch_products, POSITION_BEFORE, NOT_A_BATCH_PRODUCT)
