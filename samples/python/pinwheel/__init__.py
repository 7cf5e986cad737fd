"""pinwheel: a data loader for GPU training, from Python.

Workers (C++ threads) read samples straight into a ring of pinned host
buffers; each batch is copied to the GPU on pinwheel's own stream and handed
to you as torch tensors (no copy: DLPack), already waited for on torch's
current stream.

Example::

    import numpy as np, pinwheel, torch
    images = np.zeros((2048, 3, 224, 224), np.uint8)
    labels = np.arange(2048, dtype=np.int64)
    data = pinwheel.ArrayDataset({"image": images, "label": labels})
    with pinwheel.Loader(data, batch_size=256, shuffle=True, num_workers=8) as loader:
        for epoch in range(10):
            for batch in loader:          # one epoch
                logits = model(batch["image"].float())
                loss = loss_fn(logits, batch["label"])

The hand-over and the release rule
----------------------------------
``next()`` makes torch's *current stream* wait for the batch's copy (no host
sync). Every tensor of a batch shares the batch's device buffer; the buffer
is reused only when the Batch has been released (``batch.release()``, or the
Batch object garbage-collected) *and* every tensor taken from it is gone,
and then only after the work queued on that same stream up to that moment.
So a tensor stays valid as long as you hold it, provided the work reading it
runs on the stream that was current at ``next()`` (for another stream, make
it wait first, as with ``Tensor.record_stream``). Holding tensors of
``device_buffers`` batches at once stops the pipeline: the next ``next()``
raises :class:`FailedPreconditionError` rather than hanging; ``clone()``
what you keep. After ``batch.release()``, ``batch["x"]`` raises
:class:`FailedPreconditionError`.

Ctrl-C: while ``next()`` waits it checks for signals every 100 ms (with
``num_workers >= 1``; with 0, a Python dataset's ``read()`` sees it), so
``KeyboardInterrupt`` comes at once; leaving the ``with`` block, ``close()``
or interpreter exit joins every thread.
"""

from __future__ import annotations

import atexit
import collections.abc as _abc
import numbers
import os
import sys
import warnings
import weakref


def _prefer_cuda_queues() -> bool:
    """More hardware work queues for CUDA, unless the user chose a number:
    with CUDA's default of 8 the GPU decode's kernels share a queue with the
    training step's and wait for every kernel queued before them (the step
    then waits for data). CUDA reads the variable once, at its first call in
    the process, so it is set only when torch has not started CUDA yet (and
    holds only if nothing else has). Returns whether it was set. See Note
    [hardware queues] in transfer/jpeg/nvjpeg_decoder.h."""
    if "CUDA_DEVICE_MAX_CONNECTIONS" in os.environ:
        return False
    torch = sys.modules.get("torch")
    try:
        started = torch is not None and bool(torch.cuda.is_initialized())
    except Exception:  # a torch without CUDA, or a stand-in: nothing started
        started = False
    if started:
        warnings.warn(
            "pinwheel was imported after torch started CUDA, so CUDA keeps its 8 hardware "
            "queues (CUDA_DEVICE_MAX_CONNECTIONS unset) and a GPU decode can wait behind "
            "the training step's kernels; import pinwheel first, or set "
            "CUDA_DEVICE_MAX_CONNECTIONS=32 before the process starts", RuntimeWarning,
            stacklevel=3)
        return False
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "32"
    return True


_cuda_connections_set = _prefer_cuda_queues()
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from . import errors
from ._pinwheel import (
    Batch,
    LaunchEnvironment,
    _Dataset,
    _DeviceTransform,
    _Loader,
    _default_device_buffers,
    array_dataset as _array_dataset,
    build_info,
    cache_stats as _cache_stats,
    cuda_backend_built,
    cuda_device_count,
    encode_jpeg as _encode_jpeg,
    expand_shard_pattern as _expand_shard_pattern,
    image_folder_classes as _image_folder_classes,
    normalize_image as _normalize_image,
    open_cache as _open_cache,
    open_cached_record_file as _open_cached_record_file,
    open_image_folder as _open_image_folder,
    open_image_folder_pipeline as _open_image_folder_pipeline,
    open_tar_shard_pipeline as _open_tar_shard_pipeline,
    open_tar_shards as _open_tar_shards,
    open_record_file as _open_record_file,
    launch_environment,
    open_token_windows as _open_token_windows,
    python_dataset as _python_dataset,
    python_iterable_dataset as _python_iterable_dataset,
    write_record_file as _write_record_file,
)
from ._pinwheel import (  # issue 22: samplers, mixtures, packing
    _Sampler,
    _mixture_offsets,
    _mixture_order,
    _mixture_quotas,
    _mixture_source_of,
    _packed_token_counts,
    class_balanced_sampler as _class_balanced_sampler,
    mixture_dataset as _mixture_dataset,
    open_packed_tokens as _open_packed_tokens,
    python_sampler as _python_sampler,
    weighted_random_sampler as _weighted_random_sampler,
)
from .errors import *  # noqa: F401,F403  (the exception classes)
from .errors import Error, FailedPreconditionError, InvalidArgumentError
from . import checkpoint as _checkpoint
from . import _batch
from ._arguments import checked_bool as _checked_bool
from ._arguments import checked_device as _checked_device
from ._arguments import checked_int as _checked_int
from ._arguments import checked_int_or_auto as _checked_int_or_auto
from ._arguments import refuse_dataloader_arguments as _refuse_dataloader_arguments
from ._arguments import stats_report_arguments as _stats_report_arguments
from .checkpoint import (
    CheckpointError,
    CheckpointMismatchError,
    CorruptCheckpointError,
    InvalidCheckpointError,
)

#: pinwheel's version, "MAJOR.MINOR.PATCH": the compiled library's own
#: (loader/version.h). Breaking changes and their migration: CHANGELOG.md.
__version__: str = build_info()["version"]

__all__ = [
    "ArrayDataset",
    "Batch",
    "Dataset",
    "ImageFolder",
    "Loader",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "NormalizeImage",
    "TarShards",
    "encode_jpeg",
    "expand_shards",
    "RecordFile",
    "TokenWindows",
    "write_record_file",
    "build_info",
    "cuda_backend_built",
    "cuda_device_count",
    "errors",
    "IterableDataset",
    "LaunchEnvironment",
    "launch_environment",
    "CheckpointError",
    "CheckpointMismatchError",
    "CorruptCheckpointError",
    "InvalidCheckpointError",
    "ClassBalancedSampler",
    "MixtureDataset",
    "PackedTokens",
    "Sampler",
    "WeightedRandomSampler",
] + errors.__all__

# (name, dtype, shape): dtype is pinwheel's short name ("u8", "i64", "f32",
# "bf16", ...) or anything numpy.dtype() accepts.
FieldSpec = Tuple[str, Any, Sequence[int]]

_NUMPY_NAMES = {
    "bool": "bool", "uint8": "u8", "int8": "i8", "uint16": "u16",
    "int16": "i16", "uint32": "u32", "int32": "i32", "uint64": "u64",
    "int64": "i64", "float16": "f16", "float32": "f32", "float64": "f64",
}
_SHORT_NAMES = set(_NUMPY_NAMES.values()) | {"bf16"}


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str) and dtype in _SHORT_NAMES:
        return dtype
    import numpy as np

    try:
        name = np.dtype(dtype).name
    except TypeError as e:
        raise InvalidArgumentError(f"dtype {dtype!r}: {e}") from None
    if name not in _NUMPY_NAMES:
        raise InvalidArgumentError(
            f"dtype {dtype!r} ({name}) is not supported: use one of "
            + ", ".join(sorted(_SHORT_NAMES)))
    return _NUMPY_NAMES[name]


def _fields(spec: Union[Mapping[str, Tuple[Any, Sequence[int]]], Sequence[FieldSpec]]):
    items = spec.items() if isinstance(spec, Mapping) else [(n, (d, s)) for n, d, s in spec]
    return [(str(n), _dtype_name(d), [int(x) for x in s]) for n, (d, s) in items]


class _DatasetBase:
    """What Loader accepts: a wrapped extension dataset."""

    _handle: _Dataset

    def __len__(self) -> int:
        return self._handle.size

    @property
    def fields(self) -> list:
        """Per-sample fields: (name, dtype, shape) tuples."""
        return self._handle.fields

    def __repr__(self) -> str:
        return repr(self._handle)


class RecordFile(_DatasetBase):
    """A pinwheel record file (see loader/record_file.h): a local path,
    memory-mapped, or a URL (``http://``, ``https://``, ``s3://bucket/key``)
    read by range requests, one per record (loader/storage/; S3's endpoint,
    region and credentials from the standard ``AWS_*`` variables and
    ``~/.aws`` files).

    ``cache_bytes``, ``cache_dir`` and ``cache_block_bytes`` put a cache
    under the file as :class:`TarShards` does; the Loader plans it with the
    records its sampler will read (shuffled or not) this epoch and the
    next. With a custom ``sampler`` the cache works without a plan.
    :meth:`cache_stats` as in :class:`TarShards`."""

    def __init__(self, path: Union[str, os.PathLike], *, cache_bytes: Optional[int] = None,
                 cache_dir: Optional[Union[str, os.PathLike]] = None,
                 cache_block_bytes: int = 8 << 20):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"RecordFile: path must be a str (a path or a URL) or "
                            f"os.PathLike, got {path!r} ({type(path).__name__})")
        self._cache = _cache_for("RecordFile", os.fspath(path), cache_bytes, cache_dir,
                                 cache_block_bytes)
        if self._cache is None:
            self._handle = _open_record_file(os.fspath(path))
        else:
            self._handle = _open_cached_record_file(os.fspath(path), self._cache)

    def cache_stats(self) -> Optional[Dict[str, Any]]:
        """The cache's counters (``cache_bytes``), or None without one (see
        :meth:`TarShards.cache_stats`)."""
        return None if self._cache is None else _cache_stats(self._cache)


class TokenWindows(_DatasetBase):
    """Language-model windows from a flat token file: sample i is a window of
    seq_len + 1 tokens at a position fixed by (seed, i); fields "input" and
    "target" (i64[seq_len]). window=True ships one field "tokens" instead,
    the seq_len + 1 tokens in the file's own dtype (u16 for 2-byte tokens:
    8x fewer bytes to copy); make input = tokens[:, :-1] and
    target = tokens[:, 1:] on the GPU and widen them there (.long())."""

    def __init__(self, path: Union[str, os.PathLike], seq_len: int, *,
                 token_bytes: int = 2, signed_tokens: bool = False,
                 windows: int = 0, seed: int = 0, window: bool = False):
        path, seq_len, token_bytes, signed_tokens, windows, seed, window = \
            _token_windows_arguments(path, seq_len, token_bytes, signed_tokens, windows, seed,
                                     window)
        self._handle = _open_token_windows(path, seq_len, token_bytes,
                                           signed_tokens, windows, seed, window)


def _token_windows_arguments(path: Any, seq_len: Any, token_bytes: Any, signed_tokens: Any,
                             windows: Any, seed: Any, window: Any) -> Tuple[Any, ...]:
    """TokenWindows' arguments checked as the Loader's are: a TypeError or
    InvalidArgumentError naming the argument and the rule, not nanobind's
    signature dump. (The extension checks the values it knows more of: the
    file, token_bytes in 1, 2, 4, 8, seq_len against the file.)"""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"TokenWindows: path must be a str or os.PathLike, got {path!r} "
                        f"({type(path).__name__})")

    def integer(name: str, value: Any, low: int, high: int) -> int:
        return _checked_int("TokenWindows", name, value, low, high)

    def boolean(name: str, value: Any) -> bool:
        return _checked_bool("TokenWindows", name, value)

    return (os.fspath(path), integer("seq_len", seq_len, 1, 2**63 - 1),
            integer("token_bytes", token_bytes, 1, 8), boolean("signed_tokens", signed_tokens),
            integer("windows", windows, 0, 2**63 - 1), integer("seed", seed, 0, 2**64 - 1),
            boolean("window", window))


class ArrayDataset(_DatasetBase):
    """Samples from in-memory arrays, one per field, all of the same length
    (the first dimension); read in place, no copy (a non-contiguous array is
    made contiguous once). The arrays are kept alive; do not resize them."""

    def __init__(self, arrays: Mapping[str, Any]):
        import numpy as np

        if not arrays:
            raise InvalidArgumentError("ArrayDataset needs at least one array")
        prepared = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
        sizes = {k: (a.shape[0] if a.ndim else None) for k, a in prepared.items()}
        size = next(iter(sizes.values()))
        if size is None or any(s != size for s in sizes.values()):
            raise InvalidArgumentError(
                f"ArrayDataset: every array needs the same first dimension; got {sizes}")
        fields = [(k, _dtype_name(a.dtype), list(a.shape[1:])) for k, a in prepared.items()]
        self._handle = _array_dataset(fields, size, list(prepared.values()))


class _SampleViews(dict):
    """What ``Dataset.read`` gets: field name -> numpy view of the slot.
    Replacing an entry would write nothing into the batch, so it raises."""

    __slots__ = ()

    def _refuse(self, key: Any = None, *unused: Any, **unused_kw: Any) -> None:
        name = f'"{key}"' if isinstance(key, str) else '"x"'
        raise TypeError(
            f"sample[{name}] = value in read() writes nothing into the batch: sample "
            f"maps each field to a numpy view of the batch's memory; write into the "
            f"view instead: sample[{name}][...] = value")

    __setitem__ = _refuse
    __delitem__ = _refuse
    setdefault = _refuse
    pop = _refuse

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._refuse(next(iter(dict(*args, **kwargs)), None))

    def popitem(self) -> Any:
        self._refuse()

    def clear(self) -> None:
        self._refuse()


class Dataset(_DatasetBase):
    """A map-style dataset in Python. Subclass it, pass the fields and size to
    ``__init__``, and write ``read(index, sample)``: ``sample`` maps each
    field name to a numpy array for that sample (shape and dtype as
    declared; bf16 as uint16). Fill every element in place
    (``sample["x"][...] = ...``): the arrays view a buffer of this call,
    copied into the pinned batch when ``read`` returns. Keeping an array
    (or a view of one) past the call is safe but pointless: it keeps that
    buffer and the values of its own sample, never shows a later sample,
    stays valid after ``close()``, and writing into it later changes no
    batch. ``sample["x"] = value`` would replace the view and write
    nothing: it raises TypeError (so do the other ways of changing
    ``sample``). Every view starts zeroed: a field ``read`` leaves
    unwritten is delivered as zeros, never another sample's values.
    ``read`` runs on the loader's worker threads, one at a time (it holds
    the GIL; numpy and file reads that release it overlap). An
    exception in ``read`` fails the batch (``on_error="stop"``) or skips the
    sample (``"skip"``); the loader raises the pinwheel error of its type
    (ValueError -> InvalidArgumentError, ...) naming the index, with your
    exception as ``__cause__``.

    Example::

        class Squares(pinwheel.Dataset):
            def __init__(self):
                super().__init__({"x": ("f32", (4,)), "y": ("i64", ())}, size=1000)
            def read(self, index, sample):
                sample["x"][:] = index
                sample["y"][...] = index * index
    """

    def __init__(self, fields: Union[Mapping[str, Tuple[Any, Sequence[int]]], Sequence[FieldSpec]],
                 size: int):
        # The extension holds this function, not self.read: a bound method
        # would make a cycle through C++ that the garbage collector cannot
        # see, and the dataset (and what it holds) would never be freed.
        ref = weakref.ref(self)

        def read(index: int, sample: Dict[str, Any]) -> None:
            dataset = ref()
            if dataset is None:
                raise RuntimeError("the pinwheel.Dataset was deleted while being read")
            dataset.read(index, _SampleViews(sample))

        self._handle = _python_dataset(_fields(fields), int(size), read)

    def read(self, index: int, sample: Dict[str, Any]) -> None:
        raise NotImplementedError("subclasses of pinwheel.Dataset define read(index, sample)")


class _ShardStream:
    """What the extension calls for one shard: the user's stream, with the
    sample views guarded as for Dataset.read; save_state / restore_state
    only where the user's stream has them."""

    __slots__ = ("_stream", "save_state", "restore_state", "__weakref__")

    def __init__(self, stream: Any):
        self._stream = stream
        if hasattr(stream, "save_state") and hasattr(stream, "restore_state"):
            self.save_state = stream.save_state
            self.restore_state = stream.restore_state

    def next(self, sample: Dict[str, Any]) -> Any:
        return self._stream.next(_SampleViews(sample))


class IterableDataset(_DatasetBase):
    """A dataset read as streams (shards) rather than by index: files read
    front to back, a generator, a database cursor. Subclass it, pass the
    fields to ``__init__``, and write ``open_shard(shard, num_shards,
    epoch)``: it returns a stream object for shard ``shard`` of
    ``num_shards`` (the loader uses world_size x max(1, num_workers)
    shards; together they must hold every sample exactly once) with

    - ``next(sample) -> bool``: write the next sample into the numpy views
      of ``sample`` (as ``Dataset.read`` does) and return True, or return
      False at the end of the shard;
    - optionally ``save_state() -> bytes`` and ``restore_state(state)``:
      the stream's position (a file offset, a counter) such that a fresh
      stream of the same shard and epoch, restored, continues with the very
      next sample. With both, ``Loader.state_dict()`` works: resume reopens
      each shard and restores it, so every shard continues exactly after
      its last delivered sample, the shards taking their turns as before:
      the same batches in the same order (needs the same world size, rank
      and num_workers). Without them
      ``state_dict()`` raises FailedPreconditionError.

    Each shard is read by one worker at a time; each batch holds samples of
    one shard (a shard's last batch may be short). Every call takes the GIL:
    Python streams run one call at a time whatever num_workers is (see the
    package README, "Python code and the GIL").

    Example::

        class Counter(pinwheel.IterableDataset):
            def __init__(self, n):
                super().__init__({"x": ("i64", ())})
                self.n = n
            def open_shard(self, shard, num_shards, epoch):
                return CounterStream(range(shard, self.n, num_shards))

        class CounterStream:
            def __init__(self, values):
                self.values, self.at = values, 0
            def next(self, sample):
                if self.at == len(self.values):
                    return False
                sample["x"][...] = self.values[self.at]
                self.at += 1
                return True
            def save_state(self):
                return self.at.to_bytes(8, "little")
            def restore_state(self, state):
                self.at = int.from_bytes(state, "little")
    """

    def __init__(self, fields: Union[Mapping[str, Tuple[Any, Sequence[int]]], Sequence[FieldSpec]]):
        ref = weakref.ref(self)  # no cycle through C++ (see Dataset)

        def open_shard(shard: int, num_shards: int, epoch: int) -> Any:
            dataset = ref()
            if dataset is None:
                raise RuntimeError("the pinwheel.IterableDataset was deleted while being read")
            stream = dataset.open_shard(shard, num_shards, epoch)
            if stream is None or not callable(getattr(stream, "next", None)):
                return stream  # the extension names the bad return value
            return _ShardStream(stream)

        self._handle = _python_iterable_dataset(_fields(fields), open_shard)

    def __len__(self) -> int:
        raise TypeError("a pinwheel.IterableDataset has no len(): it is read as streams")

    def open_shard(self, shard: int, num_shards: int, epoch: int) -> Any:
        raise NotImplementedError(
            "subclasses of pinwheel.IterableDataset define open_shard(shard, num_shards, epoch)")


# ImageNet's per-channel mean and std, in 0..255 units (torchvision's
# Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]) x 255).
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)


def _image_arguments(cls: str, train: Any, size: Any, resize_size: Any, scale: Any,
                     ratio: Any, flip_probability: Any) -> Tuple[Any, ...]:
    """The transform arguments of ImageFolder and TarShards, checked: a
    TypeError or InvalidArgumentError naming the argument and its rule. (The
    extension checks them again with the C++ rules,
    ValidateImageTransformOptions.)"""
    def integer(name: str, value: Any, low: int, high: int) -> int:
        return _checked_int(cls, name, value, low, high)

    def real_pair(name: str, value: Any) -> Tuple[float, float]:
        if (isinstance(value, (str, bytes)) or not isinstance(value, _abc.Sequence)
                or len(value) != 2 or not all(isinstance(v, numbers.Real)
                                              and not isinstance(v, bool) for v in value)):
            raise TypeError(f"{cls}: {name} must be a pair of numbers (low, high), got "
                            f"{value!r}")
        low, high = float(value[0]), float(value[1])
        if not (0 < low <= high) or high == float("inf"):
            raise InvalidArgumentError(f"{cls}: {name} = ({low}, {high}): must be finite "
                                       f"with 0 < low <= high")
        return low, high

    if not isinstance(train, (bool,)):
        import numpy as np

        if not isinstance(train, np.bool_):
            raise TypeError(f"{cls}: train must be a bool, got {train!r} "
                            f"({type(train).__name__})")
    size = integer("size", size, 1, 16384)
    if resize_size is None:
        resize_size = 0
    else:
        resize_size = integer("resize_size", resize_size, size, 16384)
    scale = real_pair("scale", scale)
    if scale[1] > 1:
        raise InvalidArgumentError(f"{cls}: scale = {scale}: the crop's area fraction must "
                                   f"be at most 1")
    ratio = real_pair("ratio", ratio)
    if isinstance(flip_probability, bool) or not isinstance(flip_probability, numbers.Real):
        raise TypeError(f"{cls}: flip_probability must be a number in 0..1, got "
                        f"{flip_probability!r} ({type(flip_probability).__name__})")
    flip_probability = float(flip_probability)
    if not 0 <= flip_probability <= 1:
        raise InvalidArgumentError(f"{cls}: flip_probability = {flip_probability}: must be "
                                   f"in 0..1")
    return (bool(train), size, resize_size, scale[0], scale[1], ratio[0], ratio[1],
            flip_probability)


_DECODES = ("cpu", "gpu", "auto")


def _decode_argument(cls: str, decode: Any) -> Optional[str]:
    """Checks an image dataset's ``decode`` argument: None or one of
    _DECODES."""
    if decode is None:
        return None
    if not isinstance(decode, str):
        raise TypeError(f"{cls}: decode must be \"cpu\", \"gpu\", \"auto\" or None, got "
                        f"{decode!r} ({type(decode).__name__})")
    if decode not in _DECODES:
        raise InvalidArgumentError(f"{cls}: decode = {decode!r}: must be \"cpu\", \"gpu\" "
                                   f"or \"auto\" (or None for uint8 HWC pixels)")
    return decode


class ImageFolder(_DatasetBase):
    """JPEGs in torchvision's ImageFolder layout, ``root/<class>/.../*.jpg``
    (classes sorted by name, numbered from 0; the file list built once,
    here), decoded and transformed by the loader's worker threads (C++,
    libjpeg-turbo, no GIL) straight into the pinned batch. Fields:
    ``"image"``, uint8 ``[size, size, 3]`` (RGB, HWC) and ``"label"``, int64.

    ``train=True``: torchvision's RandomResizedCrop(size, scale, ratio) and a
    horizontal flip (probability ``flip_probability``), drawn from each
    sample's own generator, a pure function of (the Loader's seed, epoch,
    index): the same batches with any num_workers and after a resume.
    ``train=False``: the eval transform, the shorter side resized to
    ``resize_size`` (None: ``size * 256 / 224``) then a center crop of
    ``size``.

    A file that is not a decodable JPEG fails its sample with an error
    naming the file (``Loader(on_error="skip")`` skips and counts it); a
    truncated one is refused whatever its crop. EXIF orientation is not
    applied: pixels come as stored, as torchvision's ``decode_jpeg`` gives
    them (rotate such files when preparing the data). Symbolic links: see
    ``ImageFolderDataset`` (loader/image/image_folder_dataset.h): a link to
    a directory is followed only inside its own class folder, once.
    Put the normalisation on the device stage with
    ``Loader(..., device_transform=pinwheel.NormalizeImage())`` to get
    bf16 ``[batch, 3, size, size]`` batches.

    ``decode`` chooses where the JPEGs are decoded, and the batches are then
    ``"image"`` bf16 ``[batch, 3, size, size]`` (normalised by ImageNet's
    mean and std) and ``"label"`` whichever path runs, so one loop serves
    both: ``"cpu"`` (the workers decode, NormalizeImage on the device
    stage), ``"gpu"`` (the workers read the file bytes and draw the crop,
    nvJPEG decodes, crops and normalises on the GPU: needs a CUDA device
    and a build with nvJPEG, else the Loader raises
    FailedPreconditionError saying why), ``"auto"`` (cpu where the GPU
    path cannot run; where both can, the faster as measured on the first
    file: the GPU's warm-up batch against one worker's decode times the
    Loader's num_workers; ``Loader.decode_report`` says which, why and
    both rates). The Loader
    builds the path for its device and batch_size (leave its
    device_transform unset). A sample's crop and flip are the same on both
    paths. None (default): uint8 HWC pixels as above.

    Example::

        data = pinwheel.ImageFolder("/data/imagenet/train", train=True, size=224)
        loader = pinwheel.Loader(data, batch_size=256, shuffle=True, num_workers=8,
                                 device_transform=pinwheel.NormalizeImage())
        # or, decoded on the GPU where there is one:
        data = pinwheel.ImageFolder("/data/imagenet/train", size=224, decode="auto")
        loader = pinwheel.Loader(data, batch_size=256, shuffle=True, num_workers=4)
    """

    def __init__(self, root: Union[str, os.PathLike], train: bool = True, size: int = 224, *,
                 resize_size: Optional[int] = None, scale: Tuple[float, float] = (0.08, 1.0),
                 ratio: Tuple[float, float] = (3 / 4, 4 / 3), flip_probability: float = 0.5,
                 decode: Optional[str] = None):
        if not isinstance(root, (str, os.PathLike)):
            raise TypeError(f"ImageFolder: root must be a str or os.PathLike, got {root!r} "
                            f"({type(root).__name__})")
        args = _image_arguments("ImageFolder", train, size, resize_size, scale, ratio,
                                flip_probability)
        self.decode = _decode_argument("ImageFolder", decode)
        self._handle = _open_image_folder(os.fspath(root), *args)
        self.root = os.fspath(root)
        self._pipeline_args = (self.root, *args)

    def _open_pipeline(self, device: str, batch_size: int, cpu_workers: int) -> Any:
        """The dataset and device transform of `decode` for a Loader; "auto"
        weighs the CPU path with `cpu_workers` workers (0: the CPUs this
        process may use, less one)."""
        return _open_image_folder_pipeline(*self._pipeline_args, self.decode, device,
                                           batch_size, cpu_workers)

    @property
    def classes(self) -> list:
        """The class folder names, sorted: a label indexes this list."""
        return _image_folder_classes(self._handle)


class TarShards(_DatasetBase):
    """JPEG samples in tar shards, the WebDataset convention (``<key>.jpg``
    next to ``<key>.cls``, the class as a decimal integer), read as an
    iterable dataset: the loader splits the shard files over ranks x
    workers (stream s reads files s, s + n, ...: give at least as many
    files as world_size x num_workers), each file front to back. Fields and
    transforms as :class:`ImageFolder`; a sample's crop and flip come from
    (``seed``, epoch, its place in its shard), so they are the same with any
    number of workers and after a resume (``Loader.state_dict()`` works,
    with the same world size and num_workers). A bad sample (a .jpg without
    .cls, a JPEG that does not decode) raises naming the shard and the
    member, or with ``skip_bad_samples=True`` is left out (the Loader's
    ``on_error`` does not reach inside a stream). ``len()`` is unknown.
    ``decode`` as in :class:`ImageFolder` (the gpu path starts without a
    warm-up image: its first batches may grow nvJPEG's buffers). A shard's
    batch is read by one worker, but with CPU decode every worker decodes
    its images, so ``prefetch`` need not match ``num_workers``.
    ``shuffle_shards=True`` reads the shard files in a new order every epoch,
    a function of (``seed``, epoch) and the same on every rank (each file
    still once an epoch; a sample's crop does not change with the order);
    without it the files are read in the order given.

    Shards may be local paths or URLs (``http://``, ``https://``,
    ``s3://bucket/key``; all of one kind), read in 8 MiB range requests
    with one read ahead per stream (loader/storage/; S3's endpoint, region
    and credentials from the standard ``AWS_*`` variables and ``~/.aws``
    files). ``shards`` may also be one pattern string,
    ``"s3://bucket/train/shard-{000000..000999}.tar"``, expanded as
    :func:`expand_shards` does.

    ``cache_bytes`` puts a cache of that many bytes under the shards
    (loader/storage/cache/): blocks of ``cache_block_bytes`` (8 MiB), in
    memory, or in ``cache_dir`` on a local disk (kept across restarts: a
    resumed job fetches only what the folder does not hold). The Loader
    tells it, at each epoch's start, which blocks this rank's streams will
    read in this epoch and the next, so it fetches ahead in that order and
    evicts the block needed furthest in the future (Belady's policy: with a
    cache smaller than the data, the fewest bytes any cache could fetch).
    :meth:`cache_stats` reports hits, bytes fetched (per epoch, and fetched
    again) and the time readers waited. One Loader at a time per TarShards
    when cached.

    Example::

        shards = sorted(glob.glob("/data/train-*.tar"))
        loader = pinwheel.Loader(pinwheel.TarShards(shards, size=224), batch_size=256,
                                 num_workers=8, device_transform=pinwheel.NormalizeImage())
    """

    def __init__(self, shards: Sequence[Union[str, os.PathLike]], train: bool = True,
                 size: int = 224, *, seed: int = 0, skip_bad_samples: bool = False,
                 resize_size: Optional[int] = None, scale: Tuple[float, float] = (0.08, 1.0),
                 ratio: Tuple[float, float] = (3 / 4, 4 / 3), flip_probability: float = 0.5,
                 decode: Optional[str] = None, shuffle_shards: bool = False,
                 cache_bytes: Optional[int] = None,
                 cache_dir: Optional[Union[str, os.PathLike]] = None,
                 cache_block_bytes: int = 8 << 20):
        if isinstance(shards, str) and "{" in shards:
            shards = expand_shards(shards)
        if isinstance(shards, (str, bytes, os.PathLike)) or not isinstance(shards, _abc.Sequence):
            raise TypeError(f"TarShards: shards must be a list of paths or URLs (str or "
                            f"os.PathLike) or one brace pattern "
                            f"('s3://b/shard-{{000..099}}.tar'), got {shards!r} "
                            f"({type(shards).__name__})")
        if not shards:
            raise InvalidArgumentError("TarShards: shards is empty: give at least one tar file")
        for i, path in enumerate(shards):
            if not isinstance(path, (str, os.PathLike)):
                raise TypeError(f"TarShards: shards[{i}] must be a str or os.PathLike, got "
                                f"{path!r} ({type(path).__name__})")
        seed = _checked_int("TarShards", "seed", seed, 0, 2**64 - 1)
        if not isinstance(skip_bad_samples, bool):
            raise TypeError(f"TarShards: skip_bad_samples must be a bool, got "
                            f"{skip_bad_samples!r} ({type(skip_bad_samples).__name__})")
        if not isinstance(shuffle_shards, bool):
            raise TypeError(f"TarShards: shuffle_shards must be a bool, got "
                            f"{shuffle_shards!r} ({type(shuffle_shards).__name__})")
        args = _image_arguments("TarShards", train, size, resize_size, scale, ratio,
                                flip_probability)
        self.decode = _decode_argument("TarShards", decode)
        paths = [os.fspath(p) for p in shards]
        self._cache = _cache_for("TarShards", paths[0], cache_bytes, cache_dir,
                                 cache_block_bytes)
        self._handle = _open_tar_shards(paths, *args, int(seed), skip_bad_samples,
                                        shuffle_shards, self._cache)
        self._pipeline_args = (paths, *args, int(seed), skip_bad_samples, shuffle_shards)

    def cache_stats(self) -> Optional[Dict[str, Any]]:
        """The cache's counters (``cache_bytes``), or None without one:
        ``hits``, ``misses``, ``hit_rate``, ``bytes_fetched`` (and
        ``bytes_fetched_by_epoch``, ``bytes_fetched_again`` within an
        epoch), ``reader_wait_s`` (the streams' time waiting on the store),
        ``prefetches``, ``evictions``, ``unplanned_reads``,
        ``peak_bytes``, ``warm_bytes`` (found in ``cache_dir`` at start)
        and the files dropped there as torn, foreign or stale."""
        return None if self._cache is None else _cache_stats(self._cache)

    def _open_pipeline(self, device: str, batch_size: int, cpu_workers: int) -> Any:
        """The dataset and device transform of `decode` for a Loader (tar
        shards have no file to weigh the paths on: `cpu_workers` is not
        used)."""
        del cpu_workers
        return _open_tar_shard_pipeline(*self._pipeline_args, self.decode, device, batch_size,
                                        self._cache)

    def __len__(self) -> int:
        raise TypeError("pinwheel.TarShards has no len(): it is read as streams")


def _cache_for(owner: str, url: str, cache_bytes: Any, cache_dir: Any,
               cache_block_bytes: Any) -> Any:
    """A dataset's cache (None without cache_bytes), its arguments checked
    and named after `owner`."""
    if cache_bytes is None:
        if cache_dir is not None:
            raise InvalidArgumentError(f"{owner}: cache_dir = {cache_dir!r} needs cache_bytes "
                                       f"(the cache's size in bytes)")
        return None
    cache_block_bytes = _checked_int(owner, "cache_block_bytes", cache_block_bytes, 4096)
    cache_bytes = _checked_int(owner, "cache_bytes", cache_bytes, 4096)
    if cache_bytes < cache_block_bytes:
        raise InvalidArgumentError(f"{owner}: cache_bytes = {cache_bytes} is smaller than one "
                                   f"block (cache_block_bytes = {cache_block_bytes})")
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"{owner}: cache_dir must be a str or os.PathLike, got "
                        f"{cache_dir!r} ({type(cache_dir).__name__})")
    return _open_cache(url, cache_bytes, cache_block_bytes,
                       "" if cache_dir is None else os.fspath(cache_dir))


class NormalizeImage:
    """The device stage's image normalisation, for ``Loader(...,
    device_transform=NormalizeImage())``: after each batch's copy, on the
    copy stream (the host backend: on the copy thread), the uint8 image
    field becomes ``dtype`` in CHW, ``(x - mean[c]) / std[c]`` per channel;
    the other fields are as read. So an ImageFolder batch arrives as
    ``"image"`` bf16 ``[batch, 3, size, size]`` and ``"label"`` int64, no
    host-side conversion. The values are computed as ``(x - mean) * (1 /
    std)`` in float32 and rounded to nearest even: the GPU and the host give
    the same bits. numpy has no bfloat16: ``output="numpy"`` shows bf16 as
    its bits, uint16 (``(a.astype(np.uint32) << 16).view(np.float32)``
    widens it).

    Arguments:
      mean, std: per channel, in the input's 0..255 units (default:
        ImageNet's, :data:`IMAGENET_MEAN` and :data:`IMAGENET_STD`); as many
        values as the image has channels; std > 0.
      dtype: "bf16" (default), "f16" or "f32" (also "bfloat16", "float16",
        "float32").
      field: the image field to read (default "image").
      input_layout: "HWC" (the image datasets') or "CHW".
      output_field: the output's name (default: the input's, replaced).
    """

    _DTYPES = {"bf16": "bf16", "bfloat16": "bf16", "f16": "f16", "float16": "f16",
               "f32": "f32", "float32": "f32"}

    def __init__(self, mean: Sequence[float] = IMAGENET_MEAN,
                 std: Sequence[float] = IMAGENET_STD, dtype: str = "bf16", *,
                 field: str = "image", input_layout: str = "HWC",
                 output_field: Optional[str] = None):
        def values(name: str, value: Any) -> list:
            if isinstance(value, (str, bytes)) or not isinstance(value, _abc.Iterable):
                raise TypeError(f"NormalizeImage: {name} must be a sequence of numbers (one a "
                                f"channel), got {value!r}")
            out = list(value)
            if not out or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                  for v in out):
                raise TypeError(f"NormalizeImage: {name} must be a non-empty sequence of "
                                f"numbers (one a channel), got {value!r}")
            return [float(v) for v in out]

        mean = values("mean", mean)
        std = values("std", std)
        if len(mean) != len(std):
            raise InvalidArgumentError(f"NormalizeImage: mean has {len(mean)} values and std "
                                       f"{len(std)}: one each a channel")
        if not all(s > 0 and s != float("inf") for s in std):
            raise InvalidArgumentError(f"NormalizeImage: std = {std}: every value must be "
                                       f"finite and > 0")
        if not isinstance(dtype, str) or dtype not in self._DTYPES:
            raise InvalidArgumentError(f"NormalizeImage: dtype = {dtype!r}: must be one of "
                                       f"'bf16', 'f16', 'f32' (or their numpy names)")
        for name, value in (("field", field), ("input_layout", input_layout)):
            if not isinstance(value, str):
                raise TypeError(f"NormalizeImage: {name} must be a str, got {value!r}")
        if input_layout not in ("HWC", "CHW"):
            raise InvalidArgumentError(f"NormalizeImage: input_layout = {input_layout!r}: "
                                       f"must be 'HWC' or 'CHW'")
        if output_field is not None and not isinstance(output_field, str):
            raise TypeError(f"NormalizeImage: output_field must be a str or None, got "
                            f"{output_field!r}")
        self.mean, self.std, self.dtype = tuple(mean), tuple(std), self._DTYPES[dtype]
        self.field, self.input_layout = field, input_layout
        self.output_field = output_field or field
        self._transform: _DeviceTransform = _normalize_image(
            mean, std, self.dtype, field, input_layout, output_field or "")

    def __repr__(self) -> str:
        return f"pinwheel.{self._transform!r}"


def encode_jpeg(pixels: Any, quality: int = 90) -> bytes:
    """Returns the JPEG (libjpeg-turbo, 4:2:0) of a uint8 ``(H, W, 3)`` RGB
    or ``(H, W)`` gray array: enough to write a test or sample image folder
    without PIL. ``quality`` in 1..100."""
    import numpy as np

    array = np.ascontiguousarray(pixels)
    if array.dtype != np.uint8:
        raise TypeError(f"encode_jpeg: pixels must be a uint8 array, got {array.dtype}")
    return _encode_jpeg(array, _checked_int("encode_jpeg", "quality", quality, 1, 100))


def expand_shards(pattern: str) -> List[str]:
    """Returns the shard list a brace pattern names, in order:
    ``"s3://b/shard-{000000..000099}.tar"`` gives the 100 URLs
    ``s3://b/shard-000000.tar`` ... ``shard-000099.tar`` (zero padding
    kept); ``"{train,val}-{0..1}.tar"`` gives four names, the left brace
    varying slowest. A bad pattern raises InvalidArgumentError naming it and
    the position."""
    if not isinstance(pattern, str):
        raise TypeError(f"expand_shards: pattern must be a str, got {pattern!r} "
                        f"({type(pattern).__name__})")
    return list(_expand_shard_pattern(pattern))


def write_record_file(path: Union[str, os.PathLike], arrays: Mapping[str, Any]) -> int:
    """Writes one record per row of the arrays (same first dimension) to a
    pinwheel record file; returns the number of records."""
    import numpy as np

    prepared = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    sizes = {k: a.shape[0] for k, a in prepared.items()}
    size = next(iter(sizes.values()), 0)
    if any(s != size for s in sizes.values()):
        raise InvalidArgumentError(f"write_record_file: first dimensions differ: {sizes}")
    fields = [(k, _dtype_name(a.dtype), list(a.shape[1:])) for k, a in prepared.items()]
    _write_record_file(os.fspath(path), fields, size, list(prepared.values()))
    return size


# Issue 22 item 5: custom samplers, mixtures of datasets and packed token
# rows (loader/index_sampler.h, loader/weighted_sampler.h,
# loader/mixture_dataset.h, loader/packed_token_dataset.h). The Loader's
# own options for them are sampler=, pad_last_batch=, valid_field= and
# on_error="replace".


def _checked_weights(owner: str, name: str, value: Any) -> list:
    """Returns `value` as a list of floats (finite, >= 0), or raises
    TypeError / InvalidArgumentError naming `name` (and the bad entry)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, _abc.Iterable):
        raise TypeError(f"{owner}: {name} must be a sequence of numbers, got {value!r} "
                        f"({type(value).__name__})")
    out = list(value)
    for k, w in enumerate(out):
        if isinstance(w, bool) or not isinstance(w, numbers.Real):
            raise TypeError(f"{owner}: {name}[{k}] must be a number, got {w!r} "
                            f"({type(w).__name__})")
        if not (0 <= float(w) < float("inf")):
            raise InvalidArgumentError(f"{owner}: {name}[{k}] = {float(w)}: must be finite "
                                       f"and >= 0")
    return [float(w) for w in out]


def _num_samples(owner: str, value: Any) -> int:
    return -1 if value is None else _checked_int(owner, "num_samples", value, 0, 2**63 - 1)


class _SamplerBase:
    """What Loader(sampler=) accepts: a custom data order. The dataset index
    at each global position of an epoch is a pure function of (the Loader's
    seed, epoch, position); the loader deals the positions over the ranks
    as it deals its own order, so ``state_dict()`` stays a few dozen bytes
    and resume is exact and elastic (another world size) as without one."""

    _handle: _Sampler

    def __len__(self) -> int:
        """Positions in every epoch's global order."""
        return self._handle.size

    @property
    def dataset_size(self) -> Optional[int]:
        """The size of the dataset the sampler was made for (None: any)."""
        n = self._handle.dataset_size
        return None if n < 0 else n

    def at(self, seed: int, epoch: int, position: int) -> int:
        """The dataset index at global ``position`` of ``epoch``'s order for
        ``seed`` (what the Loader reads there with ``seed=seed``)."""
        owner = type(self).__name__
        return self._handle.at(_checked_int(owner, "seed", seed, 0, 2**64 - 1),
                               _checked_int(owner, "epoch", epoch, 0, 2**63 - 1),
                               _checked_int(owner, "position", position, 0, 2**63 - 1))

    def __repr__(self) -> str:
        return f"pinwheel.{self._handle!r}"


class WeightedRandomSampler(_SamplerBase):
    """Draws index i with probability ``weights[i] / sum(weights)``, with
    replacement, ``num_samples`` draws an epoch (None: ``len(weights)``),
    like torch's WeightedRandomSampler, but each draw a pure function of
    (seed, epoch, position): exact and elastic resume keep working. O(1)
    per draw (an alias table built once). Weights: finite, >= 0, not all 0.

    Example::

        sampler = pinwheel.WeightedRandomSampler(weights, num_samples=100_000)
        loader = pinwheel.Loader(data, batch_size=64, sampler=sampler, seed=7)
    """

    def __init__(self, weights: Any, num_samples: Optional[int] = None):
        import numpy as np

        owner = "WeightedRandomSampler"
        try:
            array = np.ascontiguousarray(weights, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{owner}: weights must be a 1-D sequence of numbers: {e}") from None
        if array.ndim != 1:
            raise InvalidArgumentError(f"{owner}: weights has shape {array.shape}: must be 1-D "
                                       f"(one weight per dataset index)")
        self._handle = _weighted_random_sampler(array, _num_samples(owner, num_samples))


class ClassBalancedSampler(_SamplerBase):
    """Draws classes uniformly (each class present as often as any other, in
    expectation) and within a class its indices uniformly, with
    replacement: ``labels[i]`` is index i's class (ints >= 0).
    ``num_samples`` draws an epoch (None: ``len(labels)``)."""

    def __init__(self, labels: Any, num_samples: Optional[int] = None):
        import numpy as np

        owner = "ClassBalancedSampler"
        array = np.asarray(labels)
        if array.ndim != 1:
            raise InvalidArgumentError(f"{owner}: labels has shape {array.shape}: must be 1-D "
                                       f"(one class per dataset index)")
        if array.size and not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"{owner}: labels must be integers, got dtype {array.dtype}")
        self._handle = _class_balanced_sampler(np.ascontiguousarray(array, dtype=np.int64),
                                               _num_samples(owner, num_samples))


class Sampler(_SamplerBase):
    """A data order in Python. Subclass it, pass ``size`` (positions an
    epoch) and optionally ``dataset_size`` (checked against the dataset's)
    to ``__init__``, and write ``at(seed, epoch, position) -> int``: the
    dataset index at that global position.

    The contract that keeps resume exact and elastic: ``at`` is a pure
    function of its arguments (no state, no clock, no random module's
    global state: derive any randomness from ``seed`` and ``epoch``); the
    same call must give the same index on every rank, after a resume and
    with any num_workers. The loader cannot check it. An exception in
    ``at`` (or a result that is not an int) fails that batch with
    :class:`InternalError` carrying the exception's type and message, an
    index out of range with :class:`InvalidArgumentError`, both naming the
    epoch and the global position.

    Cost: the loader asks for blocks of up to 256 positions at once (one
    GIL acquisition each) through ``at_many(seed, epoch, positions)``,
    which calls ``at`` per position; override it with a vectorised version
    (returning a sequence of ints, e.g. ``numpy_array.tolist()``) for large
    epochs. It must agree with ``at``.

    Example::

        class EvensFirst(pinwheel.Sampler):
            def __init__(self, n):
                super().__init__(n, dataset_size=n)
                self.n = n
            def at(self, seed, epoch, position):
                half = (self.n + 1) // 2
                return 2 * position if position < half else 2 * (position - half) + 1
    """

    def __init__(self, size: int, dataset_size: Optional[int] = None):
        owner = type(self).__name__
        size = _checked_int(owner, "size", size, 0, 2**63 - 1)
        made_for = -1 if dataset_size is None else _checked_int(
            owner, "dataset_size", dataset_size, 0, 2**63 - 1)
        ref = weakref.ref(self)  # no cycle through C++ (see Dataset)

        def index_many(seed: int, epoch: int, positions: list) -> Any:
            sampler = ref()
            if sampler is None:
                raise RuntimeError("the pinwheel.Sampler was deleted while in use")
            return sampler.at_many(seed, epoch, positions)

        self._handle = _python_sampler(size, made_for, index_many)

    def at(self, seed: int, epoch: int, position: int) -> int:
        raise NotImplementedError("subclasses of pinwheel.Sampler define at(seed, epoch, position)")

    def at_many(self, seed: int, epoch: int, positions: Sequence[int]) -> Sequence[int]:
        """The indices at ``positions`` (a list of ints): ``at`` for each."""
        out = []
        for position in positions:
            index = self.at(seed, epoch, position)
            if isinstance(index, bool) or not isinstance(index, numbers.Integral):
                raise TypeError(f"{type(self).__name__}.at({seed}, {epoch}, {position}) returned "
                                f"{index!r}: it must return an int")
            out.append(int(index))
        return out


class MixtureDataset(_DatasetBase):
    """K map-style datasets of one layout read as one, mixed by weight. The
    dataset is their concatenation (source k's index i is
    ``offsets[k] + i``); a Loader reads it in its mixed order (the
    ``order`` sampler; the Loader's ``seed`` seeds it, leave
    ``shuffle=False``), so ``state_dict()`` stays a few dozen bytes and
    resume is exact and elastic. ``Loader.stats()["samples_per_source"]``
    counts the samples delivered per source.

    Arguments:
      sources: the datasets (RecordFile, TokenWindows, PackedTokens,
        ArrayDataset, Dataset subclasses, ...), the same fields each.
      weights: one per source, finite, >= 0, not all 0 (normalised).
      schedule: weight changes, a list of dicts ``{"first_epoch": e,
        "weights": [...]}`` (from epoch e on) or ``{"first_sample": s,
        "weights": [...]}`` (from global sample s = epoch *
        samples_per_epoch + position on: step t of a global batch G starts
        at t * G; its position in the epoch must be a multiple of
        ``window``), in increasing order, after sample 0.
      samples_per_epoch: positions in one epoch (None: the sum of the
        sources' sizes).
      window: positions per window; every whole window holds each source's
        share exactly (within one sample). For every N steps of W ranks
        with batch B to hold the shares, use N * B * W. 1..2**24.
      interleave: "stratified" (each source's samples spread evenly, the
        same pattern every window) or "random" (each window's slots in a
        seeded random order, the same exact shares).
      draw: "source_epochs" (each source read through, every sample once,
        then restarted, reshuffled unless shuffle_sources=False) or
        "with_replacement" (each draw uniform over the source).

    Example (two token corpora, 70/30)::

        web = pinwheel.TokenWindows("web.bin", seq_len=2048)
        code = pinwheel.TokenWindows("code.bin", seq_len=2048)
        mix = pinwheel.MixtureDataset([web, code], weights=[0.7, 0.3])
        loader = pinwheel.Loader(mix, batch_size=32, seed=7)
    """

    _INTERLEAVE = ("stratified", "random")
    _DRAW = ("source_epochs", "with_replacement")

    def __init__(self, sources: Sequence[_DatasetBase], weights: Sequence[float], *,
                 schedule: Sequence[Mapping[str, Any]] = (),
                 samples_per_epoch: Optional[int] = None, window: int = 1024,
                 interleave: str = "stratified", draw: str = "source_epochs",
                 shuffle_sources: bool = True):
        owner = "MixtureDataset"
        if isinstance(sources, (str, bytes)) or not isinstance(sources, _abc.Sequence):
            raise TypeError(f"{owner}: sources must be a list of pinwheel datasets, got "
                            f"{sources!r} ({type(sources).__name__})")
        if not sources:
            raise InvalidArgumentError(f"{owner}: sources is empty: give at least one dataset")
        for k, source in enumerate(sources):
            if not isinstance(source, _DatasetBase):
                raise TypeError(f"{owner}: sources[{k}] must be a pinwheel dataset, got "
                                f"{type(source).__name__}")
            if isinstance(source, IterableDataset) or source._handle.size < 0:
                raise InvalidArgumentError(
                    f"{owner}: sources[{k}] is an iterable dataset ({type(source).__name__}): "
                    f"a mixture needs map-style datasets (indexed)")
        weights = _checked_weights(owner, "weights", weights)
        if len(weights) != len(sources):
            raise InvalidArgumentError(f"{owner}: weights has {len(weights)} values for "
                                       f"{len(sources)} sources: one weight per source")
        if isinstance(schedule, (str, bytes, _abc.Mapping)) or not isinstance(
                schedule, _abc.Iterable):
            raise TypeError(f"{owner}: schedule must be a list of dicts, got {schedule!r}")
        phases = []
        for i, phase in enumerate(schedule):
            where = f"schedule[{i}]"
            if not isinstance(phase, _abc.Mapping):
                raise TypeError(f"{owner}: {where} must be a dict with 'first_epoch' or "
                                f"'first_sample' and 'weights', got {phase!r}")
            unknown = set(phase) - {"first_epoch", "first_sample", "weights"}
            if unknown:
                raise InvalidArgumentError(f"{owner}: {where} has unknown keys "
                                           f"{sorted(unknown)}: use 'first_epoch' or "
                                           f"'first_sample', and 'weights'")
            if ("first_epoch" in phase) == ("first_sample" in phase):
                raise InvalidArgumentError(f"{owner}: {where} needs exactly one of "
                                           f"'first_epoch' and 'first_sample'")
            if "weights" not in phase:
                raise InvalidArgumentError(f"{owner}: {where} has no 'weights'")
            phase_weights = _checked_weights(owner, f"{where}['weights']", phase["weights"])
            if len(phase_weights) != len(sources):
                raise InvalidArgumentError(
                    f"{owner}: {where}['weights'] has {len(phase_weights)} values for "
                    f"{len(sources)} sources: one weight per source")
            if "first_epoch" in phase:
                first = _checked_int(owner, f"{where}['first_epoch']", phase["first_epoch"],
                                     1, 2**63 - 1)
                phases.append((first, -1, phase_weights))
            else:
                first = _checked_int(owner, f"{where}['first_sample']", phase["first_sample"],
                                     1, 2**63 - 1)
                phases.append((1, first, phase_weights))
        samples_per_epoch = -1 if samples_per_epoch is None else _checked_int(
            owner, "samples_per_epoch", samples_per_epoch, 1, 2**63 - 1)
        window = _checked_int(owner, "window", window, 1, 2**24)
        for name, value, allowed in (("interleave", interleave, self._INTERLEAVE),
                                     ("draw", draw, self._DRAW)):
            if not isinstance(value, str) or value not in allowed:
                raise InvalidArgumentError(f"{owner}: {name} = {value!r}: must be one of "
                                           + ", ".join(repr(a) for a in allowed))
        shuffle_sources = _checked_bool(owner, "shuffle_sources", shuffle_sources)
        self._handle = _mixture_dataset([s._handle for s in sources], weights, phases,
                                        samples_per_epoch, window, interleave, draw,
                                        shuffle_sources)
        # The sources' Python objects stay alive with the mixture (a
        # pinwheel.Dataset's read() needs its object).
        self.sources = list(sources)
        self.weights = tuple(weights)
        self.order = _SamplerBase.__new__(_SamplerBase)
        self.order._handle = _mixture_order(self._handle)

    @property
    def offsets(self) -> list:
        """The first index of each source, then the total (K + 1 values)."""
        return _mixture_offsets(self._handle)

    def source_of(self, index: int) -> int:
        """The source (0..K-1) of concatenated index ``index``."""
        return _mixture_source_of(self._handle, _checked_int(
            "MixtureDataset", "index", index, 0, 2**63 - 1))

    def quotas(self, epoch: int = 0, position: int = 0) -> list:
        """Each source's exact share of a window at ``position`` of
        ``epoch`` (they sum to ``window``)."""
        return _mixture_quotas(self._handle,
                               _checked_int("MixtureDataset", "epoch", epoch, 0, 2**63 - 1),
                               _checked_int("MixtureDataset", "position", position, 0,
                                            2**63 - 1))


class PackedTokens(_DatasetBase):
    """Fixed rows of ``seq_len`` tokens packed from whole documents of a flat
    token file, for training without attention across documents. Documents
    end at each ``eos_id`` token (kept as the document's last token) or at
    the boundaries of ``offsets_path`` (little-endian u64 token offsets: 0,
    end of document 0, ..., the token count): give exactly one. Rows are
    filled greedily in file order; a document longer than ``seq_len`` is
    split into pieces of ``seq_len``. Sample i (row i, a pure function of
    i: the Loader's shuffle, checkpoint and elastic resume apply as to any
    dataset) has the fields

    - ``"input"`` i64[seq_len]: the tokens, ``pad_id`` in the padding;
    - ``"target"`` i64[seq_len]: each token's successor in its document,
      ``ignore_index`` at a document's last token and in the padding;
    - ``"position_ids"`` i64[seq_len]: 0, 1, ... restarting at every piece;
    - ``"document_ids"`` i64[seq_len]: the document's number in the file
      (with an offsets file, its entry: empty documents keep their number),
      -1 padding;
    - ``"cu_seqlens"`` i32[seq_len + 1]: piece boundaries in the row (0,
      end of the first piece, ...; then the filled length repeated), the
      fixed-shape form of flash-attention's varlen ``cu_seqlens``.

    Example::

        packed = pinwheel.PackedTokens("sft.bin", seq_len=2048, eos_id=50256)
        loader = pinwheel.Loader(packed, batch_size=8, shuffle=True, seed=7)
    """

    def __init__(self, path: Union[str, os.PathLike], seq_len: int, *,
                 eos_id: Optional[int] = None,
                 offsets_path: Optional[Union[str, os.PathLike]] = None,
                 token_bytes: int = 2, signed_tokens: bool = False, pad_id: int = 0,
                 ignore_index: int = -100):
        owner = "PackedTokens"
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"{owner}: path must be a str or os.PathLike, got {path!r} "
                            f"({type(path).__name__})")
        if (eos_id is None) == (offsets_path is None):
            raise InvalidArgumentError(f"{owner}: give exactly one of eos_id and offsets_path "
                                       f"(the document boundaries), got eos_id = {eos_id!r}, "
                                       f"offsets_path = {offsets_path!r}")
        if offsets_path is not None and not isinstance(offsets_path, (str, os.PathLike)):
            raise TypeError(f"{owner}: offsets_path must be a str or os.PathLike, got "
                            f"{offsets_path!r} ({type(offsets_path).__name__})")
        eos = -1 if eos_id is None else _checked_int(owner, "eos_id", eos_id, 0, 2**63 - 1)
        seq_len = _checked_int(owner, "seq_len", seq_len, 1, 2**30 - 1)
        if token_bytes not in (1, 2, 4, 8) or isinstance(token_bytes, bool):
            _checked_int(owner, "token_bytes", token_bytes, 1, 8)  # TypeError for a non-int
            raise InvalidArgumentError(f"{owner}: token_bytes = {token_bytes}: must be 1, 2, "
                                       f"4 or 8")
        self._handle = _open_packed_tokens(
            os.fspath(path), seq_len, int(token_bytes),
            _checked_bool(owner, "signed_tokens", signed_tokens), eos,
            "" if offsets_path is None else os.fspath(offsets_path),
            _checked_int(owner, "pad_id", pad_id, -2**63, 2**63 - 1),
            _checked_int(owner, "ignore_index", ignore_index, -2**63, 2**63 - 1))

    @property
    def tokens(self) -> int:
        """Tokens in the file."""
        return _packed_token_counts(self._handle)[0]

    @property
    def documents(self) -> int:
        """Documents that hold tokens (empty ones skipped, not counted)."""
        return _packed_token_counts(self._handle)[1]


def _torch() -> Any:
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    return torch


def _torch_hooks(torch: Any) -> Tuple[Callable, Callable]:
    """(stream_fn, convert_fn): torch's current raw CUDA stream of a device,
    and DLPack capsule -> tensor, through their fastest entry points."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        def raw(device: int) -> int:
            return torch.cuda.current_stream(device).cuda_stream
    convert = getattr(torch._C, "_from_dlpack", None) or torch.utils.dlpack.from_dlpack
    return raw, convert


def _timeout_argument(value: Any) -> Optional[float]:
    """Returns the timeout in seconds (None: forever), or raises TypeError;
    the extension checks that it is > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"Loader: timeout must be None or a number of seconds > 0, "
                        f"got {value!r} ({type(value).__name__})")
    return float(value)


def _str_argument(name: str, value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"Loader: {name} must be a str ({what}), got {value!r} "
                        f"({type(value).__name__})")
    return value


_INT32_MAX = 2**31 - 1
# Loader(device_buffers=None): the C++ default, one number for both.
_DEFAULT_DEVICE_BUFFERS: int = _default_device_buffers()


def _order_arguments(dataset: Any, sampler: Any, shuffle: bool, pad_last_batch: Any,
                     valid_field: Any) -> Dict[str, Any]:
    """The Loader's issue-22 arguments, checked (TypeError or
    InvalidArgumentError naming the argument), as _Loader's keywords."""
    if sampler is not None and not isinstance(sampler, _SamplerBase):
        raise TypeError(f"Loader: sampler must be a pinwheel sampler (WeightedRandomSampler, "
                        f"ClassBalancedSampler, a pinwheel.Sampler subclass, a "
                        f"MixtureDataset's order) or None, got {type(sampler).__name__}")
    if sampler is None and isinstance(dataset, MixtureDataset):
        if shuffle:
            raise InvalidArgumentError(
                "Loader: shuffle = True with a MixtureDataset: it is read in its mixed order, "
                "seeded with seed=; leave shuffle=False (or pass another sampler=)")
        sampler = dataset.order
    elif sampler is not None and shuffle:
        raise InvalidArgumentError(
            "Loader: sampler with shuffle = True: a custom sampler decides the order, seeded "
            "with seed=; leave shuffle=False")
    if not isinstance(valid_field, str):
        raise TypeError(f"Loader: valid_field must be a str, got {valid_field!r} "
                        f"({type(valid_field).__name__})")
    return {"sampler": None if sampler is None else sampler._handle,
            "pad_last_batch": _checked_bool("Loader", "pad_last_batch", pad_last_batch),
            "valid_field": valid_field}

_abc.Mapping.register(Batch)  # a read-only mapping of field name to view
# Unpacking a Batch raises, saying how (see pinwheel/_batch.py).
Batch.__iter__ = _batch.iterate

_live: "weakref.WeakSet[Loader]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    # Before the interpreter finalizes: a worker thread inside a Python
    # read() must not find the interpreter gone.
    for loader in list(_live):
        loader.close()


class Loader:
    """Batches of a dataset, read by worker threads into pinned memory and
    copied to the device. ``iter(loader)`` runs one epoch (the next epoch is
    already being read while you finish this one); ``len(loader)`` is the
    number of batches in an epoch.

    Arguments:
      dataset: RecordFile, TokenWindows, PackedTokens, MixtureDataset,
        ArrayDataset or a Dataset subclass.
      batch_size: samples per batch (>= 1).
      shuffle, seed: a new permutation every epoch, fixed by (seed, epoch).
      drop_last: drop each epoch's last short batch.
      num_workers: reader threads (0: read inside next(), on your thread),
        or "auto": sized while it runs to keep your step from waiting in
        next() with the fewest threads, up to one fewer than the CPUs this
        process may use; each change is a line on stderr and in
        stats()["auto_tune"] (see loader/README.md, "Auto-tuning").
      prefetch: pinned batch buffers (batches read ahead), or "auto": grown
        while the ring holds the readers back, up to 64 as the host memory
        admits, the pinned memory allocated as the depth first reaches it.
      auto_max_workers, auto_max_pinned_bytes: the bounds of "auto": the
        most reader threads (0: from the CPUs; more is said on stderr, as for
        num_workers) and the most pinned bytes (0: up to 64 buffers).
      keep_launcher_binding: under Open MPI's default binding of a rank to
        one core (``mpirun -np 2``), the reader threads run on this rank's
        share of the node instead, said once on stderr; True keeps them on
        the binding (loader/worker_cpus.h).
      device_buffers: device batch buffers (batches copied ahead or held by
        you; see the release rule in the package docstring). Default 2, the
        C++ ``LoaderOptions::device_buffers`` (read from the extension); with
        static_device_buffers, their count.
      device: "auto" (first GPU, else host), "cuda", "cuda:N", "cpu", or a
        ``torch.device``.
      on_error: "stop" (raise the read error), "skip" (leave the sample out
        and count it in stats()["samples_skipped"]) or "replace" (read
        another sample in its place, drawn from (seed, epoch, the failed
        index), up to 8 tries: the batch keeps its shape, its ``indices``
        name the replacement, ``stats()["samples_replaced"]`` counts them
        and ``stats()["last_replaced"]`` says why; map-style datasets).
      timeout: seconds to wait for one batch before DeadlineExceededError
        (a TimeoutError); None waits forever. Needs num_workers >= 1.
      output: "torch" (default when torch imports), "numpy" (host device
        only) or "dlpack" (objects with __dlpack__ / __dlpack_device__, for
        np.from_dlpack, torch.from_dlpack, ...).
      rank, world_size, drop_uneven_tail: distributed sharding.
      in_order: deliver batches in sampler order.
      pin_memory: page-locked host buffers (cuda device only).
      resume: a state dict from ``state_dict()`` (or its bytes): start where
        that loader stood, as ``load_state_dict`` does.
      worker_init: ``fn(worker)`` called on each worker thread before it
        first reads, with its worker number (0..max(num_workers, 1)-1);
        called from several threads (one at a time: it holds the GIL). An
        exception stops the loader: ``next()`` raises it, naming the worker.
      device_transform: a device-stage transform (:class:`NormalizeImage`)
        run on each batch after its copy, before you get it: the batch
        shows its output fields (e.g. ``"image"`` bf16 CHW) and the fields
        it does not consume. None: the fields as read. Leave it unset for
        an image dataset opened with ``decode=``: the Loader builds that
        path's transform for its device and batch_size (``decode_report``
        says which path runs and why; ``gpu_decode`` whether it is nvJPEG's).
      distributed: ``"launcher"`` takes rank and world size from the job
        launcher's variables (torchrun, Open MPI, MPICH/PMI, Slurm; see
        :func:`launch_environment`), and with ``device="auto"`` the device
        of LOCAL_RANK; leave rank and world_size unset then.
      sampler: a custom order (:class:`WeightedRandomSampler`,
        :class:`ClassBalancedSampler`, a :class:`Sampler` subclass, or a
        :class:`MixtureDataset`'s ``order``), seeded with ``seed``; needs
        ``shuffle=False``. A MixtureDataset is read in its own order
        without one. Checkpoints stay exact and elastic.
      pad_last_batch: every batch ``batch_size`` samples: a short one (an
        epoch's last, or one that lost samples to ``on_error="skip"``) is
        filled with zeroed padding samples (index -1), and a uint8 field
        ``valid_field`` (1 real, 0 padding) is added to every batch;
        ``batch.padded`` counts the padding, ``stats()["samples_padded"]``
        all of it. Fixed shapes for compiled models and CUDA graphs.
      valid_field: the name of that mask field (not a dataset field's).
      static_device_buffers: 2..64 buffers you own (CUDA torch tensors on a
        GPU, numpy arrays or CPU tensors on the host; C-contiguous, 256-byte
        aligned, each at least :func:`static_buffer_bytes` bytes): every
        batch lands in one of them, so its fields have the same addresses
        every time (a captured CUDA graph reads fixed addresses);
        ``batch.buffer_index`` says which. A buffer is reused only after its
        batch was released and the stream it was handed over on passed the
        release, as with the loader's own buffers. Keep them alive while
        the loader or its batches are used. A bad one raises
        InvalidArgumentError naming ``static_device_buffers[i]`` (or "static
        device buffer i"); one another loader (or a batch of it) still uses
        FailedPreconditionError. ``load_state_dict()`` closes this loader
        before it builds the new one over the same buffers.
      gather: ``"off"`` (default), ``"auto"`` or ``"on"``: the gather path
        (C++ ``LoaderOptions::gather``) for ArrayDataset, RecordFile and
        TokenWindows: no worker reads samples; the device (on the host
        backend, the copy thread) gathers the rows from the dataset's
        memory, registered once, computing each batch's order itself (with
        a custom sampler, one key a sample is uploaded instead). Give it 4
        or more ``device_buffers`` beside a compute step: they are its
        read-ahead. The batches are the same bytes as the worker path's. ``"auto"`` falls
        back to the worker path when it cannot be used, ``"on"`` raises
        FailedPreconditionError saying why; ``stats()["gather"]`` and
        ``stats()["gather_fallback"]`` say which path runs and why. It
        cannot be used with ``pad_last_batch`` (the gather does not pad
        short batches), a ``device_transform`` or ``on_error="replace"``:
        ``"on"`` refuses them, ``"auto"`` falls back. Arrays
        under 32 MiB are gathered from a copy taken when the loader is built
        (registering them in place would pin their heap neighbours): values
        written into them afterwards are not seen.
      stats_every, stats_every_batches: a stats report every this many
        seconds and/or delivered batches (C++ ``LoaderOptions::stats_report``),
        plus a last one when the loader closes: ``stats_json()`` with
        ``unix_time_s``, ``report`` (1, 2, ...), ``reports_dropped`` and
        ``final`` in front. Made on a thread of the loader's, never in
        ``next()``; a report is due while the consumer is away too.
      stats_callback: ``fn(report)`` called with each report as a dict (on
        the loader's report thread, holding the GIL). An exception stops
        the reports (training goes on); ``stats_report_error()`` says why.
      stats_path: a JSON Lines file each report is appended to, one line
        written whole by one write (readers never see half a line; several
        ranks may share one file). Needs stats_every or stats_every_batches.

    Checkpoints (resuming a training job)::

        state = {"model": model.state_dict(), "loader": loader.state_dict()}
        torch.save(state, path)
        ...
        loader = pinwheel.Loader(data, batch_size=256, shuffle=True, seed=7,
                                 resume=torch.load(path)["loader"])

    ``state_dict()``, taken between batches once the batches delivered so
    far are used, holds where the loader stands in its data order (epoch
    and position): a few dozen bytes whatever the dataset size. A loader
    resumed from it (``resume=`` or ``load_state_dict``) delivers next the
    batch this one would have: every remaining sample of the epoch exactly
    once, in the same order and batches as without the interruption when
    world size and batch size are the same, whatever num_workers, prefetch,
    device_buffers or device (batches read ahead but not delivered are read
    again). Elastic: a checkpoint of one rank of W resumes the whole job on
    W' ranks (each rank passes the same state); the rest of the epoch is
    dealt over the W' ranks, later epochs are the new world's. A checkpoint
    of another data order is refused: :class:`CheckpointMismatchError`
    (another dataset size, shuffle or seed; ``.field`` names it), damaged
    bytes :class:`CorruptCheckpointError`, anything else
    :class:`InvalidCheckpointError`. Needs ``in_order=True``.

    A number or flag of the wrong type (``batch_size=2.5``, ``shuffle="yes"``)
    raises TypeError, one out of range (``seed=-1``, ``batch_size=0``)
    InvalidArgumentError (a ValueError); both name the argument and its rule.
    numpy integers, floats and bools are accepted.

    Coming from ``torch.utils.data.DataLoader``: batch_size, shuffle,
    sampler, num_workers, pin_memory, drop_last, timeout and in_order keep
    their names; prefetch_factor, worker_init_fn, collate_fn,
    persistent_workers, batch_sampler, generator, multiprocessing_context and
    pin_memory_device raise TypeError naming pinwheel's equivalent
    (``prefetch=``, ``worker_init=``, ...). A batch is a mapping of field
    name to tensor, so ``for x, y in loader`` would bind the field names: it
    raises TypeError saying to write ``for batch in loader: x, y =
    batch.values()`` (field order) or ``batch["x"]``.
    """

    def __init__(self, dataset: _DatasetBase, batch_size: int = 1, *, shuffle: bool = False,
                 seed: int = 0, drop_last: bool = False, num_workers: Union[int, str] = 0,
                 prefetch: Union[int, str] = 4, device_buffers: Optional[int] = None, device: Union[str, Any] = "auto",
                 on_error: str = "stop", timeout: Optional[float] = None,
                 output: Optional[str] = None, rank: int = 0, world_size: int = 1,
                 drop_uneven_tail: bool = False, in_order: bool = True,
                 pin_memory: bool = True, resume: Any = None,
                 worker_init: Optional[Callable[[int], Any]] = None,
                 distributed: Optional[str] = None,
                 device_transform: Optional["NormalizeImage"] = None,
                 sampler: Optional[_SamplerBase] = None, pad_last_batch: bool = False,
                 valid_field: str = "valid",
                 static_device_buffers: Optional[Sequence[Any]] = None,
                 gather: str = "off", stats_every: Optional[float] = None,
                 stats_every_batches: int = 0,
                 stats_callback: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 stats_path: Optional[Union[str, os.PathLike]] = None,
                 auto_max_workers: int = 0, auto_max_pinned_bytes: int = 0,
                 keep_launcher_binding: bool = False,
                 **dataloader_arguments: Any):
        _refuse_dataloader_arguments("Loader", dataloader_arguments)
        if not isinstance(dataset, _DatasetBase):
            raise InvalidArgumentError(
                f"dataset: expected a pinwheel dataset (RecordFile, TokenWindows, "
                f"ArrayDataset, ImageFolder, TarShards or a pinwheel.Dataset subclass), got {type(dataset).__name__}")
        # Types (and what the extension's C types hold) are checked here,
        # the rules again by LoaderBuilder; the ranges match loader_builder.cc.
        batch_size = _checked_int("Loader", "batch_size", batch_size, 1)
        shuffle = _checked_bool("Loader", "shuffle", shuffle)
        seed = _checked_int("Loader", "seed", seed, 0, 2**64 - 1)
        drop_last = _checked_bool("Loader", "drop_last", drop_last)
        num_workers = _checked_int_or_auto("Loader", "num_workers", num_workers, 0, 256)
        prefetch = _checked_int_or_auto("Loader", "prefetch", prefetch, 1, 1024)
        self._static_buffers = _static_buffers_argument(static_device_buffers)
        if device_buffers is None:
            device_buffers = (_DEFAULT_DEVICE_BUFFERS if self._static_buffers is None
                              else len(self._static_buffers))
        device_buffers = _checked_int("Loader", "device_buffers", device_buffers, 1, 64)
        device = _checked_device("Loader", device, '"auto", "cuda", "cuda:N" or "cpu"')
        on_error = _str_argument("on_error", on_error, '"stop", "skip" or "replace"')
        self._gather = _str_argument("gather", gather, '"auto", "on" or "off"')
        self._auto_args = {
            "auto_max_workers": _checked_int("Loader", "auto_max_workers", auto_max_workers,
                                             0, 256),
            "auto_max_pinned_bytes": _checked_int("Loader", "auto_max_pinned_bytes",
                                                  auto_max_pinned_bytes, 0),
            "keep_launcher_binding": _checked_bool("Loader", "keep_launcher_binding",
                                                   keep_launcher_binding)}
        timeout = _timeout_argument(timeout)
        if output is not None:
            output = _str_argument("output", output, '"torch", "numpy", "dlpack" or None')
        if distributed is not None:
            if distributed != "launcher":
                raise InvalidArgumentError(
                    f"Loader: distributed = {distributed!r}: must be None or \"launcher\"")
            if rank != 0 or world_size != 1:
                raise InvalidArgumentError(
                    f"Loader: distributed=\"launcher\" with rank = {rank!r}, world_size = "
                    f"{world_size!r}: the launcher's variables set them; leave them unset")
            env = launch_environment()  # InvalidArgumentError naming the variable
            rank, world_size = env.rank, env.world_size
            if device == "auto":
                device = env.local_device()
            self.launch_environment: Optional[LaunchEnvironment] = env
        else:
            self.launch_environment = None
        if worker_init is not None and not callable(worker_init):
            raise TypeError(f"Loader: worker_init must be callable (or None), got "
                            f"{worker_init!r} ({type(worker_init).__name__})")
        if device_transform is not None and not isinstance(device_transform, NormalizeImage):
            raise TypeError(f"Loader: device_transform must be a pinwheel.NormalizeImage (or "
                            f"None), got {device_transform!r} "
                            f"({type(device_transform).__name__})")
        self._device_transform = (None if device_transform is None
                                  else device_transform._transform)
        handle = dataset._handle
        self.decode_report: Optional[str] = None
        self.gpu_decode = False
        if getattr(dataset, "decode", None) is not None:
            if device_transform is not None:
                raise InvalidArgumentError(
                    f"Loader: device_transform = {device_transform!r} with a dataset opened "
                    f"with decode = {dataset.decode!r}: the decode path brings its own "
                    f"transform (NormalizeImage on cpu, nvJPEG on gpu); leave "
                    f"device_transform unset")
            # decode="auto" weighs the CPU path with this loader's readers
            # when they are a count (0 workers: one, the caller's thread),
            # else ("auto") with the CPUs this process may use.
            cpu_workers = (max(1, num_workers) if isinstance(num_workers, int)
                           and not isinstance(num_workers, bool) and num_workers >= 0 else 0)
            pipeline = dataset._open_pipeline(device, batch_size, cpu_workers)
            handle = pipeline.dataset
            self._device_transform = pipeline.transform
            self.decode_report = pipeline.decode_report
            self.gpu_decode = pipeline.gpu_decode
        resume_bytes = None if resume is None else _checkpoint.checkpoint_bytes(resume)
        world_size = _checked_int("Loader", "world_size", world_size, 1, limit=_INT32_MAX)
        rank = _checked_int("Loader", "rank", rank, 0, limit=_INT32_MAX)  # < world_size: LoaderBuilder
        drop_uneven_tail = _checked_bool("Loader", "drop_uneven_tail", drop_uneven_tail)
        in_order = _checked_bool("Loader", "in_order", in_order)
        pin_memory = _checked_bool("Loader", "pin_memory", pin_memory)
        torch = _torch() if output in (None, "torch") else None
        if output is None:
            output = "torch" if torch is not None else "numpy"
            if torch is None and device != "cpu" and cuda_device_count() > 0:
                output = "dlpack"
        if output == "torch" and torch is None:
            raise InvalidArgumentError("output='torch' but torch cannot be imported")
        stream_fn = convert_fn = None
        if output == "torch":
            stream_fn, convert_fn = _torch_hooks(torch)
        self._dataset = dataset
        self._core_args = (handle, batch_size, shuffle, seed, drop_last, num_workers,
                           prefetch, device_buffers, device, on_error, timeout, in_order, rank,
                           world_size, drop_uneven_tail, pin_memory, output, stream_fn,
                           convert_fn)
        self._worker_init = worker_init
        self._stats_args = _stats_report_arguments(stats_every, stats_every_batches,
                                                   stats_callback, stats_path)
        self._order_args = _order_arguments(dataset, sampler, shuffle, pad_last_batch,
                                            valid_field)
        self._sampler = sampler  # a pinwheel.Sampler's at() needs its object
        self._core = self._make_core(resume_bytes)
        self.output = output
        # The Batch __iter__ yielded last (see __iter__).
        self._yielded: Optional[weakref.ReferenceType] = None
        _live.add(self)

    def _make_core(self, resume: Optional[bytes]) -> _Loader:
        try:
            return _Loader(*self._core_args, resume=resume, worker_init=self._worker_init,
                           device_transform=self._device_transform,
                           static_device_buffers=self._static_buffers,
                           gather=self._gather, **self._stats_args, **self._auto_args,
                           **self._order_args)
        except InvalidArgumentError as e:
            raise _checkpoint.refusal(e) from None

    def state_dict(self) -> Dict[str, Any]:
        """Returns where this loader stands, as a dict ``torch.save`` (or
        pickle) stores: ``{"pinwheel_checkpoint": bytes, "version": 1, ...}``.
        Take it between batches, after the batches delivered so far are used
        (a training step's checkpoint): a loader resumed from it
        (``Loader(..., resume=state)`` or ``load_state_dict(state)``)
        delivers next the batch the next ``next()`` here would have. O(1):
        a few dozen bytes, whatever the dataset size or num_workers. Raises
        FailedPreconditionError with ``in_order=False``, or for an
        IterableDataset whose streams lack save_state()/restore_state()."""
        return _checkpoint.to_state_dict(self._core._checkpoint())

    def load_state_dict(self, state: Any) -> None:
        """Continues from ``state`` (from ``state_dict()``, of this job or of
        a job with another world size): the loader is rebuilt (threads and
        buffers anew; batches and tensors still held stay valid) and the
        next batch is the one the checkpointed loader would have delivered.
        Refusals (this loader keeps running as before):
        :class:`CheckpointMismatchError` naming the field for another data
        order (dataset size, shuffle, seed), :class:`CorruptCheckpointError`
        for damaged bytes, :class:`InvalidCheckpointError` for anything
        else. Call it before iterating (or between epochs): a ``for batch in
        loader`` loop already running on the old loader raises
        :class:`CancelledError` at its next batch."""
        resume = _checkpoint.checkpoint_bytes(state)
        if self._core._busy:
            raise FailedPreconditionError(
                "load_state_dict() while next() runs on another thread: a Loader has one consumer")
        if self._static_buffers is not None:
            # One loader at a time over your buffers: the old one goes first
            # (a refusal then leaves this loader closed), and batches of it
            # you still hold make the new one raise FailedPreconditionError.
            self._core.close()
            self._yielded = None
            self._core = self._make_core(resume)
            return
        core = self._make_core(resume)  # refused: the old core runs on
        old, self._core = self._core, core
        self._yielded = None
        old.close()

    def __iter__(self) -> Iterator[Batch]:
        """Batches until the end of the current epoch. Every iter() goes on
        where the last one stopped (after a break: the rest of that epoch);
        start_epoch() starts one afresh.

        The iterator releases the Batch it yielded last when the next batch
        needs its device buffer (every one of ``device_buffers`` is held),
        like the C++ range, so ``for batch in loader`` runs with
        ``device_buffers=1``. What you keep is what you took out of a batch:
        its arrays, tensors or capsules stay valid while you hold them (and
        hold the buffer: with none left, the next batch raises
        :class:`FailedPreconditionError`). A Batch object kept past the next
        batch (``batches.append(batch)``) stays usable while buffers are
        free; once the iterator has released it, ``batch["x"]`` raises
        :class:`FailedPreconditionError` (``batch.released`` says so). Take
        the views (or ``to_dict()``) of batches you keep. ``next()`` never
        releases anything."""
        core = self._core
        while True:
            try:
                batch = core.next()
            except FailedPreconditionError as e:
                # Every device buffer is held: give back the one the batch
                # yielded last holds (unless views taken from it hold it
                # too) and ask again; any other failure, or a second one,
                # is the caller's. The batch may be from an earlier iter():
                # the loop variable of the last epoch still holds it.
                previous = self._yielded() if self._yielded is not None else None
                self._yielded = None
                if previous is None or previous.released or "device buffers" not in str(e):
                    raise
                previous.release()
                del previous
                batch = core.next()
            if batch is None:
                return
            # Weakly: a Batch the caller dropped must not be kept alive.
            self._yielded = weakref.ref(batch)
            yield batch
            del batch  # the caller holds it, or it is gone

    def next(self) -> Optional[Batch]:
        """The next batch of the current epoch, or None at its end (the next
        call starts the following epoch)."""
        return self._core.next()

    def __len__(self) -> int:
        n = self._core.batches_per_epoch
        if n < 0:  # an IterableDataset: unknown until read
            raise TypeError("len(loader) of an IterableDataset is unknown: its epochs end "
                            "when the shards do")
        return n

    def start_epoch(self, epoch: int) -> None:
        """Makes ``epoch`` the next one read (the rest of the current one is
        dropped)."""
        self._core.start_epoch(epoch)

    @property
    def epoch(self) -> int:
        return self._core.epoch

    @property
    def device(self) -> str:
        """"host" or "cuda:N"."""
        return self._core.device

    @property
    def fields(self) -> list:
        """Batch fields: (name, dtype, [batch_size, ...shape])."""
        return self._core.fields

    def stats(self) -> Dict[str, Any]:
        """Counters: batches/samples/bytes delivered, samples skipped, epochs
        completed, time waited in next(), pinned and device bytes; padding
        samples delivered (``samples_padded``), samples replaced
        (``samples_replaced``, the last cause in ``last_replaced``), and
        with a sampler that names sources (a MixtureDataset's) the samples
        delivered per source (``samples_per_source``, else []); whether the
        gather path runs ("gather"), why not ("gather_fallback") and the host
        bytes it registered ("gather_registered_bytes"), and whether the
        gather computes the order and keys on the device
        ("gather_order_on_device"); the CPUs this process may keep busy
        ("cpus": its affinity mask, "cpu_affinity", lowered to its cgroup
        CPU quota rounded up, "cpu_quota", 0 for none, and divided among
        the launcher's ranks on this node that share them,
        "cpu_shared_by"), what limits them ("cpu_limited_by": "affinity
        mask", "cgroup quota", "machine", or "rank's share" where the reader
        threads left Open MPI's one-core binding for the CPUs in
        "cpu_worker_cpus", else ""),
        all of it in one line ("cpu_budget"), the reader threads started
        ("num_workers"), and, when they exceed "cpus", the line written to
        stderr when the loader was made, with the launcher's fix
        ("cpu_warning", else ""); per-stage latencies in seconds
        ("latency": for each of "slot_wait", "read", "copy", "ready_wait",
        "consumer_wait", "data_wait" (the part of consumer_wait that is
        the data's, without the wait behind device buffers the
        consumer's own GPU work holds) and "step", a "total" since the
        loader was made
        and a "recent" over the last 1024 batches, each with "count",
        "p50_s", "p90_s", "p99_s", "max_s", "mean_s", "sum_s"), and the
        stall verdict ("verdict", one line naming the bound stage and the
        action; "verdict_stage": "reads", "copy", "consumer" or
        "unknown"). See loader/telemetry/ in the C++ library. With
        num_workers or prefetch "auto": "auto_tune" ("workers_auto",
        "prefetch_auto", the values now, "workers" and "prefetch", their
        bounds "max_workers" and "max_prefetch", "changes", the batch of the
        last change "last_change_batch" and its line "last_reason";
        "off_reason" says why nothing is tuned, on the gather path), and
        "pinned_bytes_peak", the most pinned bytes held."""
        return self._core.stats()

    def verdict(self) -> str:
        """One line naming the stage that bounds this loader ("reads",
        "copy", or "consumer" when the loader keeps up) and what to do,
        e.g. "reads: p50 8.49 ms a batch of 4 samples over 1 worker = 8.49
        ms a batch against a 5.12 ms step (Next() waits 41 % of the time):
        loader-bound; 2 workers would keep up, 16 CPUs allowed"."""
        return self._core.stats()["verdict"]

    def stats_json(self) -> str:
        """stats() as one JSON object on one line (counters, CPU budget,
        per-stage latencies, verdict), for a log line or a file."""
        return self._core.stats_json()

    def stats_report_error(self) -> Optional[str]:
        """None, or why the periodic stats reports (``stats_every=``,
        ``stats_every_batches=``) stopped: the exception ``stats_callback``
        raised, or the failed write to ``stats_path``. Training goes on
        either way."""
        return self._core.stats_report_error()

    def stats_prometheus(self, labels: Optional[Dict[str, str]] = None) -> str:
        """stats() in the Prometheus text exposition format: a summary
        pinwheel_stage_latency_seconds{stage=...,quantile=...} per stage,
        counters and gauges; ``labels`` (e.g. {"rank": "0"}) are added to
        every sample (ValueError naming a label name Prometheus does not
        take)."""
        if labels is None:
            labels = {}
        if not isinstance(labels, dict) or not all(
                isinstance(k, str) and isinstance(v, str)
                for k, v in labels.items()):
            raise TypeError(
                f"stats_prometheus(): labels must be a dict of str to str, "
                f"got {labels!r}")
        return self._core.stats_prometheus(sorted(labels.items()))

    def close(self) -> None:
        """Stops reading and copying and joins every thread. Idempotent.
        Batches and tensors still held stay valid."""
        self._core.close()

    @property
    def closed(self) -> bool:
        return self._core.closed

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"epoch {self.epoch}, {self._core.batches_per_epoch} batches an epoch"
        return f"<pinwheel.Loader on {self.device if not self.closed else '?'}, {state}>"


# Static device buffers (LoaderOptions::static_device_buffers): the
# caller's own memory, so that batches land at fixed addresses.
from ._pinwheel import _static_buffer_bytes  # noqa: E402

__all__ += ["static_buffer_bytes"]


def static_buffer_bytes(dataset: _DatasetBase, batch_size: int, *,
                        device_transform: Optional["NormalizeImage"] = None,
                        pad_last_batch: bool = False, valid_field: str = "valid") -> int:
    """The bytes each of ``Loader(static_device_buffers=...)``'s buffers must
    hold at least, for ``dataset`` in batches of ``batch_size`` (with the
    same ``device_transform`` and ``pad_last_batch`` as the loader): one
    batch in the loader's layout (with a device transform, the copied batch
    and then its output).

    Example (a CUDA graph per buffer)::

        n = pinwheel.static_buffer_bytes(data, 64)
        bufs = [torch.empty(n, dtype=torch.uint8, device="cuda") for _ in range(3)]
        loader = pinwheel.Loader(data, 64, static_device_buffers=bufs)
        for batch in loader:
            graphs[batch.buffer_index].replay()
    """
    if not isinstance(dataset, _DatasetBase):
        raise InvalidArgumentError(
            f"dataset: expected a pinwheel dataset, got {type(dataset).__name__}")
    batch_size = _checked_int("Loader", "batch_size", batch_size, 1)
    pad_last_batch = _checked_bool("Loader", "pad_last_batch", pad_last_batch)
    valid_field = _str_argument("valid_field", valid_field, "a field name")
    if device_transform is not None and not isinstance(device_transform, NormalizeImage):
        raise TypeError(f"static_buffer_bytes: device_transform must be a "
                        f"pinwheel.NormalizeImage (or None), got {type(device_transform).__name__}")
    transform = None if device_transform is None else device_transform._transform
    return _static_buffer_bytes(dataset._handle, batch_size, transform, pad_last_batch,
                                valid_field)


def _static_buffers_argument(buffers: Any) -> Optional[list]:
    """``static_device_buffers`` as a list (kept by the Loader: the memory
    must outlive it), or None; the count checked here, each buffer by the
    extension and LoaderBuilder."""
    if buffers is None:
        return None
    if isinstance(buffers, (str, bytes)) or not isinstance(buffers, _abc.Sequence):
        raise InvalidArgumentError(
            f"static_device_buffers: expected a list of tensors or arrays you own, got "
            f"{type(buffers).__name__}")
    buffers = list(buffers)
    if not 2 <= len(buffers) <= 64:
        raise InvalidArgumentError(
            f"static_device_buffers: {len(buffers)} buffers: must be 2..64 (one you read "
            f"while the next batch lands in another)")
    return buffers
