#!/bin/sh
# tests/fuzz/build.sh [SECONDS] [HARNESS]: build a libFuzzer harness with
# ASan and UBSan and run it for SECONDS (default 60).  HARNESS is
#   compile  the compiler (fuzz_compile.c; default), from the seed corpus
#            tests/fuzz/corpus/ with the dictionary tests/fuzz/net.dict;
#   files    the readers of safetensors and IDX files (fuzz_files.c), from
#            tests/fuzz/corpus_files/ with tests/fuzz/files.dict.
# New inputs are kept in build/fuzz/corpus/ (build/fuzz/corpus_files/); a
# crash, leak or timeout is written to tests/fuzz/crashes/ and the run exits
# non-zero.
#   FUZZ_MAX_LEN    longest input tried (default 4096 bytes)
#   FUZZ_JOBS       parallel fuzzing processes (default 1)
#   CC              the clang to use (default clang)
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-60}
harness=${2:-compile}
cc=${CC:-clang}
out=build/fuzz
# FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION: the torch.save reader skips its
# CRC-32 checks, so that changed inputs reach the pickle and the tensors
flags="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 -std=c11 -D_GNU_SOURCE -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -Ibuild -I. -Wall -Wno-unused-function"

# flex and bison write the scanner and parser under build/grammar/
ninja build/grammar/parser.c build/grammar/lexer.c

mkdir -p "$out/corpus" "$out/corpus_files" tests/fuzz/crashes
case $harness in
compile)
	# shellcheck disable=SC2046,SC2086
	"$cc" $flags tests/fuzz/fuzz_compile.c $(ls grammar/*.c compiler/*.c) build/grammar/parser.c build/grammar/lexer.c \
		runtime/mnist_files.c runtime/util.c -lm -o "$out/fuzz_compile"
	corpus="$out/corpus tests/fuzz/corpus" dict=tests/fuzz/net.dict ;;
files)
	# shellcheck disable=SC2046,SC2086
	"$cc" $flags tests/fuzz/fuzz_files.c $(ls grammar/*.c compiler/*.c) build/grammar/parser.c build/grammar/lexer.c \
		runtime/mnist_files.c runtime/util.c runtime/weights.c runtime/safetensors.c runtime/torchfile.c runtime/filemap.c runtime/idx.c \
		-lz -lm -o "$out/fuzz_files"
	corpus="$out/corpus_files tests/fuzz/corpus_files" dict=tests/fuzz/files.dict ;;
*)
	echo "tests/fuzz/build.sh: no harness '$harness'; use compile or files" >&2
	exit 2 ;;
esac
echo "built $out/fuzz_$harness"
[ "$secs" -gt 0 ] || exit 0

jobs=${FUZZ_JOBS:-1}
set -- -max_total_time="$secs" -max_len="${FUZZ_MAX_LEN:-4096}" -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 -dict="$dict" -artifact_prefix=tests/fuzz/crashes/
# several jobs log to fuzz-N.log in the current directory
[ "$jobs" -gt 1 ] && set -- "$@" -jobs="$jobs" -workers="$jobs"
# stdin from /dev/null: an input that imports "/dev/stdin" must not wait for a terminal
# shellcheck disable=SC2086
exec "$out/fuzz_$harness" "$@" $corpus < /dev/null
