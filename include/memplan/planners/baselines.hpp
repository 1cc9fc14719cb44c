#pragma once
/// \file
/// The classic baselines, the one header to include for them: vDNN
/// (`vdnn-conv`, `vdnn-all`), Chen et al.'s sqrt(n) `checkpoint` and
/// `superneurons`; their shared emitter is baselines/common.hpp.

#include "memplan/planners/baselines/checkpoint.hpp"
#include "memplan/planners/baselines/superneurons.hpp"
#include "memplan/planners/baselines/vdnn.hpp"
