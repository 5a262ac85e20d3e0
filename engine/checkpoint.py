"""Reading weights from a model directory: safetensors only, single file or sharded.

Files are opened with `safetensors.safe_open`, which memory-maps them and reads one tensor at a
time, so peak memory is about one copy of the model in the requested dtype. Pickle-based formats
(`*.bin`, `*.pt`, `*.pth`, `*.ckpt`, `*.pkl`) are never opened: unpickling runs arbitrary code.
Every error names the file and, where there is one, the tensor.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from .errors import ModelLoadError

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
FLOAT_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
                "BF16": torch.bfloat16}  # fmt: skip


def weight_files(model_dir: Path) -> list[Path]:
    """The safetensors files holding the model's weights, in a stable order.

    Uses `model.safetensors.index.json` when present (sharded checkpoints), else
    `model.safetensors`, else the directory's only `*.safetensors` file.
    """
    index = model_dir / INDEX_NAME
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ModelLoadError(f"{index}: not a safetensors index ({exc})") from exc
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelLoadError(f"{index}: `weight_map` must be a non-empty object")
        files = sorted({str(v) for v in weight_map.values()})
        paths = []
        for name in files:
            # Judged by the name the index writes, not where it resolves: a Hugging Face cache
            # snapshot links every file to `../../blobs/<hash>`, and a user may link shards
            # from another disk.
            if Path(name).name != name or name in (".", ".."):
                raise ModelLoadError(f"{index}: shard {name!r} lies outside the model directory")
            path = model_dir / name
            if not path.is_file():
                raise ModelLoadError(f"{index}: shard file {name!r} is missing")
            paths.append(path)
        return paths
    if (model_dir / SINGLE_NAME).is_file():
        return [model_dir / SINGLE_NAME]
    found = sorted(model_dir.glob("*.safetensors"))
    if len(found) == 1:
        return found
    pickles = sorted(p.name for p in model_dir.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise ModelLoadError(
            f"{model_dir}: only pickled weights found ({', '.join(pickles)}); decide loads "
            "safetensors only, because unpickling runs code. Convert them with "
            "`safetensors.torch.save_file` in a trusted environment."
        )
    if len(found) > 1:
        raise ModelLoadError(
            f"{model_dir}: {len(found)} *.safetensors files but no {INDEX_NAME} to say which "
            "tensor is where"
        )
    raise ModelLoadError(f"{model_dir}: no weights (expected {SINGLE_NAME} or {INDEX_NAME})")


def check_index(model_dir: Path, source: TensorSource) -> None:
    """Every tensor `model.safetensors.index.json` names lies in the shard it names."""
    index = model_dir / INDEX_NAME
    if not index.is_file():
        return
    weight_map = json.loads(index.read_text())["weight_map"]
    for name, shard in sorted(weight_map.items()):
        held = source.stored_file(name)
        if held is None or held.name != Path(shard).name:
            where = "no shard holds it" if held is None else f"it lies in {held.name}"
            raise ModelLoadError(
                f"{index}: `weight_map` puts tensor {name!r} in {shard}, but {where}"
            )


class TensorSource:
    """Name → tensor access over every shard of a checkpoint.

    `rename` maps a stored name to the name the family's weight map uses (BERT exports spell
    LayerNorm weights `gamma`/`beta` and may omit the `bert.` prefix); two stored tensors that
    rename to one name are an error."""

    def __init__(self, files: list[Path], rename: Callable[[str], str] | None = None) -> None:
        self._handles = {}
        self._where: dict[str, Path] = {}
        self._stored: dict[str, str] = {}  # name -> the name in the file
        self._by_stored: dict[str, Path] = {}
        for path in files:
            try:
                handle = safe_open(str(path), framework="pt")
            except (SafetensorError, OSError) as exc:
                raise ModelLoadError(f"{path}: not a readable safetensors file ({exc})") from exc
            self._handles[path] = handle
            for stored in handle.keys():  # noqa: SIM118 - safe_open is not a Mapping
                name = rename(stored) if rename else stored
                if name in self._where:
                    first = self._stored[name]
                    also = "" if first == stored else f" (as {first!r} and {stored!r})"
                    raise ModelLoadError(
                        f"tensor {name!r} appears in both {self._where[name].name} and "
                        f"{path.name}{also}"
                    )
                self._where[name] = path
                self._stored[name] = stored
                self._by_stored[stored] = path

    def stored_file(self, stored: str) -> Path | None:
        """The file holding the tensor stored under `stored` (its name in the file)."""
        return self._by_stored.get(stored)

    def names(self) -> set[str]:
        return set(self._where)

    def file_of(self, name: str) -> Path:
        return self._where[name]

    def _slice(self, name: str):  # safetensors does not export its slice type
        return self._handles[self._where[name]].get_slice(self._stored[name])

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._slice(name).get_shape())

    def stored_dtype(self, name: str) -> str:
        """The dtype as written in the file header (e.g. "BF16")."""
        return self._slice(name).get_dtype()

    def float_dtype(self, name: str) -> torch.dtype:
        """The stored dtype as a torch floating-point dtype; other dtypes are errors."""
        stored = self.stored_dtype(name)
        if stored not in FLOAT_DTYPES:
            raise ModelLoadError(
                f"{self._where[name].name}: tensor {name!r} has dtype {stored}, "
                "expected floating point weights"
            )
        return FLOAT_DTYPES[stored]

    def get(self, name: str, dtype: torch.dtype) -> torch.Tensor:
        tensor = self._handles[self._where[name]].get_tensor(self._stored[name])
        if not tensor.dtype.is_floating_point:
            raise ModelLoadError(
                f"{self._where[name].name}: tensor {name!r} has dtype {tensor.dtype}, "
                "expected floating point weights"
            )
        return tensor.to(dtype)


def read_weights(
    model_dir: Path,
    names: Mapping[str, str],
    shapes: Mapping[str, tuple[int, ...]],
    dtype: torch.dtype,
    ignore: Callable[[str], bool] = lambda name: False,
    rename: Callable[[str], str] | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield `(engine_name, tensor)` for every checkpoint tensor in `names`.

    `names` maps checkpoint names (after `rename`) to engine names; `shapes` gives the expected
    shape per engine name. Missing, misshapen, non-float and unexpected tensors (those `ignore`
    does not excuse) and an index that misplaces a tensor are errors that name the tensor and
    file, all found from the headers before the first tensor is read.
    """
    source = TensorSource(weight_files(model_dir), rename)
    check_index(model_dir, source)
    present = source.names()
    missing = sorted(set(names) - present)
    if missing:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise ModelLoadError(
            f"{model_dir}: checkpoint lacks tensor(s) {', '.join(missing[:5])}{more}"
        )
    unexpected = sorted(n for n in present - set(names) if not ignore(n))
    if unexpected:
        more = f" (and {len(unexpected) - 5} more)" if len(unexpected) > 5 else ""
        raise ModelLoadError(
            f"{model_dir}: unexpected tensor(s) {', '.join(unexpected[:5])}{more} in "
            f"{source.file_of(unexpected[0]).name}; the config does not describe them"
        )
    for src, dst in names.items():
        got, want = source.shape(src), shapes[dst]
        if got != tuple(want):
            raise ModelLoadError(
                f"{source.file_of(src).name}: tensor {src!r} has shape {list(got)}, the config "
                f"implies {list(want)}"
            )
        source.float_dtype(src)
    for src, dst in names.items():
        yield dst, source.get(src, dtype)


def describe_weights(
    model_dir: Path,
    unread: Callable[[str], bool] = lambda name: False,
    rename: Callable[[str], str] | None = None,
) -> tuple[int, dict[str, int], list[Path]]:
    """Parameter count, parameters per stored dtype, and files: read from headers only.

    A tensor `unread` names (after `rename`, as `read_weights` takes `ignore`) is one the model
    never reads and is not counted: above all the copy of a tied head some exporters store
    beside the embedding it shares, which would count that matrix twice."""
    files = weight_files(model_dir)
    source = TensorSource(files, rename)
    count, by_dtype = 0, {}
    for name in source.names():
        if unread(name):
            continue
        numel = 1
        for dim in source.shape(name):
            numel *= dim
        count += numel
        stored = source.stored_dtype(name)
        by_dtype[stored] = by_dtype.get(stored, 0) + numel
    return count, by_dtype, files
