# hvd_check_mpi.m4: MPI, required.
#
# HVD_PROG_MPICC (before AC_PROG_CC): CC defaults to mpicc when one is found.
# HVD_CHECK_MPI (after AC_PROG_CC): CC must link MPI_Init; finds mpirun and
# the flags that nvcc (not an MPI wrapper) and hvd.pc need.
# Substitutes MPIRUN, MPI_CPPFLAGS, MPI_LIBS.

AC_DEFUN([HVD_PROG_MPICC], [
    AC_ARG_WITH([mpi],
        [AS_HELP_STRING([--with-mpi=DIR],
                        [MPI installation holding bin/mpicc (default: PATH)])],
        [], [with_mpi=yes])
    AS_IF([test "x$with_mpi" = xno],
          [AC_MSG_ERROR([hvd cannot be built without MPI])])
    AS_IF([test "x$with_mpi" = xyes], [mpi_path="$PATH"],
          [mpi_path="$with_mpi/bin"])
    AC_ARG_VAR([MPICC], [MPI C compiler wrapper])
    AC_PATH_PROGS([MPICC], [mpicc mpiicc], [], [$mpi_path])
    AS_IF([test -z "$CC" && test -n "$MPICC"], [CC="$MPICC"])
])

AC_DEFUN([HVD_CHECK_MPI], [
    mpi_happy=yes
    AC_CHECK_FUNC([MPI_Init], [], [mpi_happy=no])
    AS_IF([test "x$mpi_happy" = xyes],
          [AC_CHECK_HEADER([mpi.h], [], [mpi_happy=no])])
    AS_IF([test "x$mpi_happy" != xyes],
          [AC_MSG_ERROR([$CC cannot build MPI programs (MPI_Init, mpi.h).
Install MPI: apt-get install libopenmpi-dev openmpi-bin, or give CC=mpicc.])])

    # Flags for compilers that are not the wrapper (nvcc) and for hvd.pc:
    # Open MPI's --showme, else MPICH's -compile_info/-link_info.
    AC_MSG_CHECKING([for MPI compile and link flags])
    MPI_CPPFLAGS=""
    MPI_LIBS=""
    AS_IF([test -n "$MPICC"],
          [AS_IF([MPI_CPPFLAGS=`$MPICC --showme:compile 2>/dev/null`],
                 [MPI_LIBS=`$MPICC --showme:link 2>/dev/null`],
                 [MPI_CPPFLAGS=`$MPICC -compile_info 2>/dev/null | \
                     tr ' ' '\n' | grep -E '^-(I|D)' | tr '\n' ' '`
                  MPI_LIBS=`$MPICC -link_info 2>/dev/null | \
                     tr ' ' '\n' | grep -E '^-(L|l|Wl)' | tr '\n' ' '`])])
    AC_MSG_RESULT([${MPI_CPPFLAGS:-none} ${MPI_LIBS}])
    AC_SUBST([MPI_CPPFLAGS])
    AC_SUBST([MPI_LIBS])

    # mpirun is only needed by the multi-rank tests, which skip without it.
    AC_ARG_VAR([MPIRUN], [MPI launcher used by make check])
    AC_PATH_PROGS([MPIRUN], [mpirun mpiexec], [], [$mpi_path])
    AS_IF([test -z "$MPIRUN"],
          [AC_MSG_WARN([mpirun not found: multi-rank tests will be skipped.
Install it: apt-get install openmpi-bin])])
])
