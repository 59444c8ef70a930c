// The typed readers of the attributes that carry semantics (hlo/internal/scanner.h). Each reads the value text
// of one attribute and fails at the column of what is wrong, saying what would be valid.
#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "common/user_text.h"
#include "hlo/internal/scanner.h"

namespace spmdsim::hlo::internal {
namespace {

// The most devices an iota form or a device list may expand to.
constexpr int64_t kMaxIotaDevices = int64_t{1} << 20;

// "AxB..." after the cursor: integers separated by 'x' (a window's size=3x3, stride=1x1).
std::vector<int64_t> ReadXList(Scanner& s, std::string_view what) {
  std::vector<int64_t> values{s.Int(what)};
  while (s.Peek() == 'x') {
    s.set_pos(s.pos() + 1);
    values.push_back(s.Int(what));
    if (values.size() > static_cast<size_t>(kMaxRank))
      s.Fail(fmt::format("{} has more than {} dimensions", what, kMaxRank));
  }
  return values;
}

// "lo_hi[_interior]" (one dimension of a padding).
PadDim ReadPadDim(Scanner& s, bool allow_interior) {
  PadDim d;
  d.low = s.Int("padding low");
  if (s.Peek() != '_') s.Fail(fmt::format("expected '_' between padding low and high, found {}", s.Found()));
  s.set_pos(s.pos() + 1);
  d.high = s.Int("padding high");
  if (allow_interior && s.Peek() == '_') {
    s.set_pos(s.pos() + 1);
    d.interior = s.Int("interior padding");
    if (d.interior < 0) s.Fail("interior padding must be >= 0");
  }
  return d;
}

// Expands an iota tile assignment: iota(prod(reshape)) reshaped to `reshape`, transposed by `perm`, flattened.
std::vector<int64_t> ExpandIota(Scanner& s, size_t at, const std::vector<int64_t>& reshape,
                                const std::vector<int64_t>& perm) {
  int64_t n = 1;
  for (int64_t d : reshape) {
    if (d < 1 || n > kMaxIotaDevices / d)
      s.FailAt(at, fmt::format("iota device list must have 1 to {} devices", kMaxIotaDevices));
    n *= d;
  }
  const size_t rank = reshape.size();
  std::vector<int64_t> order = perm;
  if (order.empty()) {
    order.resize(rank);
    std::iota(order.begin(), order.end(), 0);
  }
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted.size() != rank || sorted[i] != static_cast<int64_t>(i)) {
      s.FailAt(at, fmt::format("T(...) must be a permutation of 0..{}", rank - 1));
    }
  }
  // Strides of the source (row-major over `reshape`), visited in the transposed order.
  std::vector<int64_t> stride(rank, 1);
  for (size_t i = rank; i-- > 1;) stride[i - 1] = stride[i] * reshape[i];
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  std::vector<int64_t> idx(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = 0;
    for (size_t j = 0; j < rank; ++j) v += idx[j] * stride[order[j]];
    out.push_back(v);
    for (size_t j = rank; j-- > 0;) {
      if (++idx[j] < reshape[order[j]]) break;
      idx[j] = 0;
    }
  }
  return out;
}

// "[d0,d1,...]" (tile dimensions, iota shapes).
std::vector<int64_t> ReadBracketList(Scanner& s, std::string_view what) {
  s.Expect('[', fmt::format("to open {}", what));
  std::vector<int64_t> v;
  if (!s.TryConsume(']')) {
    do {
      v.push_back(s.Int(what));
      if (v.size() > static_cast<size_t>(kMaxRank)) s.Fail(fmt::format("{} has too many entries", what));
    } while (s.TryConsume(','));
    s.Expect(']', fmt::format("to close {}", what));
  }
  return v;
}

// "[reshape]T(perm)" (T(...) optional): iota(prod(reshape)) reshaped, transposed and flattened.
std::vector<int64_t> ReadReshapeTranspose(Scanner& s) {
  const size_t at = s.pos();
  std::vector<int64_t> reshape = ReadBracketList(s, "iota reshape dimensions");
  std::vector<int64_t> perm;
  if (s.Peek() == 'T') {
    s.set_pos(s.pos() + 1);
    s.Expect('(', "after T");
    do {
      perm.push_back(s.Int("transpose dimension"));
    } while (s.TryConsume(','));
    s.Expect(')', "to close T(...)");
  }
  return ExpandIota(s, at, reshape, perm);
}

// "<=[reshape]T(perm)" after a bracket list: the iota form's devices.
std::vector<int64_t> ReadIotaDevices(Scanner& s) {
  if (!s.TryConsume("<=")) s.Fail(fmt::format("expected '<=' in an iota device list, found {}", s.Found()));
  return ReadReshapeTranspose(s);
}

int64_t Product(Scanner& s, const std::vector<int64_t>& dims, std::string_view what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 1 || n > kMaxIotaDevices / d) s.Fail(fmt::format("{} must have 1 to {} devices", what, kMaxIotaDevices));
    n *= d;
  }
  return n;
}

void ReadTiledSharding(Scanner& s, Sharding* out) {
  out->kind = Sharding::Kind::kTiled;
  out->tile_dims = ReadBracketList(s, "tile assignment dimensions");
  const int64_t n = Product(s, out->tile_dims, "a tile assignment");
  s.SkipSpace();
  if (s.Peek() == '<') {
    out->tile_devices = ReadIotaDevices(s);
  } else {
    do {
      out->tile_devices.push_back(s.Int("device id"));
      if (static_cast<int64_t>(out->tile_devices.size()) > n) break;
    } while (s.TryConsume(','));
  }
  if (static_cast<int64_t>(out->tile_devices.size()) != n) {
    s.Fail(fmt::format("the tile assignment has {} devices; its dimensions need {}", out->tile_devices.size(), n));
  }
}

// Skips "name=value" words the sharding does not need (metadata=..., shard_as=...).
void SkipShardingExtra(Scanner& s) {
  s.Name("sharding attribute");
  if (s.TryConsume('=')) s.RawValue("sharding attribute");
}

}  // namespace

bool ReadBool(Scanner& s, std::string_view what) {
  std::string_view w = s.Name(what);
  if (w == "true") return true;
  if (w == "false") return false;
  s.Fail(fmt::format("{} must be true or false, not {}", what, QuoteForError(w)));
}

std::vector<int64_t> ReadIntList(Scanner& s, std::string_view what) {
  s.Expect('{', fmt::format("to open {}", what));
  std::vector<int64_t> v;
  if (s.TryConsume('}')) return v;
  do {
    v.push_back(s.Int(what));
    if (v.size() > (size_t{1} << 20)) s.Fail(fmt::format("{} is too long", what));
  } while (s.TryConsume(','));
  s.Expect('}', fmt::format("to close {}", what));
  return v;
}

std::vector<SliceDim> ReadSlice(Scanner& s) {
  s.Expect('{', "to open slice={...}");
  std::vector<SliceDim> dims;
  if (s.TryConsume('}')) return dims;
  do {
    s.Expect('[', "to open a slice dimension [start:limit:stride]");
    SliceDim d;
    d.start = s.Int("slice start");
    s.Expect(':', "after the slice start");
    d.limit = s.Int("slice limit");
    if (s.TryConsume(':')) d.stride = s.Int("slice stride");
    s.Expect(']', "to close a slice dimension");
    dims.push_back(d);
    if (dims.size() > static_cast<size_t>(kMaxRank)) s.Fail("slice has too many dimensions");
  } while (s.TryConsume(','));
  s.Expect('}', "to close slice={...}");
  return dims;
}

std::vector<PadDim> ReadPadding(Scanner& s) {
  std::vector<PadDim> dims;
  s.SkipBlanks();
  if (s.AtEnd()) return dims;  // a scalar's padding is empty
  dims.push_back(ReadPadDim(s, true));
  while (s.Peek() == 'x') {
    s.set_pos(s.pos() + 1);
    dims.push_back(ReadPadDim(s, true));
    if (dims.size() > static_cast<size_t>(kMaxRank)) s.Fail("padding has too many dimensions");
  }
  return dims;
}

std::vector<WindowDim> ReadWindow(Scanner& s) {
  s.Expect('{', "to open window={...}");
  std::vector<WindowDim> dims;
  auto resize = [&](size_t n, size_t at) {
    if (dims.empty()) dims.resize(n);
    if (dims.size() != n) s.FailAt(at, fmt::format("window fields disagree on the rank: {} and {}", dims.size(), n));
  };
  while (!s.TryConsume('}')) {
    const size_t at = s.pos();
    std::string_view key = s.Name("a window field (size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal)");
    s.Expect('=', fmt::format("after window field {}", key));
    s.SkipSpace();
    if (key == "pad") {
      std::vector<PadDim> pads{ReadPadDim(s, false)};
      while (s.Peek() == 'x') {
        s.set_pos(s.pos() + 1);
        pads.push_back(ReadPadDim(s, false));
        if (pads.size() > static_cast<size_t>(kMaxRank)) s.Fail("window has too many dimensions");
      }
      resize(pads.size(), at);
      for (size_t i = 0; i < pads.size(); ++i) dims[i].pad_low = pads[i].low, dims[i].pad_high = pads[i].high;
      continue;
    }
    std::vector<int64_t> v = ReadXList(s, fmt::format("window {}", key));
    resize(v.size(), at);
    for (size_t i = 0; i < v.size(); ++i) {
      if (key == "size") dims[i].size = v[i];
      else if (key == "stride") dims[i].stride = v[i];
      else if (key == "lhs_dilate") dims[i].lhs_dilation = v[i];
      else if (key == "rhs_dilate") dims[i].rhs_dilation = v[i];
      else if (key == "rhs_reversal") dims[i].reversal = v[i] != 0;
      else
        s.FailAt(at,
                 fmt::format("unknown window field {}; valid: size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal",
                             QuoteForError(key)));
    }
  }
  return dims;
}

namespace {

// One side of dim_labels ("b01f"): the positions of the two letters and of the spatial digits.
void ReadLabels(Scanner& s, char first, char second, int64_t* first_dim, int64_t* second_dim,
                std::vector<int64_t>* spatial) {
  const size_t at = s.pos();
  std::string_view labels = s.Name("dimension labels");
  *first_dim = *second_dim = -1;
  std::vector<int64_t> by_digit(labels.size(), -1);
  for (size_t i = 0; i < labels.size(); ++i) {
    const char c = labels[i];
    if (c == first && *first_dim < 0) {
      *first_dim = static_cast<int64_t>(i);
    } else if (c == second && *second_dim < 0) {
      *second_dim = static_cast<int64_t>(i);
    } else if (c >= '0' && c <= '9' && static_cast<size_t>(c - '0') < labels.size() && by_digit[c - '0'] < 0) {
      by_digit[c - '0'] = static_cast<int64_t>(i);
    } else {
      s.FailAt(at, fmt::format("bad dimension labels {}: expected '{}', '{}' and the digits 0..{} once each",
                               QuoteForError(labels), first, second, static_cast<int>(labels.size()) - 3));
    }
  }
  const size_t num_spatial = labels.size() >= 2 ? labels.size() - 2 : 0;
  if (*first_dim < 0 || *second_dim < 0) {
    s.FailAt(at, fmt::format("dimension labels {} need '{}' and '{}'", QuoteForError(labels), first, second));
  }
  for (size_t k = 0; k < num_spatial; ++k) {
    if (by_digit[k] < 0)
      s.FailAt(at, fmt::format("dimension labels {} lack spatial dimension {}", QuoteForError(labels), k));
    spatial->push_back(by_digit[k]);
  }
}

}  // namespace

ConvDims ReadDimLabels(Scanner& s, int* rank) {
  s.SkipSpace();
  const size_t start = s.pos();
  std::string_view all = s.Rest();
  size_t len = 0;
  while (len < all.size() && all[len] != ',' && all[len] != ' ' && all[len] != '\n') ++len;
  all = all.substr(0, len);
  const size_t underscore = all.find('_');
  const size_t arrow = all.find("->");
  if (underscore == std::string_view::npos || arrow == std::string_view::npos || arrow < underscore) {
    s.Fail(fmt::format("dim_labels must look like b01f_01io->b01f, not {}", QuoteForError(all)));
  }
  Scanner input(s.source(), start, start + underscore);
  Scanner kernel(s.source(), start + underscore + 1, start + arrow);
  Scanner output(s.source(), start + arrow + 2, start + len);
  ConvDims d;
  ReadLabels(input, 'b', 'f', &d.input_batch, &d.input_feature, &d.input_spatial);
  ReadLabels(kernel, 'i', 'o', &d.kernel_input_feature, &d.kernel_output_feature, &d.kernel_spatial);
  ReadLabels(output, 'b', 'f', &d.output_batch, &d.output_feature, &d.output_spatial);
  if (!input.AtEnd() || !kernel.AtEnd() || !output.AtEnd()) {
    s.Fail(fmt::format("dim_labels must look like b01f_01io->b01f, not {}", QuoteForError(all)));
  }
  if (d.kernel_spatial.size() != d.input_spatial.size() || d.output_spatial.size() != d.input_spatial.size()) {
    s.Fail("dim_labels: input, kernel and output must have the same number of spatial dimensions");
  }
  *rank = static_cast<int>(d.input_spatial.size()) + 2;
  s.set_pos(start + len);
  return d;
}

namespace {

// One grouped axis of a mesh-axes replica group list: a mesh dimension, or a sub-axis of it (pre_size, size).
struct AxisRef {
  int64_t dim = 0;
  int64_t pre_size = 0, size = 0;  // size 0: the whole dimension
};

std::string ReadAxisName(Scanner& s) {
  s.SkipSpace();
  if (s.Peek() == '\'') {
    const size_t at = s.pos() + 1;
    const size_t close = s.text().find('\'', at);
    if (close == std::string_view::npos || close >= s.pos() + s.Rest().size()) s.Fail("unterminated axis name");
    s.set_pos(close + 1);
    return std::string(s.text().substr(at, close - at));
  }
  return std::string(s.Name("a mesh axis name"));
}

// Whether device_ids=(...) holds the iota form "[reshape]T(perm)" (XLA's TileAssignment::ArrayToString for an
// iota assignment) rather than the list of ids: a flat bracket list followed by T(, or one whose product and not
// whose length is the mesh's device count.
bool IsIotaMeshDevices(const Scanner& s, int64_t n) {
  const std::string_view rest = s.Rest();
  if (rest.empty() || rest[0] != '[') return false;
  const size_t close = rest.find(']');
  if (close == std::string_view::npos) return false;
  int64_t count = 0, product = 1, value = -1;
  for (size_t i = 1; i <= close; ++i) {
    const char c = rest[i];
    if (c >= '0' && c <= '9') {
      value = std::min<int64_t>((value < 0 ? 0 : value) * 10 + (c - '0'), n + 1);
    } else if (c == ',' || c == ']') {
      if (value < 0) return false;
      product = std::min(product * value, n + 1);
      count += 1;
      value = -1;
    } else if (c != ' ') {
      return false;  // a nested list of ids
    }
  }
  const std::string_view after = rest.substr(close + 1);
  return (!after.empty() && after[0] == 'T') || (count != n && product == n);
}

// The devices of the mesh in its order: iota, or device_ids=(...): the ids (any nesting of brackets; the integers
// count), or the iota form "[reshape]T(perm)".
std::vector<int64_t> ReadMeshDevices(Scanner& s, int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  const size_t at = s.pos();
  if (!s.TryConsume(',')) return ids;
  if (s.TryName() != "device_ids" || !s.TryConsume('=')) s.FailAt(at, "expected device_ids=(...) after the mesh");
  s.Expect('(', "to open device_ids");
  ids.clear();
  s.SkipSpace();
  const bool iota = IsIotaMeshDevices(s, n);
  if (iota) {
    ids = ReadReshapeTranspose(s);
    s.Expect(')', "to close device_ids");
  }
  while (!iota && !s.TryConsume(')')) {
    s.SkipSpace();
    const char c = s.Peek();
    if (c == '[' || c == ']' || c == '{' || c == '}' || c == ',') {
      s.set_pos(s.pos() + 1);
      continue;
    }
    ids.push_back(s.Int("a device id"));
    if (static_cast<int64_t>(ids.size()) > n) break;
  }
  if (static_cast<int64_t>(ids.size()) != n) s.FailAt(at, fmt::format("device_ids must list the mesh's {} devices", n));
  return ids;
}

// Groups of the mesh devices that differ only in `axes` (in that order): XLA's MeshAxesReplicaGroupList.
ReplicaGroups MeshAxesGroups(Scanner& s, size_t at, const std::vector<int64_t>& sizes, const std::vector<int64_t>& ids,
                             const std::vector<AxisRef>& axes) {
  std::vector<int64_t> dims, grouped(axes.size(), -1);
  for (size_t d = 0; d < sizes.size(); ++d) {
    std::vector<size_t> refs;  // the axes on dimension d, by pre_size
    for (size_t a = 0; a < axes.size(); ++a) {
      if (axes[a].dim == static_cast<int64_t>(d)) refs.push_back(a);
    }
    std::sort(refs.begin(), refs.end(), [&](size_t x, size_t y) { return axes[x].pre_size < axes[y].pre_size; });
    int64_t prefix = 1;
    for (size_t a : refs) {
      if (axes[a].size == 0) {
        grouped[a] = static_cast<int64_t>(dims.size());
        dims.push_back(sizes[d]);
        prefix = sizes[d];
        continue;
      }
      if (axes[a].pre_size % prefix != 0) s.FailAt(at, "sub-axes of one mesh axis overlap");
      if (axes[a].pre_size != prefix) dims.push_back(axes[a].pre_size / prefix);
      grouped[a] = static_cast<int64_t>(dims.size());
      dims.push_back(axes[a].size);
      prefix = axes[a].pre_size * axes[a].size;
    }
    if (prefix == 0 || sizes[d] % prefix != 0) s.FailAt(at, fmt::format("sub-axes do not divide mesh axis {}", d));
    if (prefix != sizes[d]) dims.push_back(sizes[d] / prefix);
  }
  std::vector<int64_t> perm;
  int64_t group_size = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (std::find(grouped.begin(), grouped.end(), static_cast<int64_t>(d)) == grouped.end())
      perm.push_back(static_cast<int64_t>(d));
  }
  for (size_t a = 0; a < axes.size(); ++a) {
    perm.push_back(grouped[a]);
    group_size *= dims[grouped[a]];
  }
  const std::vector<int64_t> order = ExpandIota(s, at, dims, perm);
  ReplicaGroups groups;
  for (size_t k = 0; k < order.size(); k += static_cast<size_t>(group_size)) {
    auto& g = groups.emplace_back();
    for (size_t j = 0; j < static_cast<size_t>(group_size); ++j) g.push_back(ids[order[k + j]]);
  }
  return groups;
}

// "mesh['x'=2,'y'=4](, device_ids=(...)) {'x', 'y':(1)2}"
ReplicaGroups ReadMeshAxesGroups(Scanner& s) {
  const size_t at = s.pos();
  s.Name("mesh");
  s.Expect('[', "after mesh");
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  do {
    names.push_back(ReadAxisName(s));
    s.Expect('=', "after a mesh axis name");
    sizes.push_back(s.Int("a mesh axis size"));
    if (sizes.back() < 1 || names.size() > static_cast<size_t>(kMaxRank)) s.Fail("bad mesh axis");
  } while (s.TryConsume(','));
  s.Expect(']', "to close the mesh");
  const std::vector<int64_t> ids = ReadMeshDevices(s, Product(s, sizes, "a mesh"));
  s.Expect('{', "to open the grouped mesh axes");
  std::vector<AxisRef> axes;
  while (!s.TryConsume('}')) {
    if (!axes.empty()) s.Expect(',', "between grouped mesh axes");
    const std::string name = ReadAxisName(s);
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) s.Fail(fmt::format("mesh axis '{}' is not in the mesh", name));
    AxisRef ref{it - names.begin()};
    if (s.TryConsume(':')) {
      s.Expect('(', "to open a sub-axis pre-size");
      ref.pre_size = s.Int("a sub-axis pre-size");
      s.Expect(')', "after a sub-axis pre-size");
      ref.size = s.Int("a sub-axis size");
      if (ref.pre_size < 1 || ref.size < 1) s.Fail("sub-axis sizes must be >= 1");
    }
    axes.push_back(ref);
    if (axes.size() > static_cast<size_t>(kMaxRank)) s.Fail("too many grouped axes");
  }
  return MeshAxesGroups(s, at, sizes, ids, axes);
}

}  // namespace

ReplicaGroups ReadReplicaGroups(Scanner& s) {
  s.SkipSpace();
  ReplicaGroups groups;
  if (s.Rest().substr(0, 5) == "mesh[") return ReadMeshAxesGroups(s);
  if (s.Peek() == '[') {  // iota form: [num_groups,group_size]<=[dims]T(perm)
    const size_t at = s.pos();
    std::vector<int64_t> shape = ReadBracketList(s, "replica group shape");
    if (shape.size() != 2) s.FailAt(at, "iota replica groups need [num_groups,group_size]");
    const int64_t n = Product(s, shape, "replica groups");
    std::vector<int64_t> ids = ReadIotaDevices(s);
    if (static_cast<int64_t>(ids.size()) != n) {
      s.FailAt(at, fmt::format("replica groups [{},{}] need {} ids; the iota list has {}", shape[0], shape[1], n,
                               ids.size()));
    }
    for (int64_t g = 0; g < shape[0]; ++g) {
      groups.emplace_back(ids.begin() + g * shape[1], ids.begin() + (g + 1) * shape[1]);
    }
    return groups;
  }
  s.Expect('{', "to open replica_groups={...}");
  if (s.TryConsume('}')) return groups;
  do {
    groups.push_back(ReadIntList(s, "replica group"));
    if (groups.size() > static_cast<size_t>(kMaxIotaDevices)) s.Fail("too many replica groups");
  } while (s.TryConsume(','));
  s.Expect('}', "to close replica_groups={...}");
  return groups;
}

std::vector<std::pair<int64_t, int64_t>> ReadPairs(Scanner& s) {
  s.Expect('{', "to open source_target_pairs={...}");
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (s.TryConsume('}')) return pairs;
  do {
    const size_t at = s.pos();
    std::vector<int64_t> p = ReadIntList(s, "source-target pair");
    if (p.size() != 2) s.FailAt(at, "a source-target pair is {source,target}");
    pairs.emplace_back(p[0], p[1]);
    if (pairs.size() > static_cast<size_t>(kMaxIotaDevices)) s.Fail("too many source-target pairs");
  } while (s.TryConsume(','));
  s.Expect('}', "to close source_target_pairs={...}");
  return pairs;
}

Sharding ReadSharding(Scanner& s, int depth) {
  if (depth > kMaxNesting) s.Fail("sharding nests too deeply");
  s.Expect('{', "to open a sharding");
  Sharding out;
  s.SkipSpace();
  if (s.Peek() == '{' || s.Peek() == '}') {  // a tuple sharding (possibly empty)
    out.kind = Sharding::Kind::kTuple;
    if (s.TryConsume('}')) return out;
    do {
      out.tuple.push_back(ReadSharding(s, depth + 1));
    } while (s.TryConsume(','));
    s.Expect('}', "to close a tuple sharding");
    return out;
  }
  while (!s.TryConsume('}')) {
    const size_t at = s.pos();
    std::string_view word = s.TryName();
    if (word.empty())
      s.Fail(fmt::format("expected a sharding (replicated, maximal, manual, devices=...), found {}", s.Found()));
    if (word == "replicated") {
      out.kind = Sharding::Kind::kReplicated;
    } else if (word == "manual") {
      out.kind = Sharding::Kind::kManual;
    } else if (word == "unknown") {
      out.kind = Sharding::Kind::kUnknown;
    } else if (word == "maximal") {
      out.kind = Sharding::Kind::kMaximal;
      if (s.TryName() != "device" || !s.TryConsume('=')) s.Fail("expected device=N after maximal");
      out.maximal_device = s.Int("device id");
    } else if (word == "devices") {
      s.Expect('=', "after devices");
      ReadTiledSharding(s, &out);
    } else if (word == "last_tile_dim_replicate") {
      out.subgroup_dims = 1;
    } else if (word == "last_tile_dims") {
      s.Expect('=', "after last_tile_dims");
      s.Expect('{', "to open last_tile_dims");
      do {
        s.Name("subgroup type (manual, replicated)");
        ++out.subgroup_dims;
      } while (s.TryConsume(','));
      s.Expect('}', "to close last_tile_dims");
    } else {
      s.set_pos(at);
      SkipShardingExtra(s);
    }
    s.TryConsume(',');
  }
  if (out.kind == Sharding::Kind::kTiled && out.subgroup_dims > static_cast<int>(out.tile_dims.size())) {
    s.Fail("more subgroup dimensions than tile dimensions");
  }
  return out;
}

void ReadMetadata(Scanner& s, Attributes* a) {
  s.Expect('{', "to open metadata={...}");
  while (!s.TryConsume('}')) {
    std::string_view key = s.Name("a metadata field");
    s.Expect('=', fmt::format("after metadata field {}", key));
    s.SkipSpace();
    if (key == "op_name") {
      a->op_name = s.QuotedString("op_name");
    } else if (key == "op_type") {
      a->op_type = s.QuotedString("op_type");
    } else if (key == "source_file") {
      a->source_file = s.QuotedString("source_file");
    } else if (key == "scheduling_name") {
      a->scheduling_name = s.QuotedString("scheduling_name");
    } else if (key == "deduplicated_name") {
      a->deduplicated_name = s.QuotedString("deduplicated_name");
    } else if (key == "source_line") {
      a->source_line = s.Int("source_line");
    } else if (key == "stack_frame_id") {
      const size_t at = s.pos();
      a->stack_frame_id = s.Int("stack_frame_id");
      if (a->stack_frame_id < 0) s.FailAt(at, "stack_frame_id must be >= 0");
    } else {
      s.RawValue("metadata field");  // source_end_line, source_column, profile_type, preserve_layout, ...
    }
    s.TryConsume(',');  // older texts separate the items with commas
  }
}

std::map<std::string, std::string> ReadFrontendAttributes(Scanner& s) {
  s.Expect('{', "to open frontend_attributes={...}");
  std::map<std::string, std::string> out;
  while (!s.TryConsume('}')) {
    if (!out.empty()) s.Expect(',', "between frontend attributes");
    s.SkipSpace();
    const size_t at = s.pos();
    std::string key(s.Name("a frontend attribute name"));
    s.Expect('=', fmt::format("after frontend attribute {}", key));
    s.SkipSpace();
    std::string value;
    if (s.Peek() == '"') {
      value = s.QuotedString(key);
    } else {
      auto [b, e] = s.RawValue(key);
      value = ValidUtf8(s.text().substr(b, e - b));
    }
    if (!out.emplace(std::move(key), std::move(value)).second) s.FailAt(at, "a frontend attribute is given twice");
    if (out.size() > (size_t{1} << 16)) s.Fail("too many frontend attributes");
  }
  return out;
}

namespace {

// "(n, {shape index}" after '(' ... for both aliasing forms.
void ReadAliasTarget(Scanner& s, std::string_view what, int64_t* number, std::vector<int64_t>* index) {
  s.Expect('(', fmt::format("to open {} (number, {{shape index}})", what));
  s.SkipSpace();
  const size_t at = s.pos();
  *number = s.Int(fmt::format("the {} number", what));
  if (*number < 0) s.FailAt(at, fmt::format("the {} number must be >= 0", what));
  s.Expect(',', fmt::format("after the {} number", what));
  *index = ReadIntList(s, "a shape index");
}

}  // namespace

std::vector<OutputOperandAlias> ReadOutputOperandAliasing(Scanner& s) {
  s.Expect('{', "to open output_to_operand_aliasing={...}");
  std::vector<OutputOperandAlias> out;
  while (!s.TryConsume('}')) {
    if (!out.empty()) s.Expect(',', "between aliasing entries");
    OutputOperandAlias& alias = out.emplace_back();
    alias.output_index = ReadIntList(s, "the output shape index");
    s.Expect(':', "after the output shape index ({output}: (operand, {operand index}))");
    ReadAliasTarget(s, "operand", &alias.operand_number, &alias.operand_index);
    s.Expect(')', "to close an aliasing entry");
    if (out.size() > (size_t{1} << 16)) s.Fail("too many aliasing entries");
  }
  return out;
}

std::vector<InputOutputAlias> ReadInputOutputAliases(Scanner& s) {
  s.Expect('{', "to open input_output_alias={...}");
  std::vector<InputOutputAlias> out;
  while (!s.TryConsume('}')) {
    if (!out.empty()) s.Expect(',', "between aliases");
    InputOutputAlias& alias = out.emplace_back();
    alias.output_index = ReadIntList(s, "the output shape index");
    s.Expect(':', "after the output shape index ({output}: (parameter, {index}, may-alias))");
    ReadAliasTarget(s, "parameter", &alias.parameter_number, &alias.parameter_index);
    if (s.TryConsume(',')) {
      s.SkipSpace();
      const size_t at = s.pos();
      const std::string_view kind = s.Name("the alias kind (may-alias or must-alias)");
      if (kind != "may-alias" && kind != "must-alias") {
        s.FailAt(at, fmt::format("alias kind {} is not may-alias or must-alias", QuoteForError(kind)));
      }
      alias.must_alias = kind == "must-alias";
    }
    s.Expect(')', "to close an alias");
    if (out.size() > (size_t{1} << 16)) s.Fail("too many aliases");
  }
  return out;
}

ComparisonDirection ReadDirection(Scanner& s) {
  std::string_view w = s.Name("a comparison direction");
  if (w == "EQ") return ComparisonDirection::kEq;
  if (w == "NE") return ComparisonDirection::kNe;
  if (w == "LT") return ComparisonDirection::kLt;
  if (w == "LE") return ComparisonDirection::kLe;
  if (w == "GT") return ComparisonDirection::kGt;
  if (w == "GE") return ComparisonDirection::kGe;
  s.Fail(fmt::format("unknown comparison direction {}; valid: EQ, NE, LT, LE, GT, GE", QuoteForError(w)));
}

ComparisonType ReadComparisonType(Scanner& s) {
  std::string_view w = s.Name("a comparison type");
  if (w == "FLOAT") return ComparisonType::kFloat;
  if (w == "TOTALORDER") return ComparisonType::kTotalOrder;
  if (w == "SIGNED") return ComparisonType::kSigned;
  if (w == "UNSIGNED") return ComparisonType::kUnsigned;
  s.Fail(fmt::format("unknown comparison type {}; valid: FLOAT, TOTALORDER, SIGNED, UNSIGNED", QuoteForError(w)));
}

}  // namespace spmdsim::hlo::internal
