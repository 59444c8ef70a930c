// PartitionSpec / P, NamedSharding with JAX's layout queries, eformer's correction and sharding analysis
// (partition/). JAX's behaviour is matched where it has one: PartitionSpec's canonicalisation, repr, equality
// with tuples and hash; NamedSharding's devices_indices_map as tuples of slices (keys are device ids here, where
// JAX uses Device objects).
#include <cstdint>
#include <functional>
#include <iterator>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/error.h"
#include "partition/correction.h"
#include "partition/memory_analysis.h"
#include "partition/named_sharding.h"
#include "partition/partition_spec.h"
#include <pybind11/eval.h>

#include "python/bindings.h"

namespace spmdsim::python {
namespace {

// Python's str() of a value, for JAX's nested-tuple message.
std::string PyStr(py::handle value) { return py::str(value).cast<std::string>(); }

std::string TypeName(py::handle value) { return py::type::handle_of(value).attr("__name__").cast<std::string>(); }

std::string AxisName(py::handle value, py::handle entry) {
  if (!py::isinstance<py::str>(value)) {
    throw py::type_error(fmt::format(
        "PartitionSpec entries must be None, a mesh axis name (str), a tuple of names or UNCONSTRAINED; got {} ({}) "
        "in {}",
        py::repr(value).cast<std::string>(), TypeName(value), py::repr(entry).cast<std::string>()));
  }
  return value.cast<std::string>();
}

// JAX's P.UNCONSTRAINED (jax._src.partition_spec.UnconstrainedSingleton).
bool IsJaxUnconstrained(py::handle value) {
  return TypeName(value) == "UnconstrainedSingleton";
}

// A jax.sharding.PartitionSpec (jax.P): not a tuple, but iterable over its entries.
bool IsJaxSpec(py::handle value) {
  py::handle type = py::type::handle_of(value);
  if (!py::hasattr(type, "__module__")) return false;
  const std::string module = py::str(type.attr("__module__")).cast<std::string>();
  const std::string name = TypeName(value);
  return (module == "jax" || module.rfind("jax.", 0) == 0) && (name == "P" || name == "PartitionSpec");
}

// slice(start, stop), or slice(None, None, None) for nullopt.
py::object MakeSlice(std::optional<std::pair<int64_t, int64_t>> range) {
  if (!range) {
    PyObject* s = PySlice_New(nullptr, nullptr, nullptr);
    if (s == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(s);
  }
  PyObject* a = PyLong_FromLongLong(range->first);
  PyObject* b = PyLong_FromLongLong(range->second);
  PyObject* s = PySlice_New(a, b, nullptr);
  Py_XDECREF(a);
  Py_XDECREF(b);
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(s);
}

// The (slice, ...) tuple of every block of an evenly split array, by shard_id: a function of the global shape and
// the tiling alone. Tuples and slices are immutable, so one tuple serves every device holding the block, in this
// call and the next ones with the same shape and tiling; IndicesMapCache below keeps whole maps.
class BlockTuples {
 public:
  // The tuples for `layout`, made on first use. Shared, so that a call re-entering through Python (a finalizer run
  // by the garbage collector while tuples are allocated) cannot free them under the caller. REQUIRES: the GIL
  // (which guards the cache).
  static std::shared_ptr<const BlockTuples> For(const ShardingLayout& layout) {
    static auto* cache = new std::vector<std::shared_ptr<const BlockTuples>>();  // most recently used last
    for (size_t i = cache->size(); i-- > 0;) {
      const BlockTuples& entry = *(*cache)[i];
      if (entry.global_shape_ == layout.global_shape && entry.tiling_ == layout.tiling) {
        std::swap((*cache)[i], cache->back());
        return cache->back();
      }
    }
    std::shared_ptr<const BlockTuples> made = Make(layout);
    while (cache->size() >= kEntries) cache->erase(cache->begin());
    cache->push_back(made);
    return made;
  }

  const py::object& tuple(int64_t shard_id) const { return tuples_[static_cast<size_t>(shard_id)]; }

 private:
  static constexpr size_t kEntries = 8;

  static std::shared_ptr<const BlockTuples> Make(const ShardingLayout& layout) {
    auto made = std::make_shared<BlockTuples>();
    BlockTuples& out = *made;
    out.global_shape_ = layout.global_shape;
    out.tiling_ = layout.tiling;
    const size_t rank = layout.global_shape.size();
    // Per dimension, one slice per block index: slice(None, None, None) for a block that is the whole dimension,
    // as JAX prints it.
    std::vector<std::vector<py::object>> slices(rank);
    for (size_t d = 0; d < rank; ++d) {
      const int64_t n = layout.shard_shape[d];
      for (int64_t b = 0; b < layout.tiling[d]; ++b) {
        const int64_t start = b * n, stop = (b + 1) * n;
        const bool whole = start == 0 && stop == layout.global_shape[d];
        slices[d].push_back(MakeSlice(whole ? std::nullopt : std::optional(std::pair{start, stop})));
      }
    }
    out.tuples_.resize(static_cast<size_t>(layout.num_shards));
    std::vector<int64_t> block(rank, 0);  // row-major over the tiling, as shard_id
    for (py::object& tuple : out.tuples_) {
      PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(rank));
      if (t == nullptr) throw py::error_already_set();
      tuple = py::reinterpret_steal<py::object>(t);
      for (size_t d = 0; d < rank; ++d) {
        PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(d), slices[d][static_cast<size_t>(block[d])].inc_ref().ptr());
      }
      for (size_t d = rank; d-- > 0;) {
        if (++block[d] < layout.tiling[d]) break;
        block[d] = 0;
      }
    }
    return made;
  }

  std::vector<int64_t> global_shape_;
  std::vector<int64_t> tiling_;
  std::vector<py::object> tuples_;
};

// devices_indices_map's dicts by (mesh, spec, shape), as JAX keeps them (jax/_src/sharding_impls.py,
// common_devices_indices_map: a cache of 4096 entries by sharding and shape): a repeated call returns the same
// dict object, so a caller must not mutate it (as in JAX). Bounded by entries and by the devices they hold.
// REQUIRES: the GIL (which guards the cache).
class IndicesMapCache {
 public:
  static IndicesMapCache& Get() {
    static auto* cache = new IndicesMapCache();  // never destroyed: it holds Python objects
    return *cache;
  }

  // The cached dict, or a null object.
  py::object Find(const NamedSharding& sharding, const std::vector<int64_t>& shape) {
    auto range = index_.equal_range(Hash(sharding, shape));
    for (auto it = range.first; it != range.second; ++it) {
      Entry& entry = *it->second;
      if (entry.shape == shape && entry.sharding.spec() == sharding.spec() &&
          entry.sharding.mesh() == sharding.mesh()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        return entry.dict;
      }
    }
    return py::object();
  }

  void Clear() {
    index_.clear();
    lru_.clear();
    devices_ = 0;
  }

  void Insert(const NamedSharding& sharding, const std::vector<int64_t>& shape, py::object dict) {
    const size_t devices = sharding.mesh().device_ids().size();
    if (devices > kMaxDevices) return;
    while (!lru_.empty() && (lru_.size() >= kMaxEntries || devices_ + devices > kMaxDevices)) Evict();
    lru_.push_front(Entry{sharding, shape, std::move(dict), Hash(sharding, shape)});
    index_.emplace(lru_.front().hash, lru_.begin());
    devices_ += devices;
  }

 private:
  struct Entry {
    NamedSharding sharding;
    std::vector<int64_t> shape;
    py::object dict;
    size_t hash;
  };
  static constexpr size_t kMaxEntries = 4096;
  static constexpr size_t kMaxDevices = size_t{1} << 20;

  static size_t Hash(const NamedSharding& sharding, const std::vector<int64_t>& shape) {
    size_t h = std::hash<std::string>()(sharding.spec().ToString());
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
    for (int64_t d : shape) mix(std::hash<int64_t>()(d));
    for (const std::string& name : sharding.mesh().axis_names()) mix(std::hash<std::string>()(name));
    for (int64_t d : sharding.mesh().shape()) mix(std::hash<int64_t>()(d));
    for (int id : sharding.mesh().device_ids()) mix(std::hash<int>()(id));
    return h;
  }

  void Evict() {
    auto last = std::prev(lru_.end());
    auto range = index_.equal_range(last->hash);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second == last) {
        index_.erase(it);
        break;
      }
    }
    devices_ -= last->sharding.mesh().device_ids().size();
    lru_.pop_back();
  }

  std::list<Entry> lru_;  // most recently used first
  std::unordered_multimap<size_t, std::list<Entry>::iterator> index_;
  size_t devices_ = 0;
};

// {Device: (slice, ...)} in mesh order, the devices of host `process_index` only when given.
py::dict IndicesMap(const NamedSharding& sharding, py::handle shape_obj, std::optional<int> process_index) {
  const std::vector<int64_t> shape = ShapeFromPy(shape_obj);
  if (!process_index) {
    if (py::object cached = IndicesMapCache::Get().Find(sharding, shape)) {
      return py::reinterpret_borrow<py::dict>(cached);
    }
  }
  ShardingLayout layout = sharding.Layout(shape);
  const std::shared_ptr<const BlockTuples> tuples = BlockTuples::For(layout);
  const py::list& devices = DeviceObjects(sharding.mesh().shared_topology());
  PyObject* out = _PyDict_NewPresized(process_index ? 0 : static_cast<Py_ssize_t>(layout.shards.size()));
  if (out == nullptr) throw py::error_already_set();
  py::dict result = py::reinterpret_steal<py::dict>(out);
  for (const DeviceShard& s : layout.shards) {
    if (process_index && s.process_index != *process_index) continue;
    if (PyDict_SetItem(out, devices[static_cast<size_t>(s.device)].ptr(), tuples->tuple(s.shard_id).ptr()) != 0)
      throw py::error_already_set();
  }
  if (!process_index) IndicesMapCache::Get().Insert(sharding, shape, result);
  return result;
}

py::tuple SpecToTuple(const PartitionSpec& spec) {
  py::tuple out(spec.entries().size());
  for (size_t i = 0; i < spec.entries().size(); ++i) out[i] = EntryToPy(spec.entries()[i]);
  return out;
}

py::dict ReportToPy(const CorrectionReport& r) {
  py::dict out;
  out["mode"] = std::string(CorrectionModeName(r.mode));
  out["original"] = r.original;
  out["corrected"] = r.corrected;
  py::list corrections;
  for (const Correction& c : r.corrections) {
    py::dict d;
    d["dim"] = c.dim;
    d["from"] = EntryToPy(c.from);
    d["to"] = c.to ? EntryToPy(*c.to) : py::object(py::none());
    d["reason"] = std::string(CorrectionReasonName(c.reason));
    d["dropped_axes"] = c.dropped_axes;
    d["message"] = c.message;
    corrections.append(d);
  }
  out["corrections"] = corrections;
  out["bytes_per_device"] = r.bytes_per_device;
  out["eformer_spec"] = r.eformer_spec ? py::cast(*r.eformer_spec) : py::object(py::none());
  out["eformer_bytes_per_device"] =
      r.eformer_bytes_per_device ? py::cast(*r.eformer_bytes_per_device) : py::object(py::none());
  out["bytes_saved_vs_eformer"] =
      r.bytes_saved_vs_eformer ? py::cast(*r.bytes_saved_vs_eformer) : py::object(py::none());
  return out;
}

// A dtype by name ('float32', 'bf16', 'bfloat16') or numpy dtype-like (np.float32, ml_dtypes.bfloat16).
DType DTypeFromPy(py::handle value) {
  if (py::isinstance<py::str>(value)) return ParseDType(value.cast<std::string>());  // also 'bf16' without ml_dtypes
  py::module_ np = py::module_::import("numpy");
  std::string name = np.attr("dtype")(value).attr("name").cast<std::string>();
  return ParseDType(name);
}

py::dict AnalysisToPy(const MemoryAnalysis& a) {
  py::dict out;
  out["total_parameters"] = a.total_parameters;
  out["sharded_parameters"] = a.sharded_parameters;
  py::dict per_device;
  for (size_t i = 0; i < a.bytes_per_position.size(); ++i) {
    per_device[py::int_(a.device_of_position[i])] = a.bytes_per_position[i];
  }
  out["memory_per_device"] = per_device;
  out["balance_score"] = a.balance_score;
  py::dict stats;
  for (const ArrayMemory& m : a.arrays) {
    py::dict s;
    s["shape"] = ShapeToPy(m.shape);
    s["spec"] = m.spec;
    s["shard_shape"] = ShapeToPy(m.shard_shape);
    s["global_bytes"] = m.global_bytes;
    s["bytes_per_device"] = m.bytes_per_device;
    s["num_shards"] = m.num_shards;
    s["replication"] = m.replication;
    s["sharded"] = m.sharded;
    stats[py::str(m.name)] = s;
  }
  out["partition_stats"] = stats;
  out["total_bytes"] = a.total_bytes;
  out["memory_efficiency"] = a.memory_efficiency;
  out["replication_factor"] = a.replication_factor;
  out["max_bytes"] = a.max_bytes;
  out["min_bytes"] = a.min_bytes;
  out["max_device"] = a.max_device;
  out["min_device"] = a.min_device;
  py::dict per_process;
  for (size_t i = 0; i < a.processes.size(); ++i) per_process[py::int_(a.processes[i])] = a.bytes_per_process[i];
  out["memory_per_process"] = per_process;
  out["capacity_bytes"] = a.capacity_bytes;
  out["devices_over_capacity"] = a.devices_over_capacity;
  out["fits"] = a.fits();
  return out;
}

}  // namespace

py::object Unconstrained() {
  static py::object* singleton = [] {
    py::dict scope;
    scope["__builtins__"] = py::module_::import("builtins");
    py::exec(R"(
class UnconstrainedSingleton:
    """P.UNCONSTRAINED: the compiler may choose this dimension's sharding (JAX: UnconstrainedSingleton)."""
    __slots__ = ()
    def __repr__(self):
        return "UNCONSTRAINED"
    def __reduce__(self):
        return "UNCONSTRAINED"
UnconstrainedSingleton.__module__ = "spmdsim"
UNCONSTRAINED = UnconstrainedSingleton()
)", scope);
    return new py::object(scope["UNCONSTRAINED"]);
  }();
  return *singleton;
}

PartitionSpec::Entry EntryFromPy(py::handle value) {
  if (value.is_none()) return PartitionSpec::Entry::None();
  if (py::isinstance<py::str>(value)) return PartitionSpec::Entry::Axis(value.cast<std::string>());
  if (value.is(Unconstrained()) || IsJaxUnconstrained(value)) return PartitionSpec::Entry::Unconstrained();
  if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(value);
    std::vector<std::string> names;
    names.reserve(seq.size());
    for (py::handle item : seq) {
      if (py::isinstance<py::tuple>(item) || py::isinstance<py::list>(item)) {
        if (seq.size() == 1) return EntryFromPy(item);  // JAX: a one-element tuple is its element
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("A tuple inside PartitionSpec cannot contain a nested tuple. Got partition: {} and the "
                                "nested tuple: {}",
                                PyStr(py::tuple(seq)), PyStr(item)),
                    ErrorKind::kValueError);
      }
      names.push_back(AxisName(item, value));
    }
    return PartitionSpec::Entry::Axes(std::move(names));
  }
  AxisName(value, value);  // throws TypeError
  return PartitionSpec::Entry::None();
}

py::object EntryToPy(const PartitionSpec::Entry& entry) {
  switch (entry.kind()) {
    case PartitionSpec::Entry::Kind::kNone: return py::none();
    case PartitionSpec::Entry::Kind::kUnconstrained: return Unconstrained();
    case PartitionSpec::Entry::Kind::kAxes:
      if (entry.axes().size() == 1) return py::str(entry.axes()[0]);
      py::tuple out(entry.axes().size());
      for (size_t i = 0; i < entry.axes().size(); ++i) out[i] = py::str(entry.axes()[i]);
      return out;
  }
  return py::none();
}

PartitionSpec SpecFromPy(py::handle value) {
  if (py::isinstance<PartitionSpec>(value)) return value.cast<const PartitionSpec&>();
  if (value.is_none()) return PartitionSpec();
  if (!py::isinstance<py::tuple>(value) && !py::isinstance<py::list>(value) && !IsJaxSpec(value)) {
    throw py::type_error(fmt::format("expected a PartitionSpec or a tuple of entries, got {} ({})",
                                     py::repr(value).cast<std::string>(), TypeName(value)));
  }
  std::vector<PartitionSpec::Entry> entries;
  for (py::handle item : value) entries.push_back(EntryFromPy(item));
  return PartitionSpec(std::move(entries));
}

std::vector<int64_t> ShapeFromPy(py::handle value) {
  if (PyTuple_Check(value.ptr())) {  // the common case, read without pybind11's casters
    const Py_ssize_t n = PyTuple_GET_SIZE(value.ptr());
    std::vector<int64_t> out(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PyTuple_GET_ITEM(value.ptr(), i);
      if (!PyLong_Check(item)) return value.cast<std::vector<int64_t>>();  // numpy ints and the like
      out[static_cast<size_t>(i)] = PyLong_AsLongLong(item);
      if (out[static_cast<size_t>(i)] == -1 && PyErr_Occurred()) throw py::error_already_set();
    }
    return out;
  }
  return value.cast<std::vector<int64_t>>();
}

py::tuple ShapeToPy(const std::vector<int64_t>& shape) {
  py::tuple out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out[i] = py::int_(shape[i]);
  return out;
}

namespace {

void BindPartitionSpec(py::module_& m) {
  py::class_<PartitionSpec> spec_class(m, "PartitionSpec",
                                 "How each dimension of an array is split over mesh axes (JAX: "
                                 "jax.sharding.PartitionSpec, alias P).");
  spec_class.def(py::init([](py::args args) {
         std::vector<PartitionSpec::Entry> entries;
         entries.reserve(args.size());
         for (py::handle a : args) entries.push_back(EntryFromPy(a));
         return PartitionSpec(std::move(entries));
       }))
      .def("__repr__", &PartitionSpec::ToString)
      .def("__len__", &PartitionSpec::size)
      .def("__getitem__", [](const PartitionSpec& s, py::object index) -> py::object {
        return SpecToTuple(s)[index];
      })
      .def("__iter__", [](const PartitionSpec& s) { return py::iter(SpecToTuple(s)); })
      .def("__eq__", [](const PartitionSpec& a, py::object b) -> py::object {
        if (py::isinstance<PartitionSpec>(b)) return py::bool_(a == b.cast<const PartitionSpec&>());
        if (py::isinstance<py::tuple>(b)) {
          try {
            return py::bool_(a == SpecFromPy(b));
          } catch (const std::exception&) {
            return py::bool_(false);
          }
        }
        return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      })
      .def("__ne__", [](const PartitionSpec& a, py::object b) -> py::object {
        py::object eq = py::cast(a).attr("__eq__")(b);
        if (eq.is(py::reinterpret_borrow<py::object>(Py_NotImplemented))) return eq;
        return py::bool_(!eq.cast<bool>());
      })
      .def("__hash__",
           [](const PartitionSpec& s) { return py::hash(py::make_tuple(SpecToTuple(s), py::none(), py::none())); })
      .def("__add__", [](const PartitionSpec& s, py::object other) {
        py::tuple rhs =
            py::isinstance<PartitionSpec>(other) ? SpecToTuple(other.cast<const PartitionSpec&>()) : py::tuple(other);
        return SpecFromPy(SpecToTuple(s) + rhs);
      })
      .def("__radd__", [](const PartitionSpec& s, py::tuple other) { return SpecFromPy(other + SpecToTuple(s)); })
      .def("index", [](const PartitionSpec& s, py::object value) { return SpecToTuple(s).attr("index")(value); })
      .def("count", [](const PartitionSpec& s, py::object value) { return SpecToTuple(s).attr("count")(value); })
      .def("__reduce__", [](const PartitionSpec& s) {
        return py::make_tuple(py::module_::import("spmdsim").attr("PartitionSpec"), SpecToTuple(s));
      })
      .def_property_readonly("_partitions", &SpecToTuple)
      .def("_normalized_spec_for_aval", [](const PartitionSpec& s, int ndim) { return s.Normalized(ndim); })
      .def_static("parse", &PartitionSpec::Parse, py::arg("text"),
                  "Parses the text users paste: \"P('dp', None)\", \"('dp', None)\" (raises SyntaxError).");
  spec_class.attr("UNCONSTRAINED") = Unconstrained();
  m.attr("P") = spec_class;
  m.attr("UNCONSTRAINED") = Unconstrained();
}

void BindNamedSharding(py::module_& m) {
  py::class_<NamedSharding>(m, "NamedSharding", "A PartitionSpec bound to a Mesh (JAX: jax.sharding.NamedSharding).")
      .def(py::init([](py::handle mesh, py::handle spec) { return NamedSharding(MeshFromPy(mesh), SpecFromPy(spec)); }),
           py::arg("mesh"), py::arg("spec"))
      .def_property_readonly("mesh", &NamedSharding::mesh)
      .def_property_readonly("spec", &NamedSharding::spec)
      .def_property_readonly("num_devices", &NamedSharding::num_devices)
      .def_property_readonly("is_fully_replicated", &NamedSharding::is_fully_replicated)
      .def_property_readonly("device_set", [](const NamedSharding& s) {
        py::set out;
        for (int id : s.mesh().device_ids()) out.add(DeviceObject(s.mesh(), id));
        return out;
      }, "the set of Device objects of the mesh (JAX: device_set)")
      .def_property_readonly("_device_assignment", [](const NamedSharding& s) {
        py::list out;
        for (int id : s.mesh().device_ids()) out.append(DeviceObject(s.mesh(), id));
        return py::tuple(out);
      })
      .def_property_readonly("replicated_axes",
                             [](const NamedSharding& s) { return py::tuple(py::cast(s.ReplicatedAxes())); })
      .def("shard_shape",
           [](const NamedSharding& s, py::handle shape) { return ShapeToPy(s.ShardShape(ShapeFromPy(shape))); },
           py::arg("global_shape"))
      .def("devices_indices_map",
           [](const NamedSharding& s, py::handle shape) { return IndicesMap(s, shape, std::nullopt); },
           py::arg("global_shape"), "{Device: (slice, ...)} for every device, in mesh order.")
      .def("addressable_devices_indices_map",
           [](const NamedSharding& s, py::handle shape, int process_index) {
             return IndicesMap(s, shape, process_index);
           },
           py::arg("global_shape"), py::kw_only(), py::arg("process_index") = 0,
           "devices_indices_map restricted to the devices of host `process_index` (JAX: the calling process).")
      .def("replica_ids", [](const NamedSharding& s, py::handle shape) {
        py::dict out;
        for (const DeviceShard& d : s.Layout(ShapeFromPy(shape)).shards) {
          out[DeviceObject(s.mesh(), d.device)] = d.replica_id;
        }
        return out;
      }, py::arg("global_shape"), "{Device: replica id} (JAX: device_replica_id_map).")
      .def("__repr__", &NamedSharding::ToString)
      .def("__eq__", [](const NamedSharding& a, py::object b) {
        return py::isinstance<NamedSharding>(b) && a.mesh() == b.cast<const NamedSharding&>().mesh() &&
               a.spec() == b.cast<const NamedSharding&>().spec();
      })
      .def("__hash__", [](const NamedSharding& s) {
        return py::hash(py::make_tuple(py::cast(s.mesh()).attr("__hash__")(), py::cast(s.spec()).attr("__hash__")()));
      });
  m.def("clear_caches", [] { IndicesMapCache::Get().Clear(); },
        "Drops the cached devices_indices_map dicts (JAX: jax.clear_caches()).");
}

// Correction, validation and memory analysis of specs.
void BindSpecChecks(py::module_& m) {
  m.def("_get_corrected_named_sharding", [](py::handle shape, py::handle spec, const Mesh& mesh) {
    if (mesh.empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "get_corrected_named_sharding: the mesh is empty (eformer returns a replicated sharding on an empty "
                  "mesh; spmdsim's NamedSharding needs devices)",
                  ErrorKind::kValueError);
    }
    return GetCorrectedNamedSharding(ShapeFromPy(shape), SpecFromPy(spec), mesh);
  });
  m.def("correct_spec", [](py::handle spec, py::handle mesh_obj, py::handle shape, const std::string& mode,
                           py::object dtype) {
    const Mesh mesh = MeshFromPy(mesh_obj);
    CorrectionOptions options{
        .mode = ParseCorrectionMode(mode), .element_bytes = DTypeSize(DTypeFromPy(dtype)), .log = false};
    return ReportToPy(CorrectSpec(SpecFromPy(spec), mesh, ShapeFromPy(shape), options));
  }, py::arg("spec"), py::arg("mesh"), py::arg("shape"), py::kw_only(), py::arg("mode") = "eformer",
     py::arg("dtype") = "float32",
     "The correction of `spec` for `shape` on `mesh` with every change reported: mode 'eformer' (eformer's "
     "get_corrected_named_sharding), 'keep-most' or 'none' (validate only, as JAX).");
  m.def("validate_spec", [](py::handle spec, py::handle mesh_obj, py::object shape) {
    const Mesh mesh = MeshFromPy(mesh_obj);
    std::optional<std::vector<int64_t>> s;
    if (!shape.is_none()) s = ShapeFromPy(shape);
    ValidateSpec(SpecFromPy(spec), mesh, s ? std::optional<std::span<const int64_t>>(*s) : std::nullopt);
  }, py::arg("spec"), py::arg("mesh"), py::arg("shape") = py::none(),
     "Raises what JAX raises for a spec that does not fit (DuplicateSpecError, ValueError, IndivisibleError).");
  m.def("_analyze", [](py::list arrays, const Mesh& mesh) {
    std::vector<NamedArray> named;
    for (py::handle item : arrays) {
      py::tuple t = item.cast<py::tuple>();
      named.push_back({t[0].cast<std::string>(), ShapeFromPy(t[1]), DTypeFromPy(t[2]), SpecFromPy(t[3])});
    }
    return AnalysisToPy(AnalyzeMemory(named, mesh));
  });
}

}  // namespace

void BindPartition(py::module_& m) {
  BindPartitionSpec(m);
  BindNamedSharding(m);
  BindSpecChecks(m);
}

}  // namespace spmdsim::python
