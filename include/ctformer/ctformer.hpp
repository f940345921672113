// ctformer — a Transformer decoder layer as a C++20 type. Include this one header.
#pragma once
#include "core/dropout.hpp"
#include "core/huge_pages.hpp"
#include "core/masks.hpp"
#include "core/reflect.hpp"
#include "core/status.hpp"
#include "core/tensor.hpp"
#include "io/adapters.hpp"
#include "io/checkpoint.hpp"
#include "io/file.hpp"
#include "io/state_dict.hpp"
#include "layer/config.hpp"
#include "layer/kv_cache.hpp"
#include "layer/layer.hpp"
#include "layer/roles.hpp"
#include "models/gpt.hpp"
#include "models/llama.hpp"
#include "models/stack.hpp"
#include "modules/activations.hpp"
#include "modules/norm.hpp"
#include "train/optim.hpp"

namespace ct = ctformer;
