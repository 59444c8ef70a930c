#include "hlo/verify.h"

#include "hlo/internal/verifier.h"

namespace spmdsim::hlo {

void Verify(const Module& module) { internal::Verifier(module).Run(); }

}  // namespace spmdsim::hlo
