# identity (nn.Identity) through the command: tests/cli/nets/identity.net
# trains bit for bit as the same net without its identity layers, on the
# CPU and, where CUDA was configured, through the GPU library on the host
# stand-in and over the CUDA kernel files; print shows Identity() and
# counts it in the unnamed layers' indices, as nn.Sequential does; an
# argument is refused (nn.Identity ignores its arguments, which would only
# mislead a reader here).
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
net=tests/cli/nets/identity.net

prints $net '(0): Identity()  ' '(skip): Identity()  ' '(6): Identity()  ' '(out): Identity()  ' '# (10,)'

grep -v 'identity' $net > "$tmp/none.net"
for where in cpu fakecuda kemu; do
	gpu=
	if [ $where != cpu ]; then
		lib=$(pwd)/build/tests/trainc-$where.so
		[ -f "$lib" ] || continue
		gpu="--gpus 1"
		export TRAINC_CUDA_LIB="$lib"
	fi
	for n in id none; do
		f=$net
		[ $n = none ] && f=$tmp/none.net
		# shellcheck disable=SC2086 # $gpu is one option and its value, or nothing
		"$TRAINC" "$f" --threads 1 $gpu --set train.steps=5 --set train.log_interval=1 --save "$tmp/$where-$n.safetensors" \
			--run-dir "$tmp/$where-$n" > "$tmp/$where-$n.out" 2>&1 || fail "$where-$n: the run failed: $(cat "$tmp/$where-$n.out")"
		grep '"kind"' "$tmp/$where-$n/metrics.jsonl" | sed 's/"time": [^,]*, //; s/, "images_per_s": [^,}]*//' > "$tmp/$where-$n.metrics"
	done
	unset TRAINC_CUDA_LIB
	[ "$(grep -c '"kind": "step"' "$tmp/$where-id.metrics")" -eq 5 ] || fail "$where: 5 step losses were not logged"
	cmp -s "$tmp/$where-id.metrics" "$tmp/$where-none.metrics" ||
		fail "$where: the losses differ from the net without identity: $(diff "$tmp/$where-none.metrics" "$tmp/$where-id.metrics" | head -4)"
	build/tests/stcmp "$tmp/$where-none.safetensors" "$tmp/$where-id.safetensors" 0 > "$tmp/$where.cmp" 2>&1 ||
		fail "$where: the weights differ from the net without identity: $(cat "$tmp/$where.cmp")"
done

refused args 's/    skip = identity/    skip = identity(54, unused=0.1)/' \
	"8:21: error: identity takes no positional arguments"
exit $failed
