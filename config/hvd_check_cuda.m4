# hvd_check_cuda.m4: CUDA (runtime, cuBLAS, nvcc), optional.
#
# --with-cuda[=DIR]  guess (default): use DIR=$CUDA_HOME or /usr/local/cuda
#                    when it works; yes or DIR: fail when it does not;
#                    no: build without.
# --with-cuda-arch   compute capabilities to build for, "75 80 86 89 90";
#                    ones this nvcc does not know are dropped with a warning.
# Substitutes NVCC, NVCC_GENCODE, CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS
# (cuBLAS for models/backend_cuda.c, cudart, and libstdc++ for nvcc's host
# code); defines HVD_HAVE_CUDA to 0 or 1 and the automake conditional
# HAVE_CUDA. Without cuBLAS, CUDA is unusable (the warning or error names
# what was missing): libhvd.a's models need it in every CUDA build.

AC_DEFUN([HVD_CHECK_CUDA], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
                        [build CUDA support (default: guess;
                         DIR=$CUDA_HOME or /usr/local/cuda)])],
        [], [with_cuda=guess])
    AC_ARG_WITH([cuda-arch],
        [AS_HELP_STRING([--with-cuda-arch="75 80 ..."],
                        [GPU compute capabilities (default: "75 80 86 89 90")])],
        [], [with_cuda_arch="75 80 86 89 90"])
    AC_ARG_VAR([NVCC], [CUDA compiler])

    cuda_happy=no
    CUDA_CPPFLAGS=""
    CUDA_LDFLAGS=""
    CUDA_LIBS=""
    NVCC_GENCODE=""
    cuda_missing=""
    AS_IF([test "x$with_cuda" != xno], [
        AS_CASE(["$with_cuda"],
                [yes|guess], [cuda_dir="${CUDA_HOME:-/usr/local/cuda}"],
                [cuda_dir="$with_cuda"])
        AS_IF([test -d "$cuda_dir/lib64"], [cuda_libdir="$cuda_dir/lib64"],
              [cuda_libdir="$cuda_dir/lib"])
        # -isystem: warnings from CUDA's headers are not ours.
        CUDA_CPPFLAGS="-isystem $cuda_dir/include"
        CUDA_LDFLAGS="-L$cuda_libdir -Wl,-rpath,$cuda_libdir"

        save_CPPFLAGS="$CPPFLAGS"
        save_LDFLAGS="$LDFLAGS"
        save_LIBS="$LIBS"
        CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
        LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
        cuda_happy=yes
        AS_IF([test -d "$cuda_dir"], [],
              [cuda_happy=no cuda_missing="the directory"])
        AS_IF([test "x$cuda_happy" = xyes],
              [AC_CHECK_HEADER([cuda_runtime.h], [],
                               [cuda_happy=no cuda_missing="cuda_runtime.h"])])
        AS_IF([test "x$cuda_happy" = xyes],
              [AC_CHECK_LIB([cudart], [cudaGetDeviceCount],
                            [CUDA_LIBS="-lcudart -lstdc++"],
                            [cuda_happy=no cuda_missing="libcudart"])])
        AS_IF([test "x$cuda_happy" = xyes],
              [AC_CHECK_HEADER([cublas_v2.h], [],
                               [cuda_happy=no cuda_missing="cublas_v2.h"])])
        AS_IF([test "x$cuda_happy" = xyes],
              [AC_CHECK_LIB([cublas], [cublasCreate_v2],
                            [CUDA_LIBS="-lcublas $CUDA_LIBS"],
                            [cuda_happy=no cuda_missing="libcublas"])])
        AS_IF([test "x$cuda_happy" = xyes],
              [AC_PATH_PROG([NVCC], [nvcc], [no], [$cuda_dir/bin:$PATH])
               AS_IF([test "x$NVCC" = xno],
                     [cuda_happy=no cuda_missing="nvcc"])])
        CPPFLAGS="$save_CPPFLAGS"
        LDFLAGS="$save_LDFLAGS"
        LIBS="$save_LIBS"

        # One SASS per arch, plus PTX of the newest for GPUs not yet made.
        AS_IF([test "x$cuda_happy" = xyes], [
            AC_MSG_CHECKING([for nvcc -gencode flags])
            known_archs=`$NVCC --list-gpu-arch 2>/dev/null | sed 's/compute_//'`
            cuda_archs=""
            for arch in $with_cuda_arch; do
                AS_IF([test -n "$known_archs" &&
                       ! echo "$known_archs" | grep -qx "$arch"],
                      [AC_MSG_WARN([nvcc does not support sm_$arch; skipped])],
                      [cuda_archs="$cuda_archs $arch"
                       ptx_arch="$arch"
                       NVCC_GENCODE="$NVCC_GENCODE -gencode=arch=compute_$arch,code=sm_$arch"])
            done
            AS_IF([test -n "$cuda_archs"],
                  [NVCC_GENCODE="$NVCC_GENCODE -gencode=arch=compute_$ptx_arch,code=compute_$ptx_arch"],
                  [cuda_happy=no cuda_missing="an arch from --with-cuda-arch"])
            AC_MSG_RESULT([${NVCC_GENCODE:-none}])
        ])

        AS_IF([test "x$cuda_happy" != xyes], [
            CUDA_CPPFLAGS=""
            CUDA_LDFLAGS=""
            CUDA_LIBS=""
            AS_IF([test "x$with_cuda" = xguess],
                  [AC_MSG_WARN([CUDA not usable in $cuda_dir (no $cuda_missing): building without it])],
                  [AC_MSG_ERROR([CUDA was requested but was not usable in $cuda_dir:
no $cuda_missing (needed: cuda_runtime.h, libcudart, cublas_v2.h, libcublas,
nvcc, an arch from --with-cuda-arch).
Give --with-cuda=DIR for another toolkit or --without-cuda.])])
        ])
    ])

    AS_IF([test "x$cuda_happy" = xyes], [hvd_have_cuda=1], [hvd_have_cuda=0])
    AC_DEFINE_UNQUOTED([HVD_HAVE_CUDA], [$hvd_have_cuda],
                       [1 when built with CUDA, else 0; test with #if])
    AM_CONDITIONAL([HAVE_CUDA], [test "x$cuda_happy" = xyes])
    AC_SUBST([CUDA_CPPFLAGS])
    AC_SUBST([CUDA_LDFLAGS])
    AC_SUBST([CUDA_LIBS])
    AC_SUBST([NVCC_GENCODE])
])
