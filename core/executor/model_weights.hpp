// Weights of a Hugging Face checkpoint for the executor: each graph weight value is found in
// the safetensors file under its Hugging Face name, checked against the config's shape and
// converted between f32 and bf16 when the run's dtype differs from the file's.
#pragma once

#include <string>

#include "core/executor/weight_loader.hpp"
#include "core/weights/weights.hpp"

namespace sy {

// A WeightLoader reading `file` (which must outlive it) for a model of `model_type`. Errors
// name the tensor and what is wrong (missing, shape or dtype mismatch with the config).
WeightLoader safetensors_weight_loader(const SafetensorsFile& file, const std::string& model_type);

}  // namespace sy
