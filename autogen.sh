#!/bin/sh
# autogen.sh: generate ./configure from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
exec autoreconf -fi
