#!/bin/sh
# The benchmarks' compiler launcher when CTFORMER_BENCH_SYNTAX_ONLY is on (.ci/run): the compile
# with -fsyntax-only (every template instantiated and checked, no code generated), then an empty
# object where -o names one, so the build is up to date afterwards.
out=
prev=
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  prev=$a
done
"$@" -fsyntax-only || exit
[ -z "$out" ] || : > "$out"
