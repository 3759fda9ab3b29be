/* Libraries that --kernels must refuse with one line (tests/plugin.sh), one per PF_BAD_*:
 * no pf_plugin_init, an init that registers nothing, a kernel of another ABI, an init that fails. */
#include "kernels/kernel.h"

#if defined(PF_BAD_NO_INIT)
int pf_plugin_something_else(void) { return 0; }
#elif defined(PF_BAD_EMPTY)
pf_status pf_plugin_init(void) { return PF_OK; }
#elif defined(PF_BAD_ABI)
static pf_kernel k;
pf_status pf_plugin_init(void) {
  k = *pf_kernel_find("softmax", "safe");
  k.abi = 99;
  k.variant = "other-abi";
  return pf_kernel_register(&k);
}
#else
pf_status pf_plugin_init(void) { return pf_error(PF_ERR_ARG, "this library refuses to register"); }
#endif
