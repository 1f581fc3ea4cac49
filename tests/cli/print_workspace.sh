# The memory plan counts the CPU convolutions' workspace: `trainc print` of
# the seed CNN has a workspace column, counted in the total, and a line
# naming the convolution it is sized for; a model without convolutions has
# neither.  Training runs its convolutions in that planned workspace on every
# convolution path.
. "$(dirname "$0")/preamble.inc"

"$TRAINC" print models/fashion_mnist_cnn.net > "$tmp/out" 2> "$tmp/err" || fail "print of the seed CNN failed: $(cat "$tmp/err")"
grep -q '^  device .* comm  workspace      total$' "$tmp/out" || fail "no workspace column: $(grep '^  device' "$tmp/out")"
# device 0's row: the workspace is not zero and the total adds it in
row=$(grep '^  0 ' "$tmp/out")
echo "$row" | awk '{ s = $2 + $3 + $4 + $5 + $6 + $7; d = s - $8; if ($7 <= 0 || d > 0.03 || d < -0.03) exit 1 }' ||
	fail "workspace missing from the row or the total: $row"
grep -q "^  workspace: CPU convolutions' shared scratch, sized for convolution conv2 (batch 64, Winograd): [0-9.]* MiB + [0-9.]* MiB per thread, up to 4 threads (device 0)$" "$tmp/out" ||
	fail "no workspace line: $(grep 'workspace:' "$tmp/out")"

"$TRAINC" print models/toy.net > "$tmp/toy" 2>&1 || fail "print of toy.net failed"
grep -q 'workspace' "$tmp/toy" && fail "a model without convolutions shows a workspace"

# convolutions of several kinds train in the plan's workspace on every path
cat > "$tmp/c.net" <<'EOF'
model C {
    input(3, 12, 12)
    a = conv2d(3, 16, kernel=3, padding=1)
    relu
    b = conv2d(16, 16, kernel=3, padding=1)
    c = conv2d(16, 32, kernel=1, stride=2)
    flatten
    out = linear(4)
}
data { train = synthetic(input=randn(3, 12, 12), target=classes(4), samples=40) }
train { loss = cross_entropy; optimizer = sgd(lr=0.01); batch = 16; steps = 3 }
EOF
for path in auto onednn winograd im2col; do
	TRAINC_CONV_PATH=$path "$TRAINC" "$tmp/c.net" --run-dir "$tmp/run-$path" > "$tmp/train" 2>&1 && continue
	case $path in
	winograd) grep -q 'a: TRAINC_CONV_PATH=winograd: oneDNN has no Winograd convolution' "$tmp/train" && continue ;;
	esac
	fail "training with TRAINC_CONV_PATH=$path failed:"
	sed 's/^/    /' "$tmp/train"
done

exit $failed
