# hvd_check_nccl.m4: NCCL, optional, for allreduce_perf -G's nccl column
# (the benchmark's peer; nothing else uses it). Only with CUDA.
#
# --with-nccl[=DIR]  guess (default): use DIR=$NCCL_HOME, else CUDA's
#                    folder, when it works; yes or DIR: fail when it does
#                    not; no: build without.
# Run after HVD_CHECK_CUDA (reads cuda_happy, cuda_dir, CUDA_* flags).
# Substitutes NCCL_CPPFLAGS, NCCL_LDFLAGS, NCCL_LIBS; defines HVD_HAVE_NCCL
# to 0 or 1 and the automake conditional HAVE_NCCL.

AC_DEFUN([HVD_CHECK_NCCL], [
    AC_ARG_WITH([nccl],
        [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@],
                        [NCCL for the benchmark's nccl column (default:
                         guess; DIR=$NCCL_HOME or CUDA's; needs CUDA)])],
        [], [with_nccl=guess])

    nccl_happy=no
    NCCL_CPPFLAGS=""
    NCCL_LDFLAGS=""
    NCCL_LIBS=""
    AS_IF([test "x$with_nccl" != xno && test "x$cuda_happy" != xyes], [
        AS_IF([test "x$with_nccl" = xguess],
              [AC_MSG_NOTICE([no CUDA: building without NCCL])],
              [AC_MSG_ERROR([NCCL was requested but CUDA is not usable: NCCL
needs it (see --with-cuda), or give --without-nccl.])])
    ], [test "x$with_nccl" != xno], [
        AS_CASE(["$with_nccl"],
                [yes|guess], [nccl_dir="${NCCL_HOME:-$cuda_dir}"],
                [nccl_dir="$with_nccl"])
        AS_IF([test -d "$nccl_dir/lib64"], [nccl_libdir="$nccl_dir/lib64"],
              [nccl_libdir="$nccl_dir/lib"])
        NCCL_CPPFLAGS="-isystem $nccl_dir/include"
        NCCL_LDFLAGS="-L$nccl_libdir -Wl,-rpath,$nccl_libdir"

        save_CPPFLAGS="$CPPFLAGS"
        save_LDFLAGS="$LDFLAGS"
        save_LIBS="$LIBS"
        CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS $NCCL_CPPFLAGS"
        LDFLAGS="$LDFLAGS $CUDA_LDFLAGS $NCCL_LDFLAGS"
        nccl_happy=yes
        AC_CHECK_HEADER([nccl.h], [], [nccl_happy=no])
        AS_IF([test "x$nccl_happy" = xyes],
              [AC_CHECK_LIB([nccl], [ncclCommInitRank], [NCCL_LIBS="-lnccl"],
                            [nccl_happy=no], [$CUDA_LIBS])])
        CPPFLAGS="$save_CPPFLAGS"
        LDFLAGS="$save_LDFLAGS"
        LIBS="$save_LIBS"

        AS_IF([test "x$nccl_happy" != xyes], [
            NCCL_CPPFLAGS=""
            NCCL_LDFLAGS=""
            NCCL_LIBS=""
            AS_IF([test "x$with_nccl" = xguess],
                  [AC_MSG_WARN([NCCL not found in $nccl_dir: the benchmark's nccl column is left out])],
                  [AC_MSG_ERROR([NCCL was requested but was not usable in $nccl_dir
(nccl.h, libnccl). Give --with-nccl=DIR or --without-nccl.])])
        ])
    ])

    AS_IF([test "x$nccl_happy" = xyes], [hvd_have_nccl=1], [hvd_have_nccl=0])
    AC_DEFINE_UNQUOTED([HVD_HAVE_NCCL], [$hvd_have_nccl],
                       [1 when built with NCCL (the benchmark), else 0])
    AM_CONDITIONAL([HAVE_NCCL], [test "x$nccl_happy" = xyes])
    AC_SUBST([NCCL_CPPFLAGS])
    AC_SUBST([NCCL_LDFLAGS])
    AC_SUBST([NCCL_LIBS])
])
