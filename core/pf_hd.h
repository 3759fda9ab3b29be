/* PF_HD marks scalar math shared by the C emulation and the CUDA kernels. */
#ifndef PF_HD_H
#define PF_HD_H
#ifdef __CUDACC__
#define PF_HD __host__ __device__ __forceinline__
#else
#define PF_HD static inline
#endif
#endif
