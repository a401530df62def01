# hvd_check_dnnl.m4: oneDNN (Debian's libdnnl-dev), optional, for the CPU
# table's convolutions (models/conv_dnnl.c; HVD_CONV=im2col runs the
# reference instead).
#
# --with-dnnl=guess (default): use it when it works; yes: fail when it
# does not; no: build without.
# Substitutes DNNL_LIBS; defines HVD_HAVE_DNNL to 0 or 1 (models/conv_dnnl.c
# is built either way: its stubs take no layer without oneDNN).

AC_DEFUN([HVD_CHECK_DNNL], [
    AC_ARG_WITH([dnnl],
        [AS_HELP_STRING([--with-dnnl@<:@=yes|no@:>@],
                        [oneDNN for the CPU's convolutions (default: guess)])],
        [], [with_dnnl=guess])

    dnnl_happy=no
    DNNL_LIBS=""
    AS_IF([test "x$with_dnnl" != xno], [
        save_LIBS="$LIBS"
        dnnl_happy=yes
        AC_CHECK_HEADER([oneapi/dnnl/dnnl.h], [], [dnnl_happy=no])
        AS_IF([test "x$dnnl_happy" = xyes],
              [AC_CHECK_LIB([dnnl], [dnnl_engine_create], [DNNL_LIBS="-ldnnl"],
                            [dnnl_happy=no])])
        LIBS="$save_LIBS"
        AS_IF([test "x$dnnl_happy" != xyes && test "x$with_dnnl" != xguess],
              [AC_MSG_ERROR([oneDNN was requested but was not usable
(oneapi/dnnl/dnnl.h, libdnnl: apt-get install libdnnl-dev), or give
--without-dnnl.])])
    ])

    AS_IF([test "x$dnnl_happy" = xyes], [hvd_have_dnnl=1], [hvd_have_dnnl=0])
    AC_DEFINE_UNQUOTED([HVD_HAVE_DNNL], [$hvd_have_dnnl],
                       [1 when built with oneDNN (CPU convolutions), else 0])
    AC_SUBST([DNNL_LIBS])
])
