// capability/ — the host's model of what an operator needs and what a kernel offers.
//
// Offers: the vocabulary's names both ways (vocabulary.hpp), an owning operator
// description and its ABI view with the features it uses (op.hpp), device and kernel
// envelopes as values with their JSON form, and the host-side envelope match that yields
// every refusal (envelope.hpp). Depends on abi/ only; knows nothing of loading.
#pragma once

#include "core/capability/envelope.hpp"
#include "core/capability/op.hpp"
#include "core/capability/vocabulary.hpp"
