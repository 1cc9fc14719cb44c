#pragma once
/// \file
/// `vdnn-conv`, `vdnn-all`, `checkpoint` and `superneurons`, the classic
/// baselines: vDNN (Rhu et al., MICRO 2016), sqrt(n) checkpointing (Chen
/// et al., 2016) and SuperNeurons (Wang et al., PPoPP 2018); their shared
/// emitter is baselines/common.hpp.

#include "memplan/planners/baselines/checkpoint.hpp"
#include "memplan/planners/baselines/superneurons.hpp"
#include "memplan/planners/baselines/vdnn.hpp"
