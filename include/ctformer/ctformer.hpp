// ctformer — a Transformer decoder layer as a C++20 type. Include this one header.
#pragma once
#include "checkpoint.hpp"
#include "config.hpp"
#include "dropout.hpp"
#include "huge_pages.hpp"
#include "kv_cache.hpp"
#include "layer.hpp"
#include "masks.hpp"
#include "models/gpt.hpp"
#include "optim.hpp"
#include "params.hpp"
#include "policies.hpp"
#include "roles.hpp"
#include "safetensors.hpp"
#include "stack.hpp"
#include "status.hpp"
#include "tensor.hpp"

namespace ct = ctformer;
