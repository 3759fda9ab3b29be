/* The CUDA kernels as a module (precfuzz-cuda.so: the kernels' .cu files and core/cuda_device.cu),
 * loaded when a run first uses the CUDA backend (cuda_module.c), so that runs on the CPU do not
 * load the CUDA libraries. The module hands the executable a table: its device description and
 * its entry points by name, each kernel's .cu adding its own (PF_CUDA_ENTRY); each operation's
 * host side (kernels/<op>/<op>_cpu.c) fetches its entry with pf_cuda_entry. The executable
 * hands the module pf_error and whatever else the kernels call back (it exports its symbols). */
#ifndef PF_CUDA_MODULE_H
#define PF_CUDA_MODULE_H

#include <stddef.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever the table, an entry's signature or a launch structure changes: a module
 * from another build is refused, not called. */
#define PF_CUDA_MODULE_ABI 2

typedef struct {
  int abi;
  pf_status (*describe)(char *buf, size_t len);
  void *(*entry)(const char *name); /* the entry point of that name, or NULL */
} pf_cuda_module;

/* The module's one exported symbol. */
const pf_cuda_module *pf_cuda_module_get(void);

/* In the module: adds an entry point (returns 0; PF_CUDA_ENTRY calls it at load time). */
int pf_cuda_module_add(const char *name, void *fn);
#define PF_CUDA_ENTRY(fn) static const int pf_cuda_entry_##fn = pf_cuda_module_add(#fn, (void *)&fn);

/* In the executable: the module's entry point name, the module loaded on first use;
 * PF_ERR_NODEVICE with the reason when there is no module or no such entry. */
pf_status pf_cuda_entry(const char *name, void **fn);

#ifdef __cplusplus
}
#endif
#endif
