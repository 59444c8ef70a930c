// Which compiler made a module: XLA's CPU, TPU (libtpu) or GPU (CUDA) backend, read from what each prints and the
// others do not. What spmdsim assumes differs by compiler: XLA CPU widens bf16 / f16 to f32 (predict.h's narrow
// types undo it on a TPU or GPU topology; a TPU or GPU module already holds the narrow types), and each backend
// aligns its buffers differently (memory.h).
//
//   TPU   tiled layouts or memory spaces ({1,0:T(8,128)(2,1)S(1)}), or TPU custom-call targets (AllocateBuffer, ...)
//   GPU   Triton / cuBLAS / cuDNN fusions and custom-calls, GPU backend configs (collective_backend_config,
//         fusion_backend_config, operation_queue_id)
//   CPU   XLA CPU's backend configs (outer_dimension_partitions) and fusions (__ynn_fusion, __onednn)
//   otherwise kUnknown (a module written by hand, or one with nothing that tells).
//
// Thread safety: pure.
#ifndef SPMDSIM_HLO_COMPILED_FOR_H_
#define SPMDSIM_HLO_COMPILED_FOR_H_

#include <string_view>

#include "hlo/ir.h"

namespace spmdsim::hlo {

enum class CompiledFor { kUnknown, kCpu, kTpu, kGpu };
std::string_view CompiledForName(CompiledFor c);  // "unknown", "cpu", "tpu", "gpu"

CompiledFor CompiledForOf(const Module& module);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_COMPILED_FOR_H_
