# hvd_check_zlib.m4: zlib (gzip'd data sets, checksums), required: 1.2.9
# or later, for crc32_z's size_t lengths. Substitutes ZLIB_LIBS.

AC_DEFUN([HVD_CHECK_ZLIB], [
    save_LIBS="$LIBS"
    zlib_happy=yes
    AC_CHECK_HEADER([zlib.h], [], [zlib_happy=no])
    AS_IF([test "x$zlib_happy" = xyes],
          [AC_CHECK_LIB([z], [crc32_z], [ZLIB_LIBS="-lz"], [zlib_happy=no])])
    LIBS="$save_LIBS"
    AS_IF([test "x$zlib_happy" != xyes],
          [AC_MSG_ERROR([zlib 1.2.9 or later not found: apt-get install zlib1g-dev])])
    AC_SUBST([ZLIB_LIBS])
])
