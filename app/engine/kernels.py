"""The GPU kernels a run's training step runs, read from its compiled program.

Why: three ConvNeXt-T runs on one H100, same command, each autotuned from an
empty cache, gave 3,290 / 3,286 / 4,440 images/sec with the SM clock at its maximum
throughout; the slow run's autotune results loaded into a fresh run gave 3,300, the
fast run's 4,463 (benchmarks/results/2026-12-06-h100-autotune-spread.json, added at
6803d87). XLA's autotuner, timing candidates, picks other kernels from run to run (31
of 300 choices differed), and the kernels alone carry the 35%. So every run names its
kernels: a list and a digest a user can compare.

Where the list comes from: the training step's optimized HLO
(`jax.stages.Compiled.as_text()`, kept by app/engine/precompile.py) records each
library call's chosen kernel in its backend_config: cuDNN's "algorithm" {algo_id,
tuning knobs, workspace}, cuBLAS's "selected_algorithm", and each fusion's
block-level or Triton tiling. Not XLA's own autotune dump: JAX's compilation cache
keys on XLA_FLAGS, so a dump path per run folder would end warm starts (each run would
compile afresh), and a program served from that cache autotunes nothing, so its dump is
empty.

The digest is the sha256 of the canonical list: each entry's op_name (the model's
name for the operation, from JAX), its target, its result's shape and the chosen
config, sorted; not the instruction names, which XLA numbers afresh at each compile,
nor the scratch buffer a library call's shape carries (its size is the choice's).
A CPU program chooses nothing: its list is empty and its digest that of [].
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
import threading

KERNELS_FILE = "kernels.json"  # in the run folder: the list, for a later comparison
# --keep_kernels: XLA's own autotune results, which --kernels_from loads (autotune.py).
KEPT_FILE = os.path.join("kernels", "autotune.textproto")
# Where JAX has XLA keep each fusion's autotuning inside its compilation cache
# (jax._src.compiler, jax_persistent_cache_enable_xla_caches).
XLA_AUTOTUNE_CACHE = "xla_gpu_per_fusion_autotune_cache_dir"

# An instruction that can hold a choice: `%name = SHAPE custom-call(` or `fusion(`.
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(.+?)\s+(custom-call|fusion)\(")
_TARGET = re.compile(r'custom_call_target="([^"]*)"')
_OP_NAME = re.compile(r'metadata=\{[^}]*?op_name="((?:[^"\\]|\\.)*)"')
_BACKEND_CONFIG = "backend_config="
# A fusion's chosen emitter and tiling (fusion_backend_config's parts).
FUSION_CONFIGS = ("block_level_fusion_config", "triton_gemm_config", "cudnn_fusion_config",
                  "custom_fusion_config")
# A library call's backend_config -> the part that holds what was chosen.
LIBRARY_CONFIGS = {"cudnn_conv_backend_config": "algorithm",
                   "cudnn_fmha_backend_config": "algorithm",
                   "cudnn_norm_backend_config": "algorithm",
                   "gemm_backend_config": "selected_algorithm"}
_DECODER = json.JSONDecoder()


def chosen_kernels(hlo_text: str) -> list[dict]:
    """Every library call's and fusion's chosen kernel in optimized HLO text, in the
    program's order: instruction, op_name, target, shape (the result's, without the
    scratch buffer), kind (library or fusion) and config (what was chosen)."""
    found = []
    for line in hlo_text.splitlines():
        at = line.find(_BACKEND_CONFIG)
        if at < 0:
            continue
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        try:
            config, _ = _DECODER.raw_decode(line, at + len(_BACKEND_CONFIG))
        except ValueError:  # an old text form (a quoted string): nothing we can read
            continue
        if not isinstance(config, dict):
            continue
        choice = _choice(config, match.group(3), line)
        if choice is None:
            continue
        op_name = _OP_NAME.search(line)
        found.append({"instruction": match.group(1),
                      "op_name": op_name.group(1) if op_name else "",
                      "shape": result_shape(match.group(2)), **choice})
    return found


def _choice(config: dict, opcode: str, line: str) -> dict | None:
    """{target, kind, config} of what this instruction's backend_config chose, or None."""
    if opcode == "custom-call":
        for name, part in LIBRARY_CONFIGS.items():
            chosen = (config.get(name) or {}).get(part)
            if chosen is not None:
                target = _TARGET.search(line)
                return {"target": target.group(1) if target else name, "kind": "library",
                        "config": chosen if isinstance(chosen, dict) else {part: chosen}}
        return None
    fusion = config.get("fusion_backend_config")
    if not isinstance(fusion, dict):
        return None
    chosen = {name: fusion[name] for name in FUSION_CONFIGS if name in fusion}
    if not chosen:  # XLA's own emitter, nothing tuned
        return None
    return {"target": f"fusion:{fusion.get('kind', '?')}", "kind": "fusion", "config": chosen}


def result_shape(shape: str) -> str:
    """A library call's result shape without its scratch buffer: `(bf16[8,96]{1,0},
    u8[616863760]{0})` -> `bf16[8,96]{1,0}` (the workspace's size is the chosen
    algorithm's, so it belongs to the choice, not to the operation)."""
    if not shape.startswith("("):
        return shape
    parts, depth, start = [], 0, 1
    for index, char in enumerate(shape):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if (char == "," and depth == 1) or (char == ")" and depth == 0):
            parts.append(shape[start:index].strip())
            start = index + 1
    kept = list(parts)
    while len(kept) > 1 and re.match(r"[us]8\[\d+\]", kept[-1]):
        kept.pop()
    return kept[0] if len(kept) == 1 else "(" + ", ".join(kept) + ")"


def canonical(kernels: list[dict]) -> list[dict]:
    """The list as the digest sees it: no instruction names, sorted."""
    entries = [{k: v for k, v in entry.items() if k != "instruction"} for entry in kernels]
    return sorted(entries, key=_text)


def _text(entry) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"))


def digest(kernels: list[dict]) -> str:
    """sha256 (hex) of the canonical list: equal for the same kernels however numbered."""
    text = "[" + ",".join(_text(entry) for entry in canonical(kernels)) + "]"
    return hashlib.sha256(text.encode()).hexdigest()


def counts(kernels: list[dict]) -> dict:
    """{"library_calls": N, "fusions": M}."""
    kinds = collections.Counter(entry.get("kind") for entry in kernels)
    return {"library_calls": kinds["library"], "fusions": kinds["fusion"]}


def differing(a: list[dict], b: list[dict]) -> int:
    """How many kernels differ between two lists: per operation (op_name, target,
    shape), the choices one list has and the other lacks, the larger side counted
    (an operation only one list has counts whole)."""
    def by_operation(kernels):
        grouped = collections.defaultdict(collections.Counter)
        for entry in canonical(kernels):
            key = (entry.get("op_name"), entry.get("target"), entry.get("shape"))
            grouped[key][_text(entry.get("config"))] += 1
        return grouped

    left, right = by_operation(a), by_operation(b)
    total = 0
    for key in left.keys() | right.keys():
        one, other = left.get(key, collections.Counter()), right.get(key, collections.Counter())
        total += max(sum((one - other).values()), sum((other - one).values()))
    return total


# ------------------------------------------------- whether JAX's cache served a compile
_hits = collections.Counter()  # thread id -> JAX persistent-cache hits seen in it
_listening = threading.Lock()
_listener = None


def listen() -> None:
    """Counts JAX's persistent-cache hits per thread from now on (once per process;
    JAX calls listeners in the thread that compiles)."""
    global _listener
    with _listening:
        if _listener is not None:
            return
        from jax import monitoring

        def on_event(event: str, **kwargs):
            if event == "/jax/compilation_cache/cache_hits":
                _hits[threading.get_ident()] += 1

        monitoring.register_event_listener(on_event)
        _listener = on_event


def cache_hits_here() -> int:
    """JAX persistent-cache hits seen in the calling thread since `listen`."""
    return _hits[threading.get_ident()]


def autotune_cache_entries(compilation_cache_dir: str | None) -> int:
    """Files in XLA's per-fusion autotune cache inside JAX's compilation cache (0 where
    there is none): read before the first compile, to tell a step autotuned by this run
    from one whose choices that cache served."""
    if not compilation_cache_dir:
        return 0
    try:
        return sum(len(files) for _, _, files in os.walk(
            os.path.join(compilation_cache_dir, XLA_AUTOTUNE_CACHE)))
    except OSError:
        return 0


_at_start: dict = {}  # what note_start saw, before the first compile


def note_start(cache_enabled: bool = True) -> None:
    """Notes, before JAX compiles anything, how many choices XLA's per-fusion autotune
    cache holds (0 where it is off, as for --keep_kernels): `source` tells a step this
    run autotuned from one whose choices that cache may have served."""
    from app.engine.cold_start import compilation_cache_dir

    _at_start["autotune_cache_entries"] = (
        autotune_cache_entries(compilation_cache_dir()) if cache_enabled else 0)
    _at_start.pop("choice", None)


def note_choice(block: dict) -> None:
    """The measured choice of this run's kernels (app/engine/measured.py), for `describe`:
    summary.json's kernels.choice and the closing line's words."""
    _at_start["choice"] = dict(block)


# How the closing line names where the kernels came from (summary.json's `source`).
SOURCES = {
    "autotuned": "autotuned by this run",
    "compiled": "compiled by this run",  # a program that chose nothing (a CPU's)
    "heuristic": "XLA's heuristic choice, compiled by this run; nothing timed",
    "autotune_cache": "compiled by this run; its choices from XLA's autotune cache in "
                      "JAX's cache folder where it held them",
    "jax_cache": "from JAX's cache",
    "loaded": "loaded from {path}",
}


def source(served: bool, chosen: int, loaded_from: str | None) -> str:
    """Where the step's kernels came from (a key of SOURCES)."""
    if loaded_from:
        return "loaded"
    if served:
        return "jax_cache"
    if not chosen:
        return "compiled"
    return "autotune_cache" if _at_start.get("autotune_cache_entries") else "autotuned"


NOTHING_LOADED = ("nothing loaded from {path}: this program chooses no GPU kernels (a "
                  "CPU's compiles none)")


def describe(hlo_text: str, served: bool, loaded_from: str | None,
             heuristic: bool = False) -> tuple[dict, list]:
    """(summary.json's `kernels` block, the list for kernels.json) of a compiled step.

    A file to load (--kernels_from) that the program had no use for (a CPU's program
    chooses no kernels) is not "loaded": the source is what compiled it, and
    `not_loaded` says so (a GPU's autotune file on a CPU read "loaded" before).
    `heuristic`: the step compiled with XLA's heuristic choice (--xla_autotune=heuristic,
    or the user's XLA_FLAGS choosing it): its kernels were taken, none timed, so its
    source is `heuristic`, never "autotuned by this run" (an H100's heuristic runs of
    ConvNeXt-T said that, 2026-12-07-h100-models-measured.json)."""
    found = chosen_kernels(hlo_text)
    tally = counts(found)
    chose = sum(tally.values())
    choice = _at_start.get("choice") or {}
    where = source(served, chose, loaded_from if chose else None)
    if (heuristic or choice.get("kept") == "heuristic") and where in (
            "autotuned", "autotune_cache"):  # its kernels were taken, not timed
        where = "heuristic"
    block = {"digest": digest(found), **tally, "source": where,
             "loaded_from": loaded_from, "file": KERNELS_FILE}
    if loaded_from and not chose:
        block["not_loaded"] = NOTHING_LOADED.format(path=loaded_from)
    if choice:
        block["choice"] = dict(choice)
        if choice.get("loaded_results") and not served:  # the kept autotune results
            block.update(source="loaded", loaded_from=choice["loaded_results"])
    return block, found


def choice_words(choice: dict) -> str:
    """What the measured choice kept and by how much (the closing line's words after
    the kernels'), e.g. "XLA's heuristic kernels kept: 35.0% faster than the autotuned
    (105.40 ms a step autotuned, 78.10 heuristic, 3 windows each)"."""
    kept = {"autotuned": "the autotuned kernels", "heuristic": "XLA's heuristic kernels",
            None: "no choice"}.get(choice.get("kept"), str(choice.get("kept")))
    if choice.get("not_measured"):
        words = f"{kept} kept, not measured: {choice['not_measured']}" if choice.get(
            "kept") else f"not measured: {choice['not_measured']}"
    elif choice.get("how") == "loaded":
        earlier = choice.get("measured") or {}
        gain = earlier.get("autotuned_gain")
        by = (f" ({_faster(choice.get('kept'), gain)} when measured)"
              if isinstance(gain, (int, float)) else "")
        words = f"{kept} kept{by}: the measured choice loaded from {choice.get('loaded_from')}"
    else:
        gain = choice.get("autotuned_gain") or 0.0
        times = (f"{choice.get('autotuned_step_ms', 0):.2f} ms a step autotuned, "
                 f"{choice.get('heuristic_step_ms', 0):.2f} heuristic, "
                 f"{choice.get('windows')} windows each")
        if choice.get("kept") == "heuristic" and gain > 0:
            words = (f"{kept} kept: the autotuned were {gain:.1%} faster, under the "
                     f"{choice.get('margin', 0):.0%} margin ({times})")
        else:
            words = f"{kept} kept: {_faster(choice.get('kept'), gain)} ({times})"
        if choice.get("kernels_differ") == 0:
            words += "; the two programs chose the same kernels"
    if choice.get("kept_in"):
        words += f"; kept in {choice['kept_in']}"
    elif choice.get("not_kept"):
        words += f"; not kept: {choice['not_kept']}"
    if choice.get("keep_kernels"):
        words += f"; --keep_kernels: {choice['keep_kernels']}"
    return words


def _faster(kept: str | None, gain: float) -> str:
    """"3.4% faster than XLA's heuristic" / "25.9% faster than the autotuned" (`gain`:
    how much faster the autotuned step was, as measured.decide gives it); a heuristic
    kept under the margin: "the autotuned 1.1% faster, under the margin"."""
    if kept == "autotuned":
        return f"{gain:.1%} faster than XLA's heuristic"
    if gain > 0:
        return f"the autotuned {gain:.1%} faster, under the margin"
    return f"{1 / (1 + gain) - 1:.1%} faster than the autotuned"


def line(block: dict | None) -> str:
    """`kernels: 3f2a9c01b7de (65 library calls, 184 fusions; autotuned by this run)`,
    or why they are not known."""
    if not block:
        return "kernels: not known"
    if not block.get("digest"):
        return f"kernels: not known: {block.get('not_known') or 'not recorded'}"
    words = SOURCES.get(block.get("source"), str(block.get("source")))
    words = words.format(path=block.get("loaded_from"))
    calls, fusions = block.get("library_calls", 0), block.get("fusions", 0)
    text = (f"kernels: {block['digest'][:12]} ({calls} library call{'s' * (calls != 1)}, "
            f"{fusions} fusion{'s' * (fusions != 1)}; {words})")
    if block.get("not_loaded"):
        text += f"; {block['not_loaded']}"
    if block.get("choice"):
        text += f"; {choice_words(block['choice'])}"
    if block.get("earlier_digest"):
        text += (f"; an earlier attempt of this run ran others "
                 f"({block['earlier_digest'][:12]})")
    if block.get("kept"):
        text += f"; kept in {block['kept']}"
    elif block.get("not_kept"):
        text += f"; none kept: {block['not_kept']}"
    if block.get("slow_ops"):  # app/engine/kernel_truth.py's findings
        slow = block["slow_ops"]
        text += (f"; {len(slow)} kind(s) of library call over {SLOW_OP_RATIO:g}x their "
                 "autotuned time in the trace: "
                 + "; ".join(slow_op_words(found) for found in slow[:3]))
    return text


SLOW_OP_RATIO = 2.0  # a library call this many times its autotuned time (kernel_truth.py)


def slow_op_words(found: dict) -> str:
    """One of kernel_truth.py's findings in a line's words: the op (its shape), the
    engine, the ms a step it costs."""
    return (f"{found['op_name'] or found['target']} {found['shape']} ({found['engine']}): "
            f"{found['ms_per_step']:.2f} ms a step in {found['calls_per_step']} call(s), "
            f"{found['times_autotuned']:g}x the {found['autotuner_us']:g} µs the autotuner "
            "measured")
