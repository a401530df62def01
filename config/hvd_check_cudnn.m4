# hvd_check_cudnn.m4: cuDNN, optional, for the GPU's convolutions
# (models/conv_cudnn.c; without it they are im2col + cuBLAS). Only with
# CUDA.
#
# --with-cudnn[=DIR]  guess (default): use DIR=$CUDNN_HOME, else CUDA's
#                     folder, when it works; yes or DIR: fail when it does
#                     not; no: build without.
# DIR holds include/cudnn.h and lib64/ or lib/ with libcudnn. PyTorch's
# pip wheel (site-packages/nvidia/cudnn) has only the versioned
# libcudnn.so.N there, no libcudnn.so for -lcudnn: then the highest N is
# linked by its file name (-l:libcudnn.so.N). cuDNN 8 or newer.
# Run after HVD_CHECK_CUDA (reads cuda_happy, cuda_dir, CUDA_* flags).
# Substitutes CUDNN_CPPFLAGS, CUDNN_LDFLAGS, CUDNN_LIBS; defines
# HVD_HAVE_CUDNN to 0 or 1 and the automake conditional HAVE_CUDNN.

AC_DEFUN([HVD_CHECK_CUDNN], [
    AC_ARG_WITH([cudnn],
        [AS_HELP_STRING([--with-cudnn@<:@=DIR@:>@],
                        [cuDNN for the GPU's convolutions (default: guess;
                         DIR=$CUDNN_HOME or CUDA's; needs CUDA)])],
        [], [with_cudnn=guess])

    cudnn_happy=no
    cudnn_missing=""
    CUDNN_CPPFLAGS=""
    CUDNN_LDFLAGS=""
    CUDNN_LIBS=""
    AS_IF([test "x$with_cudnn" != xno && test "x$cuda_happy" != xyes], [
        AS_IF([test "x$with_cudnn" = xguess],
              [AC_MSG_NOTICE([no CUDA: building without cuDNN])],
              [AC_MSG_ERROR([cuDNN was requested but CUDA is not usable: cuDNN
needs it (see --with-cuda), or give --without-cudnn.])])
    ], [test "x$with_cudnn" != xno], [
        AS_CASE(["$with_cudnn"],
                [yes|guess], [cudnn_dir="${CUDNN_HOME:-$cuda_dir}"],
                [cudnn_dir="$with_cudnn"])
        AS_IF([test -d "$cudnn_dir/lib64"], [cudnn_libdir="$cudnn_dir/lib64"],
              [cudnn_libdir="$cudnn_dir/lib"])
        # CUDA's folder is already in CUDA's flags.
        AS_IF([test "x$cudnn_dir" != "x$cuda_dir"],
              [CUDNN_CPPFLAGS="-isystem $cudnn_dir/include"
               CUDNN_LDFLAGS="-L$cudnn_libdir -Wl,-rpath,$cudnn_libdir"])

        # -lcudnn, else the newest libcudnn.so.N by its file name.
        cudnn_lib=""
        AS_IF([test -e "$cudnn_libdir/libcudnn.so"], [cudnn_lib="-lcudnn"], [
            cudnn_so=`cd "$cudnn_libdir" 2>/dev/null &&
                ls libcudnn.so.* 2>/dev/null |
                grep -x 'libcudnn\.so\.[[0-9]][[0-9]]*' |
                sort -t. -k3,3n | tail -n 1`
            AS_IF([test -n "$cudnn_so"], [cudnn_lib="-l:$cudnn_so"])
        ])

        save_CPPFLAGS="$CPPFLAGS"
        save_LDFLAGS="$LDFLAGS"
        save_LIBS="$LIBS"
        CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS $CUDNN_CPPFLAGS"
        LDFLAGS="$LDFLAGS $CUDA_LDFLAGS $CUDNN_LDFLAGS"
        cudnn_happy=yes
        AS_IF([test -d "$cudnn_dir"], [],
              [cudnn_happy=no cudnn_missing="the directory"])
        # A compile test rather than AC_CHECK_HEADER: it checks the version.
        AS_IF([test "x$cudnn_happy" = xyes],
              [AC_MSG_CHECKING([for cudnn.h (cuDNN 8 or newer) in $cudnn_dir/include])
               AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cudnn.h>
#if CUDNN_MAJOR < 8
#error cuDNN 8 or newer is needed (CUDNN_FMA_MATH)
#endif]], [[cudnnHandle_t h; (void)h;]])],
                  [AC_MSG_RESULT([yes])],
                  [AC_MSG_RESULT([no])
                   cudnn_happy=no cudnn_missing="cudnn.h of cuDNN 8 or newer"])])
        AS_IF([test "x$cudnn_happy" = xyes && test -z "$cudnn_lib"],
              [cudnn_happy=no cudnn_missing="libcudnn.so or libcudnn.so.N in $cudnn_libdir"])
        AS_IF([test "x$cudnn_happy" = xyes],
              [AC_MSG_CHECKING([for cudnnCreate in $cudnn_lib])
               LIBS="$cudnn_lib $CUDA_LIBS $save_LIBS"
               AC_LINK_IFELSE([AC_LANG_CALL([], [cudnnCreate])],
                              [AC_MSG_RESULT([yes])
                               CUDNN_LIBS="$cudnn_lib"],
                              [AC_MSG_RESULT([no])
                               cudnn_happy=no
                               cudnn_missing="cudnnCreate in $cudnn_lib"])])
        CPPFLAGS="$save_CPPFLAGS"
        LDFLAGS="$save_LDFLAGS"
        LIBS="$save_LIBS"

        AS_IF([test "x$cudnn_happy" != xyes], [
            CUDNN_CPPFLAGS=""
            CUDNN_LDFLAGS=""
            CUDNN_LIBS=""
            AS_IF([test "x$with_cudnn" = xguess],
                  [AC_MSG_WARN([cuDNN not usable in $cudnn_dir (no $cudnn_missing): GPU convolutions are im2col + cuBLAS])],
                  [AC_MSG_ERROR([cuDNN was requested but was not usable in $cudnn_dir:
no $cudnn_missing (needed: include/cudnn.h of cuDNN 8 or newer, and
lib64/ or lib/ with libcudnn.so or libcudnn.so.N). For PyTorch's wheel give
--with-cudnn=SITE-PACKAGES/nvidia/cudnn; or --without-cudnn.])])
        ])
    ])

    AS_IF([test "x$cudnn_happy" = xyes], [hvd_have_cudnn=1], [hvd_have_cudnn=0])
    AC_DEFINE_UNQUOTED([HVD_HAVE_CUDNN], [$hvd_have_cudnn],
                       [1 when built with cuDNN (GPU convolutions), else 0])
    AM_CONDITIONAL([HAVE_CUDNN], [test "x$cudnn_happy" = xyes])
    AC_SUBST([CUDNN_CPPFLAGS])
    AC_SUBST([CUDNN_LDFLAGS])
    AC_SUBST([CUDNN_LIBS])
])
