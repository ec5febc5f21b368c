"""What identifies a dataset's content, so that a run resumes only on the data it began on.

Counts alone miss two classes' folders swapped, or one image replaced: the rerun would
train on other data without a word. Each builder sets `Datasets.fingerprint`, a JSON
dict {"kind", "digest", "parts"}: `digest` is the whole, `parts` name the pieces it is
made of (a class folder, an IDX file, a TFDS split), each with its own digest, so a
difference can be said in one line ("2 class folders differ: train/cat, train/dog").
The run saves it with its data facts in every checkpoint (app/run/resume.py) and
checks it on resume.

What identifies each kind, cheaply enough to compute at every start:
- a folder (and what a folder builder reads): each file's path relative to the root
  (its class folder with it), size and st_mtime_ns, from the os.stat the door's
  listing makes anyway (folder.scan_split); no byte is read. Measured on a 2-core
  host, 50,000 files in 100 class folders, warm cache: listing with the fingerprint
  0.22 s, of which the hashing is 0.02 s (ImageNet's 1.28 million: about 6 s, nearly
  all the listing's own stats). A copy that does not keep modification times (`cp`
  without -p) reads as other data;
- fashion_mnist: the IDX files' content as read (the arrays' bytes, 55 MB in all,
  about 0.1 s);
- tfds: the builder's name and version, the splits' example counts and the prepared
  record files' names and sizes;
- synthetic and digits: the parameters that make them (digits come from
  scikit-learn's wheel, split with a fixed seed).
"""

from __future__ import annotations

import hashlib
import os

from preprocessing.spec import first_names

PART_DIGEST_CHARS = 16  # per part: enough to tell a change, small in every checkpoint
NOUNS = {"files": "class folder", "idx": "file", "tfds": "part", "parameters": "parameter"}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def folder_part(entries) -> str:
    """The digest of one class folder's files: `entries` are (name, size, mtime_ns), in
    any order."""
    return _sha("".join(f"{name}\0{size}\0{mtime}\n" for name, size, mtime in
                        sorted(entries)))[:PART_DIGEST_CHARS]


def of_parts(kind: str, parts: dict) -> dict:
    """A fingerprint from its parts ({name: digest string}); the digest covers them
    all, names included, whatever their order."""
    whole = _sha("".join(f"{name}\0{parts[name]}\n" for name in sorted(parts)))
    return {"kind": kind, "digest": whole, "parts": dict(sorted(parts.items()))}


def of_listing(entries) -> dict:
    """A folder dataset's fingerprint from (path relative to the root, size, mtime_ns)
    of each file, in any order; the same as folder.scan_split's parts give."""
    folders: dict = {}
    for path, size, mtime in entries:
        folder, name = os.path.split(path)
        folders.setdefault(folder, []).append((name, size, mtime))
    return of_parts("files", {folder: folder_part(files) for folder, files in folders.items()})


def of_arrays(arrays: dict) -> dict:
    """The fingerprint of data already read whole ({IDX file name: its numpy array},
    Fashion-MNIST's): each array's shape, dtype and bytes."""
    parts = {}
    for name, array in arrays.items():
        digest = hashlib.sha256(f"{array.shape}{array.dtype}".encode())
        digest.update(memoryview(array).cast("B") if array.flags.c_contiguous
                      else array.tobytes())
        parts[name] = digest.hexdigest()[:PART_DIGEST_CHARS]
    return of_parts("idx", parts)


def of_tfds(name: str, version: str, splits: dict, folder: str, file_format: str) -> dict:
    """A prepared TFDS dataset's fingerprint: builder and version, each split's example
    count, and each record file of `file_format` in `folder` by name and size."""
    parts = {"builder": f"{name}:{version}"}
    parts.update({f"split {split}": str(count) for split, count in splits.items()})
    with os.scandir(folder) as entries:
        for entry in entries:
            if f".{file_format}-" in entry.name and entry.is_file():
                parts[entry.name] = f"{entry.stat().st_size} bytes"
    return of_parts("tfds", parts)


def of_parameters(**parameters) -> dict:
    """The fingerprint of data made from parameters (synthetic, digits)."""
    return of_parts("parameters", {key: str(value) for key, value in parameters.items()})


def _name(part: str) -> str:
    """A part's name for one line (a saved one may hold anything)."""
    part = part if part.isprintable() else ascii(part)
    return part if len(part) <= 100 else part[:97] + "..."


def differences(saved, now: dict) -> str | None:
    """What differs between a recorded fingerprint and today's, in a phrase, or None
    when they agree.

    `saved` was read back from a checkpoint (untrusted): anything but a fingerprint's
    shape is said as such. A whole split present on one side only (validation turned
    off) is not a difference of the data; the counts check covers what it changes.
    """
    if not isinstance(saved, dict) or not isinstance(saved.get("digest"), str):
        return "its recorded fingerprint cannot be read"
    if saved["digest"] == now["digest"] and saved.get("kind") == now["kind"]:
        return None
    if saved.get("kind") != now["kind"]:
        return f"a {str(saved.get('kind'))[:20]} dataset then, a {now['kind']} one now"
    old = saved.get("parts")
    if not isinstance(old, dict) or not all(isinstance(v, str) for v in old.values()):
        return "its content differs"
    new = now["parts"]
    if now["kind"] == "files":  # a split on one side only is left out
        tops = {k.split("/")[0] for k in old} & {k.split("/")[0] for k in new}
        old = {k: v for k, v in old.items() if k.split("/")[0] in tops}
        new = {k: v for k, v in new.items() if k.split("/")[0] in tops}
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if not changed:
        return None
    noun = NOUNS.get(now["kind"], "part")
    shown = [_name(k) if k in old and k in new else
             f"{_name(k)} ({'gone' if k in old else 'new'})" for k in changed]
    return f"{len(changed)} {noun}{'s' if len(changed) != 1 else ''} " \
           f"differ{'s' if len(changed) == 1 else ''}: {first_names(shown)}"
