# kl_div, as PyTorch's KLDivLoss (test_kern holds its losses and
# gradients, targets of 0 and log_target among them; test_cuda_body and
# gpu_ops the GPU's against the CPU's), through whole runs of
# tests/cli/nets/kl_div.net from the same weights as PyTorch 1.13, on data
# drawn as trainc draws it (tests/golden/kl_div_torch.py): each step's
# loss, the test loss and the final weights with reduction="batchmean",
# "mean" and "sum" with log_target=true, on the CPU and, where CUDA was
# configured, through the GPU library on the host stand-in and over the
# CUDA kernel files (the one-kernel step there); batchmean's weights also
# from two micro-batches a step and from two ranks.  The model's end and the
# reduction are warned of as PyTorch warns, randn targets and batchmean on
# another loss are refused, and a negative target stops the run naming
# why.  log_target is part of how the run trains: a checkpoint resumes
# with it only as made.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
net=tests/cli/nets/kl_div.net
init=tests/golden/kl_div_init.safetensors
data=

torch_check batchmean $net $init "1.817106008529663 1.802290916442871 2.0995240211486816 1.9645825624465942 1.8851267099380493 \
	1.8684358596801758 2.109515905380249 2.012098789215088 1.8166307210922241 1.7669044733047485 2.033456325531006 \
	1.871009111404419" 1.6841778755187988 tests/golden/kl_div_batchmean_final.safetensors 1e-5
grep -q "^GPU: .*one kernel each" "$tmp/batchmean-fakecuda.out" 2>/dev/null || [ ! -f build/tests/trainc-fakecuda.so ] ||
	fail "kl_div did not take the one-kernel step: $(grep '^GPU' "$tmp/batchmean-fakecuda.out")"
torch_check mean $net $init "0.45427650213241577 0.4505727291107178 0.5248810052871704 0.49114564061164856 0.47128167748451233 \
	0.46710896492004395 0.5273789763450623 0.503024697303772 0.45415768027305603 0.44172611832618713 0.5083640813827515 \
	0.46775227785110474" 0.4210444688796997 tests/golden/kl_div_mean_final.safetensors 1e-5 \
	--set train.loss=kl_div --set 'train.optimizer=sgd(lr=2, momentum=0.9)'
torch_check log_sum $net $init "13.635631561279297 13.554925918579102 14.318696022033691 13.933037757873535 13.52523136138916 \
	13.614465713500977 14.381461143493652 13.902493476867676 13.535784721374512 13.564504623413086 14.300518989562988 \
	13.948323249816895" 13.309426307678223 tests/golden/kl_div_log_sum_final.safetensors 1e-5 \
	--set 'train.loss=kl_div(reduction="sum", log_target=true)' --set 'train.optimizer=sgd(lr=0.001953125, momentum=0.9)'
net=tests/cli/nets/kl_div.net
# batchmean over a step of two micro-batches, and over two ranks (DDP over
# Gloo) of 8 samples each, is the whole batch's: PyTorch's weights
sed 's/^    batch = 16$/    global_batch = 16\n    micro_batch = 8/' $net > "$tmp/micro.net"
torch_run micro-cpu "$tmp/micro.net" $init && weights micro-cpu tests/golden/kl_div_batchmean_final.safetensors 1e-5
sed 's/^    batch = 16$/    global_batch = 16/' $net > "$tmp/ddp.net"
torch_run ddp-cpu "$tmp/ddp.net" $init --cpus 2 && weights ddp-cpu tests/golden/kl_div_batchmean_final.safetensors 1e-5
net=tests/cli/nets/kl_div.net

# warnings at the loss, with a note at the model's last layer
"$TRAINC" check $net > "$tmp/w0.out" 2>&1 && ! grep -q warning "$tmp/w0.out" ||
	{ fail "kl_div(reduction=\"batchmean\") after log_softmax is warned of:"; sed 's/^/    /' "$tmp/w0.out"; }
sed 's/^    log_softmax(dim=1)$/    softmax(dim=1)/' $net > "$tmp/soft.net"
warned "kl_div after softmax" "$tmp/soft.net" "soft.net:16:12: warning: kl_div takes log-probabilities, but the model ends in softmax"
warned "kl_div after softmax" "$tmp/soft.net" "soft.net:9:5: note: the model's last layer is here"
sed '/^    log_softmax(dim=1)$/d' $net > "$tmp/raw.net"
warned "kl_div on raw scores" "$tmp/raw.net" "warning: kl_div takes log-probabilities, but the model does not end in log_softmax"
warned "kl_div's mean" $net "warning: kl_div's reduction \"mean\" divides by every value of the batch, not by its samples" \
	--set train.loss=kl_div
# refusals
refused randn 's/target=rand(4), samples=64/target=randn(4), samples=64/' \
	"12:45: error: kl_div needs probabilities as targets, but randn draws them from N(0, 1)"
refused class 's/target=rand(4), samples=64/target=classes(4), samples=64/' \
	"12:13: error: kl_div needs real-valued targets, but this dataset gives class labels"
refused batchmean-mse 's/loss = kl_div(reduction="batchmean")/loss = mse(reduction="batchmean")/' \
	"16:26: error: reduction \"batchmean\" is kl_div's alone; mse takes \"mean\" or \"sum\""
refused reduction 's/reduction="batchmean"/reduction="none"/' \
	"16:29: error: reduction must be \"mean\", \"batchmean\" or \"sum\""
refused log_target 's/reduction="batchmean"/log_target=1/' "16:30: error: log_target must be true or false"
# randn targets are log-probabilities enough for log_target
sed 's/target=rand(4)/target=randn(4)/g; s/reduction="batchmean"/reduction="batchmean", log_target=true/' $net > "$tmp/logt.net"
"$TRAINC" check "$tmp/logt.net" > "$tmp/logt.out" 2>&1 || { fail "randn targets under log_target are refused:"; sed 's/^/    /' "$tmp/logt.out"; }
# a negative target (a file's) stops the run at the first step, naming the
# sample, on the CPU and the GPU library
build/tests/npy_write --values 0.5,-1,0.25 "$tmp/x.npy" '<f4' 16,6 > /dev/null
build/tests/npy_write --ramp 37 --map 36:-1 "$tmp/t.npy" '<f4' 16,4 > /dev/null # element 36, of sample 9, is -1
for where in cpu fakecuda; do
	gpu_lib $where || continue
	# shellcheck disable=SC2086 # $gpu is one option and its value, or nothing
	"$TRAINC" $net --set 'data.train=npy(input="'"$tmp/x.npy"'", target="'"$tmp/t.npy"'")' \
		--set 'data.test=npy(input="'"$tmp/x.npy"'", target="'"$tmp/t.npy"'")' $gpu --run-dir "$tmp/nan-$where" > "$tmp/nan.out" 2>&1
	rc=$?
	if [ $where = cpu ]; then
		grep -qF "the loss is NaN at step 1 (epoch 1); every layer's output is finite, so a target is below 0 (training sample 9's is)" \
			"$tmp/nan.out" &&
			grep -qF "kl_div takes probabilities as targets (each at least 0), or log-probabilities with log_target=true" "$tmp/nan.out"
	else
		grep -qF "the loss is NaN at step 1 (epoch 1)" "$tmp/nan.out" &&
			grep -qF "training sample 9's target has a value below 0, whose logarithm in kl_div is NaN" "$tmp/nan.out"
	fi
	[ $? -eq 0 ] && [ $rc -ne 0 ] || { fail "$where: a negative target: exit $rc, not stopped as expected:"; sed 's/^/    /' "$tmp/nan.out"; }
done
gpu_lib cpu
# log_target is part of the model hash
"$TRAINC" $net --set train.epochs=1 --save "$tmp/ck" --run-dir "$tmp/ck-run" > "$tmp/ck.out" 2>&1 ||
	{ fail "the checkpointed run failed:"; sed 's/^/    /' "$tmp/ck.out"; }
"$TRAINC" $net --set 'train.loss=kl_div(reduction="batchmean", log_target=false)' --resume "$tmp/ck" --run-dir "$tmp/r1" \
	> "$tmp/r1.out" 2>&1 && grep -q 'Resumed from .* at step 4' "$tmp/r1.out" ||
	{ fail "the checkpoint does not resume with log_target=false written out:"; sed 's/^/    /' "$tmp/r1.out"; }
"$TRAINC" $net --set 'train.loss=kl_div(reduction="batchmean", log_target=true)' --resume "$tmp/ck" --run-dir "$tmp/r2" \
	> "$tmp/r2.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'was made by a different model or settings' "$tmp/r2.out" ||
	{ fail "the checkpoint resumed with log_target=true: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/r2.out"; }
exit $failed
