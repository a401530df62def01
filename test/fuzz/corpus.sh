#!/bin/sh
# test/fuzz/corpus.sh: the committed seeds, test/fuzz/corpus/, are what
# test/fuzz/make_corpus writes now, so that they follow the formats (a new
# checkpoint version, say) instead of going stale. Hand-picked inputs
# belong in test/fuzz/regress/, which this leaves alone.
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
"${abs_top_builddir:-.}/test/fuzz/make_corpus" "$tmp/corpus" || exit 99
if ! diff -r "$tmp/corpus" "${srcdir:-.}/test/fuzz/corpus"; then
    echo "FAIL: test/fuzz/corpus/ is not what make_corpus writes now;"
    echo "  rm -rf test/fuzz/corpus && test/fuzz/make_corpus test/fuzz/corpus"
    echo "  (from the top of the tree, after make check) and commit it"
    exit 1
fi
echo "corpus ok"
