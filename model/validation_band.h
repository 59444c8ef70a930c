// The measured error band of a prediction: the signed gaps of the published runs of docs/model-validation.md of
// the prediction's class (hardware generation x software stack x parallelism), so that a report can say
// "7.9 s (validated: -4%..+9% on 12 H100 x megatron x TP/PP/CP runs)" instead of leaving the discount to the reader.
//
// The bands are computed from the validation rows themselves (model/validation.h), not copied: the bench program
// prints them (build/dev/bench/model/model_validation --bands > model/validation_bands.inc), the library compiles
// that file in (computing every row takes seconds, too long for a report), and a test regenerates it and fails
// when the checked-in file differs.
//
// Example: ValidationBand b = FindValidationBand(ClassifyModelRun(model));
//          ValidationBandText(b) == "validated: -4%..+9% on 12 H100 x megatron x TP/PP/CP runs (9 enforced)"
// Thread safety: free functions over values and a constant table; safe to call concurrently.
#ifndef SPMDSIM_MODEL_VALIDATION_BAND_H_
#define SPMDSIM_MODEL_VALIDATION_BAND_H_

#include <cstdint>
#include <string>
#include <vector>

namespace spmdsim {

class ValidatedModel;

// The class a run is validated in. One function (ClassifyModelRun) classifies the validation rows and a user's
// scenario alike.
struct ValidationClass {
  std::string hardware;     // the device generation: "A100", "H100", "TPU v5e", "CPU" (from the topology preset)
  std::string stack;        // the resolved software stack: "megatron", "pytorch-fsdp", "maxtext"
  // "MoE/EP" (an expert degree above 1), "TP/PP/CP" (pipeline stages, or tensor / context parallelism without
  // ZeRO-3), "FSDP/ZeRO-3" (ZeRO-3 over more than one rank, tensor parallelism beside it or not), "data-only".
  std::string parallelism;
  // "H100 x megatron x TP/PP/CP".
  std::string Key() const { return hardware + " x " + stack + " x " + parallelism; }
};

// The class of `model` on its mesh's topology. REQUIRES: the mesh has a topology.
ValidationClass ClassifyModelRun(const ValidatedModel& model);

inline constexpr const char* kValidationBandSource = "docs/model-validation.md";

// One class's band over its rows of docs/model-validation.md (the validation table and the checks on unseen
// runs). rows == 0: no published run of the class; the gaps are then 0 and mean nothing.
struct ValidationBand {
  std::string class_key;       // ValidationClass::Key()
  int64_t rows = 0;            // published runs of the class
  int64_t enforced_rows = 0;   // of them, held within kModelValidationTolerance by the test
  double min_gap = 0, max_gap = 0, mean_gap = 0;  // predicted / measured - 1 over the rows
  bool validated() const { return rows > 0; }
};

// One validation row as the bands see it: its class, gap and whether it is enforced.
struct ValidationBandRow {
  std::string class_key;
  double gap = 0;
  bool enforced = false;
};
// One band per class present in `rows`, sorted by class key.
std::vector<ValidationBand> ComputeValidationBands(const std::vector<ValidationBandRow>& rows);
// The C++ initializer rows of model/validation_bands.inc (gaps rounded to 0.01%), with its heading comment.
std::string FormatValidationBandsInc(const std::vector<ValidationBand>& bands);

// The bands compiled in from model/validation_bands.inc.
const std::vector<ValidationBand>& CheckedInValidationBands();
// The checked-in band of `cls`; rows == 0 (class_key set) when no published run is of that class.
ValidationBand FindValidationBand(const ValidationClass& cls);

// "validated: -4%..+9% on 12 H100 x megatron x TP/PP/CP runs (9 enforced)", or
// "not validated: no published run of class H200 x megatron x data-only".
std::string ValidationBandText(const ValidationBand& band);

}  // namespace spmdsim

#endif  // SPMDSIM_MODEL_VALIDATION_BAND_H_
