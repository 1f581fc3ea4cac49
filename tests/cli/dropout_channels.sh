# dropout1d and dropout2d through the command (tests/cli/nets/dropout_channels.net):
# print shows PyTorch's repr; at p=0 a run trains bit for bit as the net
# without the layers; at their p the masks are the same on the CPU and,
# where CUDA was configured, through the GPU library on the host stand-in
# and over the CUDA kernel files (each channel's draw the CPU's), and they
# change the run; at p=1 after the conv nothing reaches it, so its weights
# end as they began; a sample of another rank is refused, naming the
# layer that fits. Each mask's channel structure is checked element by
# element in test_kern and test_cuda_body, and gpu_ops compares the layers'
# outputs and gradients with the CPU's.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
net=tests/cli/nets/dropout_channels.net

prints $net '(drop): Dropout2d(p=0.25, inplace=False)' '# (6, 12, 12)' \
	'(drop1): Dropout1d(p=0.5, inplace=False)' '# (4, 142)'

# run NAME NET [ARGS...]: 5 logged steps, weights to $tmp/NAME.safetensors
run() {
	name=$1 n=$2
	shift 2
	"$TRAINC" "$n" --threads 1 --set train.steps=5 --set train.log_interval=1 --save "$tmp/$name.safetensors" \
		--run-dir "$tmp/$name" "$@" > "$tmp/$name.out" 2>&1 || { fail "$name: the run failed: $(cat "$tmp/$name.out")"; return 1; }
	sed -n 's/.*"kind": "step".*"loss": \([^,]*\),.*/\1/p' "$tmp/$name/metrics.jsonl" > "$tmp/$name.losses"
	[ "$(wc -l < "$tmp/$name.losses")" -eq 5 ] || fail "$name: $(wc -l < "$tmp/$name.losses") step losses logged, expected 5"
}
same() {
	cmp -s "$tmp/$1.losses" "$tmp/$2.losses" ||
		fail "$1 and $2 logged other losses: $(paste "$tmp/$1.losses" "$tmp/$2.losses" | tr '\n\t' '; ')"
}

sed -e 's/dropout2d(0.25)/dropout2d(0)/' -e 's/dropout1d(0.5)/dropout1d(p=0.0)/' $net > "$tmp/p0.net"
grep -v 'drop' $net > "$tmp/none.net"
run p0 "$tmp/p0.net" && run none "$tmp/none.net" && same p0 none &&
	{ build/tests/stcmp "$tmp/none.safetensors" "$tmp/p0.safetensors" 0 > "$tmp/p0.cmp" 2>&1 ||
		fail "p=0 ends with other weights than no dropout: $(cat "$tmp/p0.cmp")"; }

run cpu $net && ! cmp -s "$tmp/cpu.losses" "$tmp/none.losses" || fail "dropout at p 0.25 and 0.5 left the losses unchanged"
for where in fakecuda kemu; do
	lib=$(pwd)/build/tests/trainc-$where.so
	[ -f "$lib" ] || continue
	TRAINC_CUDA_LIB=$lib run $where $net --gpus 1 || continue
	paste "$tmp/cpu.losses" "$tmp/$where.losses" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * (1 + $1)) exit 1 }' ||
		fail "$where: the losses are not the CPU's: $(paste "$tmp/cpu.losses" "$tmp/$where.losses" | tr '\n\t' '; ')"
	build/tests/stcmp "$tmp/cpu.safetensors" "$tmp/$where.safetensors" 1e-6 > "$tmp/$where.cmp" 2>&1 ||
		fail "$where: the weights are not the CPU's: $(cat "$tmp/$where.cmp")"
done

# p=1: the conv's output is dropped whole every step, so no gradient
# reaches the conv: its weights end as they began (the initial ones of a
# net of that conv alone, which draws them first too), while others move
sed 's/dropout2d(0.25)/dropout2d(1.0)/' $net > "$tmp/p1.net"
sed -n '/^model/,/drop = /p' "$tmp/p1.net" > "$tmp/convonly.net"
cat >> "$tmp/convonly.net" <<'NET'
}
data { train = synthetic(input=randn(1, 28, 28), target=randn(6, 12, 12), samples=8) }
train { loss = mse; optimizer = sgd(lr=0.1); batch = 8 }
NET
"$TRAINC" "$tmp/convonly.net" --threads 1 --set train.steps=0 --save "$tmp/conv_init.safetensors" > "$tmp/convonly.out" 2>&1 ||
	fail "a run of the conv alone failed: $(cat "$tmp/convonly.out")"
if run p1 "$tmp/p1.net"; then
	build/tests/stcmp "$tmp/conv_init.safetensors" "$tmp/p1.safetensors" 0 > "$tmp/p1.cmp" 2>&1 ||
		fail "dropout2d(1.0) let a gradient reach the conv: $(cat "$tmp/p1.cmp")"
	build/tests/stcmp "$tmp/conv_init.safetensors" "$tmp/cpu.safetensors" 0 > /dev/null 2>&1 &&
		fail "dropout2d(0.25): the conv's weights did not move"
fi

refused d1 's/dropout2d(0.25)/dropout1d(0.25)/' "8:12: error: drop drops whole channels of a (channels, length) sample, but its input is (6, 12, 12); use dropout2d for the channels of (C, H, W)"
refused d2 's/dropout1d(0.5)/dropout2d(0.5)/' "11:13: error: drop1 drops whole channels of a (channels, height, width) sample, but its input is (4, 142); use dropout1d for the channels of (C, L)"
refused flat 's/    flatten$/    flatten; dropout2d/' "12:14: error: layer 7 (dropout2d) drops whole channels of a (channels, height, width) sample, but its input is (568,); use dropout for one draw per element"
exit $failed
