#!/bin/sh
# tests/fuzz/build.sh [SECONDS]: build the compiler's libFuzzer harness with
# ASan and UBSan and run it for SECONDS (default 60) from the seed corpus
# tests/fuzz/corpus/ with the dictionary tests/fuzz/net.dict.  New inputs
# are kept in build/fuzz/corpus/; a crash, leak or timeout is written to
# tests/fuzz/crashes/ and the run exits non-zero.
#   FUZZ_MAX_LEN    longest input tried (default 4096 bytes)
#   FUZZ_JOBS       parallel fuzzing processes (default 1)
#   CC              the clang to use (default clang)
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-60}
cc=${CC:-clang}
out=build/fuzz

# flex and bison write the scanner and parser under build/grammar/
ninja build/grammar/parser.c build/grammar/lexer.c

mkdir -p "$out/corpus" tests/fuzz/crashes
# shellcheck disable=SC2046
"$cc" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 \
	-std=c11 -D_GNU_SOURCE -Ibuild -I. -Wall -Wno-unused-function \
	tests/fuzz/fuzz_compile.c $(ls grammar/*.c compiler/*.c) build/grammar/parser.c build/grammar/lexer.c \
	runtime/mnist_files.c runtime/util.c \
	-lm -o "$out/fuzz_compile"
echo "built $out/fuzz_compile"
[ "$secs" -gt 0 ] || exit 0

jobs=${FUZZ_JOBS:-1}
set -- -max_total_time="$secs" -max_len="${FUZZ_MAX_LEN:-4096}" -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 -dict=tests/fuzz/net.dict -artifact_prefix=tests/fuzz/crashes/
# several jobs log to fuzz-N.log in the current directory
[ "$jobs" -gt 1 ] && set -- "$@" -jobs="$jobs" -workers="$jobs"
# stdin from /dev/null: an input that imports "/dev/stdin" must not wait for a terminal
exec "$out/fuzz_compile" "$@" "$out/corpus" tests/fuzz/corpus < /dev/null
