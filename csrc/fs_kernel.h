/* fs_kernel.h: compiler switches shared by the vectorised kernel files
 * (fs_glm.c, fs_network.c, fs_mlp.c, fs_greville.c).  Private to csrc/.
 *
 * FS_CLONES: function multi-versioning.  GCC >= 11 on x86-64 with glibc
 *   (ifunc) compiles a hot kernel for x86-64-v4 (AVX-512 F/BW/CD/DQ/VL,
 *   with FMA), x86-64-v3 (AVX2 + FMA) and the baseline, and picks one at
 *   load time, so a portable -O3 wheel still runs AVX2 / AVX-512 code;
 *   elsewhere (or with FS_NO_TARGET_CLONES) one generic version.  A bare
 *   "avx512f" target would not do: it enables neither FMA for 256-bit
 *   vectors nor AVX-512VL, so the kernels' 4-wide code ran unfused there.
 * FS__INLINE: helpers called from the multi-versioned kernels must be
 *   inlined into them, or they would run the baseline ISA (and pass
 *   vectors in memory).
 */
#ifndef FS_KERNEL_H
#define FS_KERNEL_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__GLIBC__) && (__GNUC__ >= 11) && !defined(FS_NO_TARGET_CLONES)
#  define FS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#  define FS_CLONES
#endif

#if defined(__GNUC__) || defined(__clang__)
#  define FS__INLINE static inline __attribute__((always_inline))
#else
#  define FS__INLINE static inline
#endif

#endif /* FS_KERNEL_H */
