#include "hlo/parser.h"

#include <map>
#include <set>
#include <utility>

#include "common/error.h"
#include "common/file.h"
#include "common/shape.h"
#include "common/user_text.h"
#include "hlo/internal/scanner.h"
#include "hlo/verify.h"

namespace spmdsim::hlo {

using internal::Scanner;
using internal::Source;

namespace internal {

namespace {

// "[2,3]" after the element type, with bounded dynamic dimensions refused.
std::vector<int64_t> ReadDims(Scanner& s) {
  s.Expect('[', "to open the dimensions");
  std::vector<int64_t> dims;
  if (s.TryConsume(']')) return dims;
  do {
    s.SkipSpace();
    if (s.Peek() == '<' || s.Peek() == '?') s.Fail("dynamic dimensions are not supported; give static shapes");
    const int64_t d = s.Int("a dimension");
    if (d < 0) s.Fail(fmt::format("dimension {} is negative", d));
    dims.push_back(d);
    if (dims.size() > static_cast<size_t>(kMaxRank)) s.Fail(fmt::format("rank above {} is not supported", kMaxRank));
  } while (s.TryConsume(','));
  s.Expect(']', "to close the dimensions");
  return dims;
}

// The largest tile dimension, memory space or element size a layout may name.
constexpr int64_t kMaxLayoutValue = int64_t{1} << 31;

// "(n)" after a layout item's letter: a small non-negative integer.
int64_t ReadLayoutNumber(Scanner& s, std::string_view what) {
  if (s.Peek() != '(') s.Fail(fmt::format("expected '(' after {} in a layout, found {}", what, s.Found()));
  s.set_pos(s.pos() + 1);
  const size_t at = s.pos();
  const int64_t n = s.Int(what);
  if (n < 0 || n > kMaxLayoutValue) s.FailAt(at, fmt::format("{} {} is outside 0..{}", what, n, kMaxLayoutValue));
  if (s.Peek() != ')') s.Fail(fmt::format("expected ')' to close {}, found {}", what, s.Found()));
  s.set_pos(s.pos() + 1);
  return n;
}

// "T(8,128)(2,1)" after the 'T': one or more tiles, each dimension a positive integer or '*'.
std::vector<std::vector<int64_t>> ReadTiles(Scanner& s) {
  std::vector<std::vector<int64_t>> tiles;
  if (s.Peek() != '(') s.Fail(fmt::format("expected '(' after T in a layout (T(8,128)), found {}", s.Found()));
  while (s.Peek() == '(') {
    s.set_pos(s.pos() + 1);
    auto& tile = tiles.emplace_back();
    while (true) {
      if (s.Peek() == '*') {
        s.set_pos(s.pos() + 1);
        tile.push_back(Shape::kCombinedTileDimension);
      } else {
        const size_t at = s.pos();
        const int64_t d = s.Int("a tile dimension");
        if (d < 1 || d > kMaxLayoutValue) s.FailAt(at, fmt::format("tile dimension {} is outside 1..{}", d, kMaxLayoutValue));
        tile.push_back(d);
      }
      if (tile.size() > static_cast<size_t>(kMaxRank)) s.Fail("a tile has too many dimensions");
      const char c = s.Peek();
      if (c != ',' && c != ')') s.Fail(fmt::format("expected ',' or ')' in a tile, found {}", s.Found()));
      s.set_pos(s.pos() + 1);
      if (c == ')') break;
    }
    if (tiles.size() > static_cast<size_t>(kMaxRank)) s.Fail("a layout has too many tiles");
  }
  return tiles;
}

// A layout item kept as text: its letters and one or more balanced "(...)" groups on this line.
std::string ReadOtherLayoutItem(Scanner& s) {
  const size_t begin = s.pos();
  while (s.Peek() != '(' && s.Peek() != '}' && s.Peek() != '\n' && !s.AtEnd() && s.pos() - begin < 2) {
    s.set_pos(s.pos() + 1);
  }
  if (s.Peek() != '(') s.FailAt(begin, "expected a layout item (T(...), E(n), S(n), L(n), #(type), *(type), SC(...), P(shape), M(n), D(...))");
  while (s.Peek() == '(') {
    int depth = 0;
    do {
      const char c = s.Peek();
      if (s.AtEnd() || c == '\n') s.FailAt(begin, "unterminated layout item");
      if (c == '(' || c == '{' || c == '[') ++depth;
      if (c == ')' || c == '}' || c == ']') --depth;
      if (depth > kMaxNesting) s.Fail("layout item nests too deeply");
      s.set_pos(s.pos() + 1);
    } while (depth > 0);
  }
  return std::string(s.text().substr(begin, s.pos() - begin));
}

// The items after ':' in a layout (xla/layout.cc prints them: T(...) L(n) #(t) *(t) E(n) S(n) SC(...) P(...)
// M(n)), up to the closing '}'.
void ReadLayoutItems(Scanner& s, Shape* shape) {
  while (!s.AtEnd() && s.Peek() != '}') {
    const size_t at = s.pos();
    const char c = s.Peek();
    const char next = s.PeekAt(1);
    if (c == 'T' && next == '(') {
      if (!shape->tiles.empty()) s.FailAt(at, "a layout has one T(...)");
      s.set_pos(at + 1);
      shape->tiles = ReadTiles(s);
    } else if (c == 'E' && next == '(') {
      s.set_pos(at + 1);
      shape->element_size_in_bits = ReadLayoutNumber(s, "the element size E(n)");
    } else if (c == 'S' && next == '(') {
      s.set_pos(at + 1);
      shape->memory_space = ReadLayoutNumber(s, "the memory space S(n)");
    } else if (c == 'L' || c == '#' || c == '*' || c == 'M' || c == 'D' || c == 'P' || (c == 'S' && next == 'C')) {
      shape->other_layout.push_back(ReadOtherLayoutItem(s));
      if (shape->other_layout.size() > 16) s.FailAt(at, "a layout has too many items");
    } else {
      s.Fail(fmt::format("expected a layout item (T(...), E(n), S(n), L(n), #(type), *(type), SC(...), P(shape), "
                         "M(n), D(...)) or '}}', found {}", s.Found()));
    }
  }
}

// Where the layout opened at `open` closes: the matching '}' on the same line (npos when there is none).
size_t LayoutEnd(std::string_view text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size() && text[i] != '\n'; ++i) {
    const char c = text[i];
    if (c == '{' || c == '(' || c == '[') ++depth;
    if (c == '}' || c == ')' || c == ']') --depth;
    if (depth == 0) return i;
  }
  return std::string_view::npos;
}

// "{1,0}", "{1,0:T(8,128)(2,1)S(1)}", "{:S(2)}" (a scalar). A layout is written on one line.
void ReadLayout(Scanner& outer, Shape* shape) {
  const int rank = shape->rank();
  const size_t at = outer.pos();
  const size_t close = LayoutEnd(outer.text(), at);
  if (close == std::string_view::npos || close >= at + outer.Rest().size()) {
    outer.FailAt(at, "unterminated layout: no matching '}' on this line");
  }
  Scanner s(outer.source(), at, close + 1);
  s.Expect('{', "to open a layout");
  std::vector<int64_t> m;
  s.SkipSpace();
  while (s.Peek() != '}' && s.Peek() != ':') {
    if (!m.empty()) s.Expect(',', "between layout dimensions");
    m.push_back(s.Int("a layout dimension"));
    s.SkipSpace();
    if (m.size() > static_cast<size_t>(kMaxRank)) s.Fail("layout has too many dimensions");
  }
  if (s.Peek() == ':') {
    s.set_pos(s.pos() + 1);
    ReadLayoutItems(s, shape);
  }
  s.Expect('}', "to close a layout");
  outer.set_pos(s.pos());
  if (!m.empty() && static_cast<int>(m.size()) != rank) {
    s.FailAt(at, fmt::format("layout has {} dimensions; the shape has {}", m.size(), rank));
  }
  std::vector<bool> seen(m.size(), false);
  for (int64_t d : m) {
    if (d < 0 || d >= rank || seen[d]) s.FailAt(at, fmt::format("layout must be a permutation of 0..{}", rank - 1));
    seen[d] = true;
  }
  shape->minor_to_major = std::move(m);
}

}  // namespace

Shape ReadShape(Scanner& s, int depth) {
  if (depth > kMaxNesting) s.Fail("shape nests too deeply");
  s.SkipSpace();
  if (s.Peek() == '(') {
    s.set_pos(s.pos() + 1);
    std::vector<Shape> elements;
    if (!s.TryConsume(')')) {
      do {
        elements.push_back(ReadShape(s, depth + 1));
      } while (s.TryConsume(','));
      s.Expect(')', "to close a tuple shape");
    }
    return Shape::Tuple(std::move(elements));
  }
  const size_t at = s.pos();
  std::string_view type = s.TryName();
  if (type.empty()) s.Fail(fmt::format("expected a shape (f32[2,3], (s32[], f32[]), token[]), found {}", s.Found()));
  if (type == "token") {
    if (s.TryConsume('[')) s.Expect(']', "after token[");
    return Shape::Token();
  }
  DType dtype = DType::kF32;
  if (!ParseHloType(type, &dtype)) {
    s.FailAt(at, fmt::format("unknown element type {}; valid: {}", QuoteForError(type), HloTypeNames()));
  }
  Shape shape = Shape::Array(dtype, ReadDims(s));
  if (ElementCountOverflows(shape.dims, DTypeSize(dtype))) s.FailAt(at, "the shape's size overflows 64 bits");
  if (s.Peek() == '{') ReadLayout(s, &shape);
  return shape;
}

}  // namespace internal

class Parser {
 public:
  Parser(std::string_view text, std::string file) : source_(text, std::move(file)), s_(source_) {}

  std::unique_ptr<Module> Parse() {
    module_ = std::make_unique<Module>();
    module_->file_ = source_.file;
    ParseHeader();
    while (true) {
      s_.SkipSpace();
      if (s_.AtEnd()) break;
      if (SkipDebugSection()) continue;
      ParseComputation();
    }
    if (module_->computations_.empty()) s_.Fail("the module has no computation");
    if (module_->entry_ == nullptr) {
      Computation* last = module_->computations_.back().get();
      last->is_entry_ = true;
      module_->entry_ = last;
    }
    return std::move(module_);
  }

 private:
  struct PendingAttr {
    std::string key;
    size_t begin = 0, end = 0;
  };

  void ParseHeader() {
    s_.SkipSpace();
    if (s_.TryName() != "HloModule") s_.Fail(fmt::format("expected 'HloModule name' at the start, found {}", s_.Found()));
    module_->name_ = std::string(s_.Name("the module's name"));
    while (true) {
      s_.SkipBlanks();
      if (s_.Peek() != ',') break;
      s_.set_pos(s_.pos() + 1);
      s_.SkipBlanks();
      const size_t key_at = s_.pos();
      std::string key(s_.Name("a module attribute"));
      s_.Expect('=', fmt::format("after module attribute {}", key));
      auto [b, e] = s_.RawValue(key);
      module_->header_.emplace_back(key, std::string(source_.text.substr(b, e - b)));
      ApplyHeaderAttribute(key, key_at, b, e);
    }
  }

  void ApplyHeaderAttribute(const std::string& key, size_t key_at, size_t b, size_t e) {
    Scanner v(source_, b, e);
    if (key == "num_partitions" || key == "replica_count") {
      const int64_t n = v.Int(key);
      if (n < 1 || n > 65536) v.FailAt(b, fmt::format("{} must be from 1 to 65536, not {}", key, n));
      (key == "num_partitions" ? module_->num_partitions_ : module_->replica_count_) = n;
    } else if (key == "is_scheduled") {
      module_->is_scheduled_ = internal::ReadBool(v, key);
    } else if (key == "entry_computation_layout") {
      v.Expect('{', "to open entry_computation_layout");
      v.Expect('(', "to open the parameter layouts");
      if (!v.TryConsume(')')) {
        do {
          module_->entry_parameter_layouts_.push_back(internal::ReadShape(v, 0));
        } while (v.TryConsume(','));
        v.Expect(')', "to close the parameter layouts");
      }
      if (!v.TryConsume("->")) v.Fail("expected '->' before the result layout");
      module_->entry_result_layout_ = internal::ReadShape(v, 0);
      v.Expect('}', "to close entry_computation_layout");
    } else {
      return;
    }
    v.SkipSpace();
    if (!v.AtEnd()) v.Fail(fmt::format("unexpected text after {}", key));
  }

  // FileNames / FunctionNames / FileLocations / StackFrames and their numbered lines.
  bool SkipDebugSection() {
    const size_t at = s_.pos();
    std::string_view word = s_.TryName();
    if (word != "FileNames" && word != "FunctionNames" && word != "FileLocations" && word != "StackFrames") {
      s_.set_pos(at);
      return false;
    }
    while (true) {
      s_.SkipSpace();
      if (s_.Peek() < '0' || s_.Peek() > '9') return true;
      while (!s_.AtEnd() && s_.Peek() != '\n') s_.set_pos(s_.pos() + 1);
    }
  }

  void ParseComputation() {
    auto computation = std::make_unique<Computation>();
    Computation* c = computation.get();
    c->module_ = module_.get();
    c->location_ = s_.LocationOf(s_.pos());
    const size_t at = s_.pos();
    std::string_view first = s_.Name("a computation ('[ENTRY] %name (params) -> shape {')");
    if (first == "ENTRY") {
      if (module_->entry_ != nullptr) s_.FailAt(at, "a second ENTRY computation");
      c->is_entry_ = true;
      module_->entry_ = c;
      c->name_ = std::string(s_.Name("the entry computation's name"));
    } else {
      c->name_ = std::string(first);
    }
    if (module_->by_name_.count(c->name_) > 0) s_.FailAt(at, fmt::format("computation %{} is defined twice", c->name_));
    if (s_.TryConsume('(')) SkipSignature();
    s_.Expect('{', fmt::format("to open computation %{}", c->name_));
    names_.clear();
    while (!s_.TryConsume('}')) {
      if (s_.AtEnd()) s_.Fail(fmt::format("computation %{} is not closed with '}}'", c->name_));
      ParseInstruction(c);
    }
    // After '}': optional ", execution_thread=..." attributes.
    while (true) {
      s_.SkipBlanks();
      if (s_.Peek() != ',') break;
      s_.set_pos(s_.pos() + 1);
      s_.Name("a computation attribute");
      s_.Expect('=', "after a computation attribute");
      s_.RawValue("a computation attribute");
    }
    FinishComputation(c, at);
    module_->by_name_[c->name_] = c;
    module_->computations_.push_back(std::move(computation));
  }

  // "(a: f32[], b: (s32[], f32[2])) -> f32[]" after '(' (the parameter instructions say the same).
  void SkipSignature() {
    if (!s_.TryConsume(')')) {
      do {
        s_.Name("a parameter name");
        s_.Expect(':', "after a parameter name");
        internal::ReadShape(s_, 0);
      } while (s_.TryConsume(','));
      s_.Expect(')', "to close the parameter list");
    }
    if (!s_.TryConsume("->")) s_.Fail(fmt::format("expected '->' and the result shape, found {}", s_.Found()));
    internal::ReadShape(s_, 0);
  }

  void FinishComputation(Computation* c, size_t at) {
    if (c->instructions_.empty()) s_.FailAt(at, fmt::format("computation %{} has no instructions", c->name_));
    if (c->root_ == nullptr) c->root_ = c->instructions_.back().get();
    for (const auto& i : c->instructions_) {
      for (const Instruction* o : i->operands_) {
        if (o->parent_ == c) c->instructions_[static_cast<size_t>(o->index_)]->users_.push_back(i.get());
      }
    }
    std::map<int64_t, const Instruction*> params;
    for (const auto& i : c->instructions_) {
      if (i->opcode_ != Opcode::kParameter) continue;
      const int64_t n = i->attrs_.parameter_number;
      if (!params.emplace(n, i.get()).second) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: parameter number {} is used twice in %{}", i->Where(), n, c->name_));
      }
    }
    int64_t expected = 0;
    for (const auto& [n, i] : params) {
      if (n != expected++) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: parameters of %{} must be numbered 0..{}; {} is missing", i->Where(), c->name_,
                                params.size() - 1, expected - 1));
      }
      c->parameters_.push_back(i);
    }
  }

  void ParseInstruction(Computation* c) {
    auto instruction = std::make_unique<Instruction>();
    Instruction* ins = instruction.get();
    const size_t at = s_.pos();
    ins->location_ = s_.LocationOf(at);
    ins->parent_ = c;
    std::string_view name = s_.Name("an instruction ('[ROOT] %name = shape opcode(...)')");
    bool root = false;
    if (name == "ROOT") {
      root = true;
      name = s_.Name("the root instruction's name");
    }
    ins->name_ = std::string(name);
    if (names_.count(ins->name_) > 0) s_.FailAt(at, fmt::format("instruction %{} is defined twice", ins->name_));
    s_.Expect('=', fmt::format("after %{}", ins->name_));
    ins->shape_ = internal::ReadShape(s_, 0);
    s_.SkipSpace();
    const size_t op_at = s_.pos();
    std::string_view op = s_.Name("an opcode");
    if (!ParseOpcode(op, &ins->opcode_)) {
      s_.FailAt(op_at, fmt::format("unknown opcode {}: not one of XLA's (add, dot, fusion, all-reduce, ...)",
                                   QuoteForError(op)));
    }
    ParseOperands(ins);
    ParseAttributes(ins);
    if (root) {
      if (c->root_ != nullptr) s_.FailAt(at, fmt::format("computation %{} has two ROOT instructions", c->name_));
      c->root_ = ins;
    }
    ins->index_ = static_cast<int32_t>(c->instructions_.size());
    names_[ins->name_] = ins;
    c->instructions_.push_back(std::move(instruction));
  }

  void ParseOperands(Instruction* ins) {
    s_.Expect('(', fmt::format("after opcode {}", OpcodeName(ins->opcode_)));
    if (ins->opcode_ == Opcode::kParameter) {
      ins->attrs_.parameter_number = s_.Int("the parameter number");
      if (ins->attrs_.parameter_number < 0) s_.Fail("parameter numbers start at 0");
      s_.Expect(')', "after the parameter number");
      return;
    }
    if (ins->opcode_ == Opcode::kConstant) {
      ins->literal_ = internal::ReadLiteral(s_, ins->shape_);
      s_.Expect(')', "after the constant's value");
      return;
    }
    if (s_.TryConsume(')')) return;
    do {
      ins->operands_.push_back(ParseOperand());
    } while (s_.TryConsume(','));
    s_.Expect(')', "to close the operand list");
  }

  const Instruction* ParseOperand() {
    s_.SkipSpace();
    if (s_.Peek() != '%') {
      // The older form "f32[2]{0} %x": a shape before the name.
      const size_t at = s_.pos();
      std::string_view word = s_.TryName();
      DType ignored;
      const bool is_shape = s_.Peek() == '(' || (s_.Peek() == '[' && (word == "token" || ParseHloType(word, &ignored)));
      s_.set_pos(at);
      if (is_shape || s_.Peek() == '(') internal::ReadShape(s_, 0);
    }
    s_.SkipSpace();
    const size_t at = s_.pos();
    std::string name(s_.Name("an operand name"));
    auto it = names_.find(name);
    if (it == names_.end()) {
      s_.FailAt(at, fmt::format("operand %{} is not defined above its use in this computation", name));
    }
    return it->second;
  }

  void ParseAttributes(Instruction* ins) {
    std::set<std::string> seen;
    while (true) {
      s_.SkipSpace();
      if (s_.Peek() != ',') return;
      s_.set_pos(s_.pos() + 1);
      s_.SkipSpace();
      const size_t key_at = s_.pos();
      std::string key(s_.Name("an attribute name"));
      if (!seen.insert(key).second) s_.FailAt(key_at, fmt::format("attribute {} is given twice", key));
      s_.Expect('=', fmt::format("after attribute {}", key));
      auto [b, e] = key == "replica_groups" ? MeshValue() : s_.RawValue(key);
      ins->attrs_.raw.emplace_back(key, std::string(source_.text.substr(b, e - b)));
      Scanner v(source_, b, e);
      ApplyAttribute(ins, key, v);
    }
  }

  // replica_groups in the mesh-axes form "mesh['x'=2,'y'=4], device_ids=(...) {'x'}" holds blanks and a comma
  // outside brackets; any other form is a plain value.
  std::pair<size_t, size_t> MeshValue() {
    s_.SkipSpace();
    if (s_.Rest().substr(0, 5) != "mesh[") return s_.RawValue("replica_groups");
    const size_t begin = s_.pos();
    const size_t open = s_.text().find('{', begin);
    const size_t line_end = s_.text().find('\n', begin);
    if (open == std::string_view::npos || open > line_end) s_.Fail("expected {axes} after the mesh in replica_groups");
    s_.set_pos(open);
    auto [b, e] = s_.RawValue("replica_groups");
    return {begin, e};
  }

  const Computation* LookupComputation(Scanner& v) {
    v.SkipSpace();
    const size_t at = v.pos();
    std::string_view name = v.Name("a computation name");
    auto it = module_->by_name_.find(name);
    if (it == module_->by_name_.end()) {
      v.FailAt(at, fmt::format("computation %{} is not defined above its use", name));
    }
    return it->second;
  }

  bool ApplyComputationAttribute(Instruction* ins, const std::string& key, Scanner& v) {
    if (key == "to_apply" || (key == "scatter" && ins->opcode_ == Opcode::kSelectAndScatter)) {
      ins->to_apply_ = LookupComputation(v);
      ins->called_.push_back(ins->to_apply_);
    } else if (key == "select") {
      ins->select_ = LookupComputation(v);
      ins->called_.push_back(ins->select_);
    } else if (key == "calls" || key == "condition" || key == "body" || key == "true_computation" ||
               key == "false_computation") {
      if (key == "calls" && v.TryConsume('{')) {
        do ins->called_.push_back(LookupComputation(v));
        while (v.TryConsume(','));
        v.Expect('}', "to close calls={...}");
      } else {
        ins->called_.push_back(LookupComputation(v));
      }
    } else if (key == "branch_computations" || key == "called_computations") {
      v.Expect('{', fmt::format("to open {}", key));
      if (!v.TryConsume('}')) {
        do ins->called_.push_back(LookupComputation(v));
        while (v.TryConsume(','));
        v.Expect('}', fmt::format("to close {}", key));
      }
    } else {
      return false;
    }
    return true;
  }

  bool ApplyDimsAttribute(Attributes& a, const std::string& key, Scanner& v) {
    std::vector<int64_t>* target = nullptr;
    if (key == "dimensions") target = &a.dimensions;
    else if (key == "dynamic_slice_sizes") target = &a.dynamic_slice_sizes;
    else if (key == "lhs_batch_dims") target = &a.dot.lhs_batch;
    else if (key == "lhs_contracting_dims") target = &a.dot.lhs_contracting;
    else if (key == "rhs_batch_dims") target = &a.dot.rhs_batch;
    else if (key == "rhs_contracting_dims") target = &a.dot.rhs_contracting;
    else if (key == "offset_dims") target = &a.gather.offset_dims;
    else if (key == "collapsed_slice_dims") target = &a.gather.collapsed_slice_dims;
    else if (key == "start_index_map") target = &a.gather.start_index_map;
    else if (key == "operand_batching_dims") target = &a.gather.operand_batching_dims;
    else if (key == "start_indices_batching_dims") target = &a.gather.start_indices_batching_dims;
    else if (key == "slice_sizes") target = &a.gather.slice_sizes;
    else if (key == "update_window_dims") target = &a.scatter.update_window_dims;
    else if (key == "inserted_window_dims") target = &a.scatter.inserted_window_dims;
    else if (key == "scatter_dims_to_operand_dims") target = &a.scatter.scatter_dims_to_operand_dims;
    else if (key == "input_batching_dims") target = &a.scatter.input_batching_dims;
    else if (key == "scatter_indices_batching_dims") target = &a.scatter.scatter_indices_batching_dims;
    if (target == nullptr) return false;
    *target = internal::ReadIntList(v, key);
    return true;
  }

  bool ApplyScalarAttribute(Instruction* ins, const std::string& key, Scanner& v) {
    Attributes& a = ins->attrs_;
    if (key == "feature_group_count") a.feature_group_count = v.Int(key);
    else if (key == "batch_group_count") a.batch_group_count = v.Int(key);
    else if (key == "index") a.index = v.Int(key);
    else if (key == "iota_dimension") a.iota_dimension = v.Int(key);
    else if (key == "index_vector_dim") a.gather.index_vector_dim = a.scatter.index_vector_dim = v.Int(key);
    else if (key == "exponent_bits") a.exponent_bits = v.Int(key);
    else if (key == "mantissa_bits") a.mantissa_bits = v.Int(key);
    else if (key == "channel_id") a.channel_id = v.Int(key);
    else if (key == "k") a.topk_k = v.Int(key);
    else if (key == "largest") a.topk_largest = internal::ReadBool(v, key);
    else if (key == "is_stable") a.is_stable = internal::ReadBool(v, key);
    else if (key == "indices_are_sorted") a.indices_are_sorted = internal::ReadBool(v, key);
    else if (key == "unique_indices") a.unique_indices = internal::ReadBool(v, key);
    else if (key == "use_global_device_ids") a.use_global_device_ids = internal::ReadBool(v, key);
    else if (key == "direction") a.direction = internal::ReadDirection(v);
    else if (key == "type" && ins->opcode_ == Opcode::kCompare) a.comparison_type = internal::ReadComparisonType(v);
    else if (key == "kind" && ins->opcode_ == Opcode::kFusion) a.fusion_kind = std::string(v.Name(key));
    else if (key == "custom_call_target") a.custom_call_target = v.QuotedString(key);
    else if (key == "algorithm" && ins->opcode_ == Opcode::kRngBitGenerator) a.rng_algorithm = std::string(v.Name(key));
    else if (key == "distribution") a.rng_distribution = std::string(v.Name(key));
    else return false;
    return true;
  }

  void ApplyAttribute(Instruction* ins, const std::string& key, Scanner& v) {
    Attributes& a = ins->attrs_;
    if (ApplyComputationAttribute(ins, key, v) || ApplyDimsAttribute(a, key, v) || ApplyScalarAttribute(ins, key, v)) {
      // typed
    } else if (key == "slice") {
      a.slice = internal::ReadSlice(v);
    } else if (key == "padding") {
      a.padding = internal::ReadPadding(v);
    } else if (key == "window") {
      a.window = internal::ReadWindow(v);
    } else if (key == "dim_labels") {
      int rank = 0;
      a.conv = internal::ReadDimLabels(v, &rank);
    } else if (key == "replica_groups") {
      a.has_replica_groups = true;
      a.replica_groups = internal::ReadReplicaGroups(v);
    } else if (key == "source_target_pairs") {
      a.source_target_pairs = internal::ReadPairs(v);
    } else if (key == "sharding") {
      a.sharding = internal::ReadSharding(v, 0);
    } else if (key == "metadata") {
      a.op_name = internal::ReadOpName(v);
    } else if (key == "backend_config" && ins->opcode_ == Opcode::kWhile) {
      a.known_trip_count = internal::ReadKnownTripCount(v.Rest());
      return;
    } else {
      return;  // kept as text only
    }
    v.SkipSpace();
    if (!v.AtEnd()) v.Fail(fmt::format("unexpected text in attribute {}: {}", key, v.Found()));
  }

  Source source_;
  Scanner s_;
  std::unique_ptr<Module> module_;
  std::map<std::string, const Instruction*, std::less<>> names_;  // of the computation being parsed
};

std::unique_ptr<Module> ParseModuleUnverified(std::string_view text, std::string file) {
  Parser parser(text, std::move(file));
  return parser.Parse();
}

std::unique_ptr<Module> ParseModule(std::string_view text, std::string file) {
  std::unique_ptr<Module> module = ParseModuleUnverified(text, std::move(file));
  Verify(*module);
  return module;
}

Shape ParseShape(std::string_view text) {
  const Source source(text, "<shape>");
  Scanner s(source);
  Shape shape = internal::ReadShape(s, 0);
  s.SkipSpace();
  if (!s.AtEnd()) s.Fail(fmt::format("unexpected text after the shape: {}", s.Found()));
  return shape;
}

std::unique_ptr<Module> LoadModule(const std::string& path) {
  const std::string text = ReadFileBounded(path, kMaxHloFileBytes, "HLO file");
  return ParseModule(text, path);
}

}  // namespace spmdsim::hlo
