#include "hlo/verify.h"

#include <fmt/format.h>

#include "common/error.h"
#include "hlo/internal/verifier.h"

namespace spmdsim::hlo {

void Verify(const Module& module) { internal::Verifier(module, /*allow_mixed_precision=*/true).Run(); }

bool IsMixedPrecision(const Instruction& ins, std::string* why) {
  const Module* module = ins.parent() != nullptr ? ins.parent()->module() : nullptr;
  if (module == nullptr) return false;
  try {
    internal::Verifier(*module, /*allow_mixed_precision=*/false).VerifyOne(ins);
  } catch (const Error& e) {
    // The detail, without the "file:line:col: %name (opcode): " the caller gives itself.
    const std::string prefix = fmt::format("{}: %{} ({}): ", ins.Where(), ins.name(), OpcodeName(ins.opcode()));
    *why = e.message().starts_with(prefix) ? e.message().substr(prefix.size()) : e.message();
    return true;
  }
  return false;
}

}  // namespace spmdsim::hlo
