# hvd_check_hwloc.m4: hwloc (binds each rank near its device), required.
# Substitutes HWLOC_CFLAGS, HWLOC_LIBS.

AC_DEFUN([HVD_CHECK_HWLOC], [
    PKG_CHECK_MODULES([HWLOC], [hwloc], [],
        [AC_MSG_ERROR([hwloc not found: apt-get install libhwloc-dev
($HWLOC_PKG_ERRORS)])])
])
