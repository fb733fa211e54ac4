#!/bin/sh
# Builds the native workload launcher: build.sh OUT. Called by the openshell.linux module (for its
# tests) and by jlink/openshell-sandbox (for the image), so both get the same program from the same
# flags. Static: the launcher runs inside any workload image and needs nothing from it.
set -eu
out=$1
src=$(dirname "$0")/openshell-launcher.c
mkdir -p "$(dirname "$out")"
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -Wformat=2 -Wconversion -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
    -static -pthread -s -o "$out" "$src"
