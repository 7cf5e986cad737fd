// pinwheel._pinwheel: the extension module behind the `pinwheel` Python
// package (samples/python/pinwheel/__init__.py is the public face; this
// module's names starting with '_' are internal).
#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "loader/loader_options.h"
#include "loader/telemetry/rank_wait.h"
#include "samples/python/ext/py_build_info.h"
#include "samples/python/ext/py_cache.h"
#include "samples/python/ext/py_datasets.h"
#include "samples/python/ext/py_dlpack.h"
#include "samples/python/ext/py_images.h"
#include "samples/python/ext/py_iterable.h"
#include "samples/python/ext/py_loader.h"
#include "samples/python/ext/py_mixtures.h"
#include "samples/python/ext/py_static_buffers.h"
#include "samples/python/ext/py_support.h"
#include "samples/python/ext/py_thread_state.h"
#include "transfer/device.h"

namespace pinwheel::python {

void BindResume(nb::module_& m);  // py_resume.cc

nb::object MakeError(const absl::Status& status) {
  // Leaked on purpose: destroying it at exit would need the GIL.
  static nb::object* from_status = new nb::object(
      nb::module_::import_("pinwheel.errors").attr("_from_status"));
  return (*from_status)(static_cast<int>(status.code()),
                        TextToPython(status.message()));
}

namespace {

using namespace nb::literals;

// LoaderOptions::stats_report from the Loader's stats_* arguments. The
// callback is the Python wrapper's (it passes the JSON line on, parsed);
// it runs on the loader's report thread, taking the GIL; an exception it
// raises becomes the Status Loader::stats_report_status() keeps.
StatsReportOptions StatsReportFromPy(std::optional<double> every_s,
                                     int64_t every_batches, nb::object callback,
                                     const std::string& path) {
  StatsReportOptions report;
  if (every_s.has_value()) {
    if (!(*every_s > 0) || std::isinf(*every_s)) {
      throw StatusError(absl::InvalidArgumentError(
          absl::StrCat("stats_every = ", *every_s,
                       ": must be > 0 seconds and finite (or None)")));
    }
    report.every = absl::Seconds(*every_s);
  }
  report.every_batches = every_batches;
  report.path = path;
  if (!callback.is_none()) {
    auto held = std::make_shared<PyRef>(std::move(callback));
    report.callback = [held](const std::string& json) -> absl::Status {
      if (PythonFinalizing()) {
        return absl::CancelledError("the Python interpreter is exiting");
      }
      KeepPythonThreadState();
      nb::gil_scoped_acquire gil;
      try {
        held->get()(json);
        return absl::OkStatus();
      } catch (nb::python_error& e) {
        return StatusFromPython(e, "stats_callback");
      }
    };
  }
  return report;
}

PyLoaderOptions OptionsFromPy(int64_t batch_size, bool shuffle, uint64_t seed,
                              bool drop_last, int num_workers, int prefetch,
                              int device_buffers, const std::string& device,
                              const std::string& on_error,
                              std::optional<double> timeout_s, bool in_order,
                              int rank, int world_size, bool drop_uneven_tail,
                              bool pin_memory, const std::string& output,
                              nb::object stream_fn, nb::object convert_fn) {
  PyLoaderOptions p;
  LoaderOptions& o = p.options;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.seed = seed;
  o.drop_last = drop_last;
  o.num_workers = num_workers;
  o.prefetch = prefetch;
  o.device_buffers = device_buffers;
  o.device = ValueOrThrow(Device::Parse(device));
  if (on_error == "stop") {
    o.on_error = ErrorPolicy::kStop;
  } else if (on_error == "skip") {
    o.on_error = ErrorPolicy::kSkipSample;
  } else if (on_error == "replace") {
    o.on_error = ErrorPolicy::kReplace;
  } else {
    throw StatusError(absl::InvalidArgumentError(absl::StrCat(
        "on_error = '", on_error, "': must be 'stop', 'skip' or 'replace'")));
  }
  if (timeout_s.has_value()) {
    if (!(*timeout_s > 0) || std::isnan(*timeout_s)) {
      throw StatusError(absl::InvalidArgumentError(absl::StrCat(
          "timeout = ", *timeout_s, ": must be > 0 seconds (or None)")));
    }
    p.timeout = std::isinf(*timeout_s) ? absl::InfiniteDuration()
                                       : absl::Seconds(*timeout_s);
  }
  o.in_order = in_order;
  o.rank = rank;
  o.world_size = world_size;
  o.drop_uneven_tail = drop_uneven_tail;
  o.pin_memory = pin_memory;
  if (output == "torch") {
    p.output = Output::kTorch;
    if (convert_fn.is_none()) {
      throw StatusError(absl::InvalidArgumentError(
          "output = 'torch' needs convert_fn (torch.from_dlpack)"));
    }
  } else if (output == "numpy") {
    p.output = Output::kNumpy;
  } else if (output == "dlpack") {
    p.output = Output::kDLPack;
  } else {
    throw StatusError(absl::InvalidArgumentError(absl::StrCat(
        "output = '", output, "': must be 'torch', 'numpy' or 'dlpack'")));
  }
  p.stream_fn = std::move(stream_fn);
  p.convert_fn = std::move(convert_fn);
  return p;
}

// The gather path's mode (LoaderOptions::gather) from its Python name.
GatherMode GatherModeFromPy(const std::string& gather) {
  if (gather == "auto") return GatherMode::kAuto;
  if (gather == "on") return GatherMode::kOn;
  if (gather == "off") return GatherMode::kOff;
  throw StatusError(absl::InvalidArgumentError(
      absl::StrCat("gather = '", gather, "': must be 'auto', 'on' or 'off'")));
}

}  // namespace
}  // namespace pinwheel::python

NB_MODULE(_pinwheel, m) {
  using namespace pinwheel;
  using namespace pinwheel::python;
  using namespace nb::literals;

  m.doc() = "pinwheel's extension module; use the `pinwheel` package.";
  // Objects still referenced at exit (an uncaught exception's traceback
  // holding a loader, say) are not leaks worth a warning to the user.
  nb::set_leak_warnings(false);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      try {
        nb::object error = MakeError(e.status());
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())),
                        error.ptr());
      } catch (nb::python_error& inner) {
        inner.restore();
      }
    }
  });

  nb::class_<DatasetHandle>(m, "_Dataset",
                            "A dataset handle (see pinwheel.RecordFile, ...).")
      .def_prop_ro(
          "size",
          [](const DatasetHandle& d) {
            return d.dataset != nullptr ? d.dataset->size() : -1;
          },
          "Number of samples (-1: an iterable dataset).")
      .def_prop_ro(
          "fields",
          [](const DatasetHandle& d) {
            return LayoutToPy(d.dataset != nullptr ? d.dataset->layout()
                                                   : d.iterable->layout());
          },
          "Per-sample fields as (name, dtype, shape) tuples.")
      .def("__repr__", [](const DatasetHandle& d) {
        if (d.dataset == nullptr) {
          return absl::StrCat(d.description, ": shards of ",
                              d.iterable->layout().ToString());
        }
        return absl::StrCat(d.description, ": ", d.dataset->size(),
                            " samples of ", d.dataset->layout().ToString());
      });

  // Issue 33: the slowest rank (loader/telemetry/rank_wait.h).
  m.def(
      "_slowest_rank_of",
      [](const std::vector<nb::bytes>& records) {
        std::vector<RankWait> ranks;
        for (size_t i = 0; i < records.size(); ++i) {
          const nb::bytes& b = records[i];
          absl::StatusOr<RankWait> r = RankWaitFromBytes(absl::MakeConstSpan(
              reinterpret_cast<const uint8_t*>(b.c_str()), b.size()));
          if (!r.ok()) {
            throw StatusError(absl::InvalidArgumentError(absl::StrCat(
                "slowest_rank: record ", i, ": ", r.status().message())));
          }
          ranks.push_back(*r);
        }
        const SlowestRank slowest = ValueOrThrow(SlowestRankOf(ranks));
        return std::make_tuple(slowest.rank, slowest.loader_bound,
                               slowest.line);
      },
      "records"_a,
      "(rank, loader_bound, line) of the slowest of these RankWait records.");
  m.def("open_record_file", &OpenRecordFile, "path"_a,
        "Opens a pinwheel record file (memory-mapped).");
  m.def("open_token_windows", &OpenTokenWindows, "path"_a, "seq_len"_a,
        "token_bytes"_a = 2, "signed_tokens"_a = false, "windows"_a = 0,
        "seed"_a = 0, "window"_a = false,
        "Opens a flat token file as windows of seq_len + 1 tokens "
        "(fields 'input' and 'target', i64; window=True: one field "
        "'tokens' of seq_len + 1 tokens in the file's dtype).");
  m.def("array_dataset", &MakeArrayDataset, "fields"_a, "size"_a, "arrays"_a,
        "A dataset reading C-contiguous arrays in place (kept alive).");
  m.def("python_dataset", &MakePythonDataset, "fields"_a, "size"_a, "read"_a,
        "A dataset whose read(index, sample) writes into numpy views.");
  m.def("write_record_file", &WriteRecordFile, "path"_a, "fields"_a, "size"_a,
        "arrays"_a, "Writes size records, one C-contiguous array per field.");
  m.def("cuda_backend_built", &Device::CudaBackendBuilt,
        "Whether this build has the CUDA backend.");
  m.def("cuda_device_count", &Device::CudaDeviceCount,
        "Usable CUDA devices (0 without the CUDA backend).");
  m.def(
      "_default_device_buffers", [] { return LoaderOptions{}.device_buffers; },
      "LoaderOptions::device_buffers' default: Loader(device_buffers=None) "
      "without static_device_buffers.");

  BindDLPack(m);
  BindBuildInfo(m);
  BindImages(m);
  BindCache(m);
  BindMixtures(m);

  nb::class_<PyBatch>(m, "Batch", nb::is_weak_referenceable(),
                      "One batch: a read-only mapping of field name to "
                      "tensor / array / DLPack capsule; iterating it gives the "
                      "field names. Unpacking it (x, y = batch, or for x, y "
                      "in loader) raises TypeError: write x, y = "
                      "batch.values() (field order) or batch['x']. See the "
                      "release rule in pinwheel's documentation.")
      .def("__getitem__", &PyBatch::Get, "name"_a)
      .def("__contains__", &PyBatch::contains, "name"_a)
      .def("__len__", &PyBatch::num_fields)
      .def("__iter__", [](const PyBatch& b) { return nb::iter(b.fields()); })
      .def("keys", [](const PyBatch& b) { return b.fields().keys(); })
      .def("values", [](const PyBatch& b) { return b.fields().values(); })
      .def("items", [](const PyBatch& b) { return b.fields().items(); })
      .def(
          "get",
          [](const PyBatch& b, const std::string& name, nb::object fallback) {
            return b.contains(name) ? b.Get(name) : fallback;
          },
          "name"_a, "default"_a = nb::none())
      .def("to_dict", &PyBatch::fields,
           "A new dict of the fields (the views, not copies).")
      .def("release", &PyBatch::Release,
           "Gives up this batch; its buffer is reused once every view taken "
           "from it is gone too, fenced on the stream it was handed over on. "
           "Idempotent.")
      .def_prop_ro("released", &PyBatch::released)
      .def_prop_ro("epoch", &PyBatch::epoch)
      .def_prop_ro("index", &PyBatch::index,
                   "Position of the batch in its epoch.")
      .def_prop_ro("size", &PyBatch::size, "Number of samples.")
      .def_prop_ro("indices", &PyBatch::indices,
                   "Dataset indices of the samples, in batch order.")
      .def_prop_ro("padded", &PyBatch::padded,
                   "pad_last_batch: how many of the last samples are "
                   "padding (index -1, validity 0).")
      .def_prop_ro("buffer_index", &PyBatch::buffer_index,
                   "Which device buffer holds the batch (0..device_buffers-1; "
                   "with static_device_buffers, the position of the "
                   "caller's buffer it landed in).")
      .def("__repr__", [](const PyBatch& b) {
        return absl::StrCat("<pinwheel.Batch ", b.index(), " of epoch ",
                            b.epoch(), ", ", b.size(), " samples",
                            b.released() ? ", released" : "", ">");
      });

  nb::class_<PyLoader>(m, "_Loader", "The loader core; use pinwheel.Loader.")
      .def(
          "__init__",
          [](PyLoader* self, const DatasetHandle& dataset, int64_t batch_size,
             bool shuffle, uint64_t seed, bool drop_last, int num_workers,
             int prefetch, int device_buffers, const std::string& device,
             const std::string& on_error, std::optional<double> timeout,
             bool in_order, int rank, int world_size, bool drop_uneven_tail,
             bool pin_memory, const std::string& output, nb::object stream_fn,
             nb::object convert_fn, std::optional<nb::bytes> resume,
             nb::object worker_init,
             const DeviceTransformHandle* device_transform,
             const SamplerHandle* sampler, bool pad_last_batch,
             const std::string& valid_field, nb::object static_device_buffers,
             const std::string& gather, std::optional<double> stats_every,
             int64_t stats_every_batches, nb::object stats_callback,
             const std::string& stats_path, int auto_max_workers,
             size_t auto_max_pinned_bytes, bool keep_launcher_binding) {
            PyLoaderOptions options = OptionsFromPy(
                batch_size, shuffle, seed, drop_last, num_workers, prefetch,
                device_buffers, device, on_error, timeout, in_order, rank,
                world_size, drop_uneven_tail, pin_memory, output,
                std::move(stream_fn), std::move(convert_fn));
            if (resume.has_value()) {
              options.resume.emplace(resume->c_str(), resume->size());
            }
            if (!worker_init.is_none()) {
              options.worker_init_failure =
                  std::make_shared<WorkerInitFailure>();
              options.options.worker_init = WorkerInitFromPython(
                  std::move(worker_init), options.worker_init_failure);
            }
            if (device_transform != nullptr) {
              options.options.device_transform = device_transform->transform;
            }
            // Issue 22: a custom order (seeded with `seed`) and fixed
            // shapes.
            if (sampler != nullptr) {
              options.options.sampler = sampler->sampler;
            }
            options.options.pad_last_batch = pad_last_batch;
            options.options.valid_field = valid_field;
            if (!static_device_buffers.is_none()) {
              options.options.static_device_buffers = StaticBuffersFromPy(
                  static_device_buffers,
                  options.options.device.value_or(Device::FirstGpuOrHost()));
            }
            options.options.gather = GatherModeFromPy(gather);
            options.options.stats_report =
                StatsReportFromPy(stats_every, stats_every_batches,
                                  std::move(stats_callback), stats_path);
            // Issue 33: the bounds of num_workers / prefetch = "auto".
            options.options.auto_max_workers = auto_max_workers;
            options.options.auto_max_pinned_bytes = auto_max_pinned_bytes;
            // Issue 30: Note [Open MPI's default binding is widened].
            options.options.keep_launcher_binding = keep_launcher_binding;
            new (self) PyLoader(dataset, std::move(options));
          },
          "dataset"_a, "batch_size"_a, "shuffle"_a, "seed"_a, "drop_last"_a,
          "num_workers"_a, "prefetch"_a, "device_buffers"_a, "device"_a,
          "on_error"_a, "timeout"_a.none(), "in_order"_a, "rank"_a,
          "world_size"_a, "drop_uneven_tail"_a, "pin_memory"_a, "output"_a,
          "stream_fn"_a.none(), "convert_fn"_a.none(),
          "resume"_a.none() = nb::none(), "worker_init"_a.none() = nb::none(),
          "device_transform"_a.none() = nb::none(),
          "sampler"_a.none() = nb::none(), "pad_last_batch"_a = false,
          "valid_field"_a = "valid",
          "static_device_buffers"_a.none() = nb::none(), "gather"_a = "off",
          "stats_every"_a.none() = nb::none(), "stats_every_batches"_a = 0,
          "stats_callback"_a.none() = nb::none(), "stats_path"_a = "",
          "auto_max_workers"_a = 0, "auto_max_pinned_bytes"_a = 0,
          "keep_launcher_binding"_a = false)
      .def("_checkpoint", &PyLoader::Checkpoint,
           "Loader::Checkpoint() as LoaderCheckpoint bytes.")
      .def("next", &PyLoader::Next,
           "The next Batch, or None at the end of the epoch.")
      .def("start_epoch", &PyLoader::StartEpoch, "epoch"_a)
      .def("close", &PyLoader::Close)
      .def_prop_ro("closed", &PyLoader::closed)
      .def_prop_ro("_busy", &PyLoader::busy,
                   "Whether a thread is inside next() now.")
      .def_prop_ro("epoch", &PyLoader::epoch)
      .def_prop_ro("batches_per_epoch", &PyLoader::batches_per_epoch)
      .def_prop_ro("device", &PyLoader::device)
      .def_prop_ro("fields", &PyLoader::fields,
                   "Batch fields as (name, dtype, [batch_size, ...]).")
      .def("stats", &PyLoader::stats)
      .def("stats_json", &PyLoader::StatsJson,
           "stats() as one JSON object (loader/telemetry/stats_export.h).")
      .def(
          "_rank_wait",
          [](const PyLoader& self, int rank) {
            const std::string bytes = self.RankWaitBytes(rank);
            return nb::bytes(bytes.data(), bytes.size());
          },
          "rank"_a, "This loader's RankWait record for `rank`, as bytes.")
      .def("stats_report_error", &PyLoader::StatsReportError,
           "None, or why the periodic stats reports stopped.")
      .def("stats_prometheus", &PyLoader::StatsPrometheus, "labels"_a,
           "stats() in the Prometheus text exposition format.");

  BindResume(m);
  BindStaticBuffers(m);
}
