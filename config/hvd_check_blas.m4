# hvd_check_blas.m4: a CBLAS (cblas.h, cblas_sgemm) for the cpu backend,
# required. BLAS_LIBS=... picks another library (e.g. MKL).
# Substitutes BLAS_LIBS.

AC_DEFUN([HVD_CHECK_BLAS], [
    AC_ARG_VAR([BLAS_LIBS], [linker flags for a CBLAS (default: search openblas, cblas, blas)])
    save_LIBS="$LIBS"
    blas_happy=yes
    AC_CHECK_HEADER([cblas.h], [], [blas_happy=no])
    AS_IF([test "x$blas_happy" = xyes && test -n "$BLAS_LIBS"],
          [LIBS="$BLAS_LIBS $LIBS"
           AC_CHECK_FUNC([cblas_sgemm], [], [blas_happy=no])],
          [test "x$blas_happy" = xyes],
          [AC_SEARCH_LIBS([cblas_sgemm], [openblas cblas blas],
                          [AS_IF([test "x$ac_cv_search_cblas_sgemm" != "xnone required"],
                                 [BLAS_LIBS="$ac_cv_search_cblas_sgemm"])],
                          [blas_happy=no])])
    LIBS="$save_LIBS"
    AS_IF([test "x$blas_happy" != xyes],
          [AC_MSG_ERROR([no CBLAS with cblas.h and cblas_sgemm found.
Install OpenBLAS: apt-get install libopenblas-dev])])
])
