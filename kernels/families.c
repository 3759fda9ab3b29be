/* The built-in families, one line each, in the order they are listed, swept and reported:
 * kernels/<op>/ defines pf_<name>_kernels, its variants (NULL-terminated), each pointing at the
 * family's pf_op. Adding a family is its folder, its oracle, its test data and a line here
 * (docs/adding-a-kernel-family.md). The core's registry (core/registry.c) reads the table. */
#include "core/kernel.h"

#define PF_BUILTIN_OPS(X) \
  X(softmax)              \
  X(softmax_bwd)          \
  X(cross_entropy)        \
  X(layernorm)            \
  X(rmsnorm)              \
  X(layernorm_bwd)        \
  X(rmsnorm_bwd)          \
  X(rope)                 \
  X(gelu)                 \
  X(swiglu)               \
  X(attention_bwd)        \
  X(attention)            \
  X(adam)                 \
  X(clip)                 \
  X(loss_scale)           \
  X(schedule)             \
  X(tp)

#define PF_DECLARE(name) extern const pf_kernel *const pf_##name##_kernels[];
PF_BUILTIN_OPS(PF_DECLARE)
#define PF_TABLE(name) pf_##name##_kernels,
const pf_kernel *const *const pf_builtin_families[] = {PF_BUILTIN_OPS(PF_TABLE) NULL};
