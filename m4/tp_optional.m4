dnl tp_optional.m4: detection of the optional GPU and multi-process toolchains.
dnl Each is --with-X[=PREFIX]: default "check" (use when found), "no" disables, "yes" requires.

AC_DEFUN([TP_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=PREFIX@:>@], [build the CUDA backend (default: when nvcc is found)])],
    [], [with_cuda=check])
  tp_have_cuda=no
  AS_IF([test "x$with_cuda" != "xno"], [
    AS_CASE([$with_cuda], [yes|check], [tp_cuda_prefix=/usr/local/cuda], [tp_cuda_prefix=$with_cuda])
    AC_PATH_PROG([NVCC], [nvcc], [], [$tp_cuda_prefix/bin$PATH_SEPARATOR$PATH])
    AS_IF([test -n "$NVCC" && test -f "$tp_cuda_prefix/include/cublas_v2.h"], [
      tp_have_cuda=yes
      CUDA_CFLAGS="-I$tp_cuda_prefix/include"
      dnl nvcc objects are C++ (kernel launch stubs): the C linker needs the C++ runtime too
      CUDA_LIBS="-L$tp_cuda_prefix/lib64 -Wl,-rpath,$tp_cuda_prefix/lib64 -lcublas -lcudart -lstdc++"
    ], [AS_IF([test "x$with_cuda" != "xcheck"], [AC_MSG_ERROR([--with-cuda given but nvcc or cuBLAS not found])])])
  ])
  AC_SUBST([NVCC]) AC_SUBST([CUDA_CFLAGS]) AC_SUBST([CUDA_LIBS])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$tp_have_cuda" = "xyes"])
  AS_IF([test "x$tp_have_cuda" = "xyes"], [AC_DEFINE([HAVE_CUDA], [1], [CUDA backend built])])
])

AC_DEFUN([TP_CHECK_NCCL], [
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=PREFIX@:>@], [build the NCCL transport (default: when CUDA and nccl.h are found)])],
    [], [with_nccl=check])
  tp_have_nccl=no
  AS_IF([test "x$with_nccl" != "xno" && test "x$tp_have_cuda" = "xyes"], [
    AS_CASE([$with_nccl], [yes|check], [tp_nccl_prefix=$tp_cuda_prefix], [tp_nccl_prefix=$with_nccl])
    AS_IF([test -f "$tp_nccl_prefix/include/nccl.h"], [
      tp_have_nccl=yes
      NCCL_CFLAGS="-I$tp_nccl_prefix/include"
      NCCL_LIBS="-L$tp_nccl_prefix/lib64 -Wl,-rpath,$tp_nccl_prefix/lib64 -lnccl"
    ])
  ])
  AS_IF([test "x$with_nccl" = "xyes" && test "x$tp_have_nccl" = "xno"], [AC_MSG_ERROR([--with-nccl given but NCCL not found])])
  AC_SUBST([NCCL_CFLAGS]) AC_SUBST([NCCL_LIBS])
  AM_CONDITIONAL([HAVE_NCCL], [test "x$tp_have_nccl" = "xyes"])
  AS_IF([test "x$tp_have_nccl" = "xyes"], [AC_DEFINE([HAVE_NCCL], [1], [NCCL transport built])])
])

AC_DEFUN([TP_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi], [build the MPI transport (default: when mpicc is found)])],
    [], [with_mpi=check])
  tp_have_mpi=no
  AS_IF([test "x$with_mpi" != "xno"], [
    AC_PATH_PROG([MPICC], [mpicc], [])
    AS_IF([test -n "$MPICC"], [
      tp_have_mpi=yes
      MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null`
      MPI_LIBS=`$MPICC --showme:link 2>/dev/null`
    ], [AS_IF([test "x$with_mpi" = "xyes"], [AC_MSG_ERROR([--with-mpi given but mpicc not found])])])
  ])
  AC_SUBST([MPI_CFLAGS]) AC_SUBST([MPI_LIBS])
  AM_CONDITIONAL([HAVE_MPI], [test "x$tp_have_mpi" = "xyes"])
  AS_IF([test "x$tp_have_mpi" = "xyes"], [AC_DEFINE([HAVE_MPI], [1], [MPI transport built])])
])

dnl The NCCL transport needs both NCCL (the payloads) and MPI (the bootstrap and the headers).
AC_DEFUN([TP_CHECK_NCCL_TRANSPORT], [
  tp_have_nccl_transport=no
  AS_IF([test "x$tp_have_nccl" = "xyes" && test "x$tp_have_mpi" = "xyes"], [tp_have_nccl_transport=yes])
  AM_CONDITIONAL([HAVE_NCCL_TRANSPORT], [test "x$tp_have_nccl_transport" = "xyes"])
  AS_IF([test "x$tp_have_nccl_transport" = "xyes"],
    [AC_DEFINE([HAVE_NCCL_TRANSPORT], [1], [NCCL transport built (NCCL and MPI found)])])
])
