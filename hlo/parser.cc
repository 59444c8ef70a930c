#include "hlo/parser.h"

#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/ranges.h>

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
        if (d < 1 || d > kMaxLayoutValue)
          s.FailAt(at, fmt::format("tile dimension {} is outside 1..{}", d, kMaxLayoutValue));
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
  if (s.Peek() != '(')
    s.FailAt(begin,
             "expected a layout item (T(...), E(n), S(n), L(n), #(type), *(type), SC(...), P(shape), M(n), D(...))");
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
    module_->stack_frames_ = internal::ReadDebugInfo(s_);
    while (true) {
      s_.SkipSpace();
      if (s_.AtEnd()) break;
      ParseComputation();
    }
    if (module_->computations_.empty()) s_.Fail("the module has no computation");
    if (module_->entry_ == nullptr) {
      Computation* last = module_->computations_.back().get();
      last->is_entry_ = true;
      module_->entry_ = last;
    }
    CheckInputOutputAliases();
    return std::move(module_);
  }

 private:
  // An attribute of an instruction: its name and where its value is in the text.
  struct PendingAttr {
    std::string key;
    size_t key_at = 0, begin = 0, end = 0;
  };

  // ---- the header ----

  void ParseHeader() {
    s_.SkipSpace();
    if (s_.TryName() != "HloModule")
      s_.Fail(fmt::format("expected 'HloModule name' at the start, found {}", s_.Found()));
    module_->name_ = std::string(s_.Name("the module's name"));
    while (true) {
      s_.SkipBlanks();
      if (s_.Peek() != ',') break;
      s_.set_pos(s_.pos() + 1);
      s_.SkipBlanks();
      std::string key(s_.Name("a module attribute"));
      s_.Expect('=', fmt::format("after module attribute {}", key));
      auto [b, e] = s_.RawValue(key);
      module_->header_.emplace_back(key, internal::ValidUtf8(source_.text.substr(b, e - b)));
      ApplyHeaderAttribute(key, b, e);
    }
  }

  void ApplyHeaderAttribute(const std::string& key, size_t b, size_t e) {
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
    } else if (key == "input_output_alias") {
      module_->input_output_aliases_ = internal::ReadInputOutputAliases(v);
      input_output_alias_at_ = b;
    } else if (key == "frontend_attributes") {
      for (auto& [k, value] : internal::ReadFrontendAttributes(v)) module_->frontend_attributes_.emplace(k, value);
    } else {
      return;
    }
    v.SkipSpace();
    if (!v.AtEnd()) v.Fail(fmt::format("unexpected text after {}", key));
  }

  // input_output_alias: every output index names an array of the entry's result, every parameter (index) one of
  // its parameters, of the same shape (xla/hlo/ir/hlo_input_output_alias_config.cc SetUpAlias and Verify).
  void CheckInputOutputAliases() {
    const Computation* entry = module_->entry_;
    for (const InputOutputAlias& a : module_->input_output_aliases_) {
      auto fail = [&](const std::string& why) {
        s_.FailAt(input_output_alias_at_, fmt::format("input_output_alias {{{}}}: ({}, {{{}}}): {}",
                                                      fmt::join(a.output_index, ","), a.parameter_number,
                                                      fmt::join(a.parameter_index, ","), why));
      };
      if (a.parameter_number >= entry->parameter_count()) {
        fail(fmt::format("%{} has no parameter {} (it has {})", entry->name(), a.parameter_number,
                         entry->parameter_count()));
      }
      const Shape* out = Subshape(entry->root()->shape(), a.output_index);
      const Shape* in = Subshape(entry->parameter(a.parameter_number)->shape(), a.parameter_index);
      if (out == nullptr) fail(fmt::format("the result {} has no such output", entry->root()->shape().ToString()));
      if (in == nullptr) fail(fmt::format("parameter {} ({}) has no such index", a.parameter_number,
                                          entry->parameter(a.parameter_number)->shape().ToString()));
      if (!out->IsArray() || !out->Compatible(*in)) {
        fail(fmt::format("the output is {} and the parameter {}; an alias needs one array shape", out->ToString(),
                         in->ToString()));
      }
    }
  }

  static const Shape* Subshape(const Shape& shape, const std::vector<int64_t>& index) {
    const Shape* s = &shape;
    for (int64_t i : index) {
      if (!s->IsTuple() || i < 0 || i >= static_cast<int64_t>(s->tuple.size())) return nullptr;
      s = &s->tuple[static_cast<size_t>(i)];
    }
    return s;
  }

  // ---- computations ----

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
    ParseComputationTrailer(c);
    FinishComputation(c, at);
    AddComputation(std::move(computation));
  }

  // After '}': ", execution_thread="sparsecore"" (XLA's only computation attribute).
  void ParseComputationTrailer(Computation* c) {
    while (true) {
      s_.SkipBlanks();
      if (s_.Peek() != ',') break;
      s_.set_pos(s_.pos() + 1);
      s_.SkipBlanks();
      const size_t at = s_.pos();
      const std::string_view key = s_.Name("a computation attribute");
      if (key != "execution_thread") {
        s_.FailAt(at, fmt::format("unknown computation attribute {}; valid: execution_thread", QuoteForError(key)));
      }
      s_.Expect('=', "after execution_thread");
      c->execution_thread_ = s_.QuotedString("execution_thread");
    }
  }

  void AddComputation(std::unique_ptr<Computation> computation) {
    module_->by_name_[computation->name_] = computation.get();
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

  // ---- instructions ----

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
    const std::optional<Opcode> wrapped = ReadOpcode(ins);
    ParseOperands(ins);
    const std::vector<PendingAttr> attrs = ReadAttributes();
    if (wrapped.has_value() && ins->opcode_ == Opcode::kAsyncStart) {
      WrapAsync(ins, *wrapped, attrs, op_at);
      for (const PendingAttr& a : attrs) ApplyAttribute(ins, a, /*raw_only=*/!IsAsyncStartAttribute(a.key));
    } else {
      if (wrapped.has_value()) InheritWrapped(ins, *wrapped);
      for (const PendingAttr& a : attrs) ApplyAttribute(ins, a, /*raw_only=*/false);
      InheritAsyncComputation(ins);
    }
    if (root) {
      if (c->root_ != nullptr) s_.FailAt(at, fmt::format("computation %{} has two ROOT instructions", c->name_));
      c->root_ = ins;
    }
    ins->index_ = static_cast<int32_t>(c->instructions_.size());
    names_[ins->name_] = ins;
    c->instructions_.push_back(std::move(instruction));
  }

  // The opcode; for XLA's async shorthand `X-start` / `X-update` / `X-done` of an X that has no opcode of that
  // name (reduce-scatter-start, slice-start, call-start, ...), async-start / -update / -done and X.
  std::optional<Opcode> ReadOpcode(Instruction* ins) {
    const size_t at = s_.pos();
    const std::string_view op = s_.Name("an opcode");
    if (ParseOpcode(op, &ins->opcode_)) return std::nullopt;
    constexpr std::pair<std::string_view, Opcode> kForms[] = {
        {"-start", Opcode::kAsyncStart}, {"-update", Opcode::kAsyncUpdate}, {"-done", Opcode::kAsyncDone}};
    for (const auto& [suffix, async] : kForms) {
      Opcode wrapped = Opcode::kAdd;
      if (!op.ends_with(suffix) || !ParseOpcode(op.substr(0, op.size() - suffix.size()), &wrapped)) continue;
      if (wrapped == Opcode::kParameter || wrapped == Opcode::kConstant || wrapped == Opcode::kAsyncStart ||
          wrapped == Opcode::kAsyncUpdate || wrapped == Opcode::kAsyncDone) {
        s_.FailAt(at, fmt::format("{} cannot run asynchronously ({}{} is not an opcode)", OpcodeName(wrapped),
                                  OpcodeName(wrapped), suffix));
      }
      ins->opcode_ = async;
      return wrapped;
    }
    s_.FailAt(at, fmt::format("unknown opcode {}: not one of XLA's (add, dot, fusion, all-reduce, ...)",
                              QuoteForError(op)));
  }

  // The attributes whose meaning is the async-start's own when it is written `X-start(...)`; the others belong to
  // the wrapped X (metadata, backend_config and frontend_attributes to both, as XLA's parser gives them).
  static bool IsAsyncStartAttribute(std::string_view key) {
    return key == "metadata" || key == "backend_config" || key == "frontend_attributes" || key == "sharding" ||
           key == "async_execution_thread" || key == "output_to_operand_aliasing" || key == "control-predecessors";
  }
  static bool IsWrappedAttribute(std::string_view key) {
    return key != "async_execution_thread" && key != "output_to_operand_aliasing" && key != "control-predecessors" &&
           key != "sharding";
  }

  // `X-start(operands), attributes`: an async-start calling a computation made here, as XLA's parser makes it:
  // parameters for the operands, and X with the start's result (its shape's element 1) and X's attributes as root.
  void WrapAsync(Instruction* start, Opcode wrapped_op, const std::vector<PendingAttr>& attrs, size_t op_at) {
    const Shape& shape = start->shape_;
    if (!shape.IsTuple() || shape.tuple.size() < 2 || !shape.tuple[0].IsTuple()) {
      s_.FailAt(op_at, fmt::format("{}-start must produce ((operands...), result, context...), not {}",
                                   OpcodeName(wrapped_op), shape.ToString()));
    }
    auto computation = std::make_unique<Computation>();
    Computation* c = computation.get();
    c->module_ = module_.get();
    c->location_ = start->location_;
    c->is_async_wrapped_ = true;
    c->name_ = UniqueComputationName(start->name_ + ".async_wrapped");
    auto add = [&](std::string name, Opcode op, Shape s) {
      auto i = std::make_unique<Instruction>();
      i->name_ = std::move(name);
      i->opcode_ = op;
      i->shape_ = std::move(s);
      i->location_ = start->location_;
      i->parent_ = c;
      i->index_ = static_cast<int32_t>(c->instructions_.size());
      c->instructions_.push_back(std::move(i));
      return c->instructions_.back().get();
    };
    std::vector<const Instruction*> params;
    for (size_t i = 0; i < start->operands_.size(); ++i) {
      Instruction* p = add(fmt::format("async_param.{}", i), Opcode::kParameter, start->operands_[i]->shape_);
      p->attrs_.parameter_number = static_cast<int64_t>(i);
      params.push_back(p);
    }
    Instruction* root = add(start->name_, wrapped_op, shape.tuple[1]);
    root->operands_ = std::move(params);
    for (const PendingAttr& a : attrs) {
      if (IsWrappedAttribute(a.key)) ApplyAttribute(root, a, /*raw_only=*/false);
    }
    c->root_ = root;
    FinishComputation(c, op_at);
    start->called_.push_back(c);
    AddComputation(std::move(computation));
  }

  std::string UniqueComputationName(const std::string& base) {
    std::string name = base;
    for (int k = 1; module_->by_name_.count(name) > 0; ++k) name = fmt::format("{}.{}", base, k);
    return name;
  }

  // `X-update(%start)` / `X-done(%start)`: the operand must be an async-start (or -update) wrapping X.
  void InheritWrapped(Instruction* ins, Opcode wrapped_op) {
    const std::string form = fmt::format("{}-{}", OpcodeName(wrapped_op),
                                         ins->opcode_ == Opcode::kAsyncUpdate ? "update" : "done");
    if (ins->operands_.size() != 1) {
      s_.FailAt(operand_at_.empty() ? s_.pos() : operand_at_[0],
                fmt::format("{} takes one operand, the {}-start (or -update)", form, OpcodeName(wrapped_op)));
    }
    const Instruction* from = ins->operands_[0];
    const Instruction* wrapped = AsyncWrapped(*from);
    if (from->opcode_ == Opcode::kAsyncDone || wrapped == nullptr || wrapped->opcode_ != wrapped_op) {
      s_.FailAt(operand_at_[0], fmt::format("{}'s operand %{} is {}, not a {}-start", form, from->name_,
                                            wrapped != nullptr && from->opcode_ != Opcode::kAsyncDone
                                                ? fmt::format("an async {}", OpcodeName(wrapped->opcode_))
                                                : fmt::format("a {}", OpcodeName(from->opcode_)),
                                            OpcodeName(wrapped_op)));
    }
  }

  // async-update / async-done call what their async-start calls (XLA: they share its wrapped computation).
  static void InheritAsyncComputation(Instruction* ins) {
    if (ins->opcode_ != Opcode::kAsyncUpdate && ins->opcode_ != Opcode::kAsyncDone) return;
    if (!ins->called_.empty() || ins->operands_.size() != 1) return;
    const Instruction* from = ins->operands_[0];
    if (from->opcode_ == Opcode::kAsyncStart || from->opcode_ == Opcode::kAsyncUpdate) ins->called_ = from->called_;
  }

  void ParseOperands(Instruction* ins) {
    operand_at_.clear();
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
    operand_at_.push_back(s_.pos());
    return LookupInstruction(s_, "operand");
  }

  // %name of an instruction defined above in this computation.
  const Instruction* LookupInstruction(Scanner& v, std::string_view role) {
    v.SkipSpace();
    const size_t at = v.pos();
    std::string_view name = v.Name(fmt::format("an {} name", role));
    auto it = names_.find(name);
    if (it == names_.end()) {
      v.FailAt(at, fmt::format("{} %{} is not defined above its use in this computation", role, name));
    }
    return it->second;
  }

  std::vector<PendingAttr> ReadAttributes() {
    std::vector<PendingAttr> attrs;
    std::set<std::string, std::less<>> seen;
    while (true) {
      s_.SkipSpace();
      if (s_.Peek() != ',') return attrs;
      s_.set_pos(s_.pos() + 1);
      s_.SkipSpace();
      PendingAttr a;
      a.key_at = s_.pos();
      a.key = std::string(s_.Name("an attribute name"));
      if (!seen.insert(a.key).second) s_.FailAt(a.key_at, fmt::format("attribute {} is given twice", a.key));
      s_.Expect('=', fmt::format("after attribute {}", a.key));
      std::tie(a.begin, a.end) = a.key == "replica_groups" ? MeshValue() : s_.RawValue(a.key);
      attrs.push_back(std::move(a));
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

  // ---- attributes ----

  void ApplyAttribute(Instruction* ins, const PendingAttr& pending, bool raw_only) {
    ins->attrs_.raw.emplace_back(pending.key,
                                 internal::ValidUtf8(source_.text.substr(pending.begin, pending.end - pending.begin)));
    if (raw_only) return;
    Scanner v(source_, pending.begin, pending.end);
    const std::string& key = pending.key;
    Attributes& a = ins->attrs_;
    if (ApplyComputationAttribute(ins, key, v) || ApplyDimsAttribute(a, key, v) || ApplyScalarAttribute(ins, key, v) ||
        ApplyStructuredAttribute(ins, key, v)) {
      // typed
    } else {
      return;  // kept as text only
    }
    v.SkipSpace();
    if (!v.AtEnd()) v.Fail(fmt::format("unexpected text in attribute {}: {}", key, v.Found()));
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
    else if (key == "cross_program_prefetch_index") a.cross_program_prefetch_index = v.Int(key);
    else if (key == "k") a.topk_k = v.Int(key);
    else if (key == "largest") a.topk_largest = internal::ReadBool(v, key);
    else if (key == "is_stable") a.is_stable = internal::ReadBool(v, key);
    else if (key == "indices_are_sorted") a.indices_are_sorted = internal::ReadBool(v, key);
    else if (key == "unique_indices") a.unique_indices = internal::ReadBool(v, key);
    else if (key == "use_global_device_ids") a.use_global_device_ids = internal::ReadBool(v, key);
    else if (key == "is_host_transfer") a.is_host_transfer = internal::ReadBool(v, key);
    else if (key == "custom_call_has_side_effect") a.custom_call_has_side_effect = internal::ReadBool(v, key);
    else if (key == "api_version") a.api_version = std::string(v.Name(key));
    else if (key == "async_execution_thread") a.async_execution_thread = v.QuotedString(key);
    else if (key == "direction") a.direction = internal::ReadDirection(v);
    else if (key == "type" && ins->opcode_ == Opcode::kCompare) a.comparison_type = internal::ReadComparisonType(v);
    else if (key == "kind" && ins->opcode_ == Opcode::kFusion) a.fusion_kind = std::string(v.Name(key));
    else if (key == "custom_call_target") a.custom_call_target = v.QuotedString(key);
    else if (key == "algorithm" && ins->opcode_ == Opcode::kRngBitGenerator) a.rng_algorithm = std::string(v.Name(key));
    else if (key == "distribution") a.rng_distribution = std::string(v.Name(key));
    else return false;
    return true;
  }

  bool ApplyStructuredAttribute(Instruction* ins, const std::string& key, Scanner& v) {
    Attributes& a = ins->attrs_;
    if (key == "slice") {
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
      internal::ReadMetadata(v, &a);
    } else if (key == "frontend_attributes") {
      a.frontend_attributes = internal::ReadFrontendAttributes(v);
    } else if (key == "backend_config") {
      internal::ReadBackendConfig(v, &a);
    } else if (key == "output_to_operand_aliasing") {
      a.output_to_operand_aliasing = internal::ReadOutputOperandAliasing(v);
    } else if (key == "operand_layout_constraints") {
      v.Expect('{', "to open operand_layout_constraints");
      while (!v.TryConsume('}')) {
        if (!a.operand_layout_constraints.empty()) v.Expect(',', "between operand layouts");
        a.operand_layout_constraints.push_back(internal::ReadShape(v, 0));
        if (a.operand_layout_constraints.size() > (size_t{1} << 16)) v.Fail("too many operand layouts");
      }
    } else if (key == "control-predecessors") {
      v.Expect('{', "to open control-predecessors");
      while (!v.TryConsume('}')) {
        if (!ins->control_predecessors_.empty()) v.Expect(',', "between control predecessors");
        ins->control_predecessors_.push_back(LookupInstruction(v, "control predecessor"));
      }
    } else {
      return false;
    }
    return true;
  }

  Source source_;
  Scanner s_;
  std::unique_ptr<Module> module_;
  std::map<std::string, const Instruction*, std::less<>> names_;  // of the computation being parsed
  std::vector<size_t> operand_at_;   // where each operand of the instruction being parsed is written
  size_t input_output_alias_at_ = 0;  // where the header's input_output_alias value starts
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
