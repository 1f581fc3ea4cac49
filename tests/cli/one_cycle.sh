# one_cycle, as PyTorch's OneCycleLR stepped after every batch over the
# run's steps (epochs=3, steps_per_epoch=5): tests/cli/nets/one_cycle.net
# trained from given weights on MNIST-format files gives, at every step,
# PyTorch 1.13's rate (within 1e-12) and loss, each epoch's test loss
# (1e-5 relative) and its final weights (1e-5), with SGD (no momentum of
# its own: OneCycleLR cycles it between 0.85 and 0.95) and with Adam
# (beta1 cycled; three phases, linear), on the CPU and through the GPU
# library on the host and over its kernel files (the momentum read from a
# device table by the captured step).  The values and files come from
# tests/golden/one_cycle_torch.py.
# - A run stopped mid-cycle and resumed goes on bit for bit as the
#   uninterrupted one (CPU, host GPU library).  The checkpoint keeps the
#   cycle's length (state.json's one_cycle_total), as OneCycleLR's
#   state_dict keeps total_steps: a cycle of 4 epochs stopped at step 7
#   and resumed with 3 epochs follows the 4-epoch cycle (not a 3-epoch
#   one), and a resume longer than the cycle is refused, naming the
#   epochs it may take.
# - A total_steps shorter than the run is refused before training, as
#   OneCycleLR stops past its last step; cycle_momentum=false keeps SGD's
#   own momentum (none: it trains otherwise).
# The language's refusals are tests/errors/sched_one_cycle_*.net.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/one_cycle.net
init=tests/golden/one_cycle_init.safetensors

# one_cycle_torch.py's output
one_cycle_sgd_lrs="0.0040000000000000036 0.022072489510780793 0.0626810048299031 0.09524650565931612 0.09944154354509119 0.09504846320134738 0.08665264698111695 0.0750001 0.06112620219362893 0.046263710266697504 0.03173322184988512 0.0188258346050237 0.008688426531955128 0.002221750825254118 4e-07"
one_cycle_sgd_losses="2.177248477935791 2.319420099258423 2.1127052307128906 2.1314070224761963 2.0374696254730225 1.6122519969940186 2.196014881134033 2.8306639194488525 2.043079376220703 3.0061755180358887 1.618553638458252 1.8159469366073608 1.4155426025390625 1.3704506158828735 1.6978310346603394"
one_cycle_sgd_tests="3.128261375427246 1.7923618316650392 1.624594497680664"
one_cycle_adam_lrs="0.0004 0.0023200000000000004 0.004240000000000001 0.0061600000000000005 0.00808 0.01 0.00808 0.00616 0.00424 0.002319999999999999 0.0003999999999999993 0.00030001 0.00020002 0.00010002999999999998 3.999999999997929e-08"
one_cycle_adam_losses="2.177248477935791 2.313284158706665 2.0788657665252686 2.064866542816162 2.0170037746429443 1.4194996356964111 2.0164248943328857 1.6275590658187866 1.5066419839859009 2.1958155632019043 0.989527702331543 1.5681304931640625 1.4719358682632446 1.3491227626800537 2.000520944595337"
one_cycle_adam_tests="2.3709432601928713 2.810235023498535 2.7326944351196287"

sched_check sgd one_cycle_sgd
sched_check adam one_cycle_adam --set 'train.optimizer=adam(lr=0.01)' \
	--set 'train.scheduler=one_cycle(max_lr=0.01, three_phase=true, anneal_strategy="linear", pct_start=0.4)'

# stopped at step 7 (in the second phase) and resumed
resumed cpu sgd-cpu 7
if [ -f build/tests/trainc-fakecuda.so ]; then
	TRAINC_CUDA_LIB=$(pwd)/build/tests/trainc-fakecuda.so resumed gpu sgd-fakecuda 7 --gpus 1
fi

# the cycle's length is the checkpoint's
grep -q '"one_cycle_total": 15,' "$tmp/cpu-ck/step-00000007/state.json" ||
	fail "the checkpoint does not keep its cycle of 15 steps: $(cat "$tmp/cpu-ck/step-00000007/state.json")"
go long --init $init --set train.epochs=4 --set train.steps=15
go long-a --init $init --set train.epochs=4 --set train.steps=7 --save "$tmp/long-ck"
go long-b --resume "$tmp/long-ck"
[ "$(col long-a lr)$(col long-b lr)" = "$(col long lr)" ] ||
	fail "a 20-step cycle resumed in a 15-step run: rates $(col long-a lr)| $(col long-b lr); uninterrupted $(col long lr)"
[ "$(col long lr)" != "$(col sgd-cpu lr)" ] || fail "a 20-step cycle gave the rates of a 15-step one"
if [ -f build/tests/trainc-fakecuda.so ]; then
	TRAINC_CUDA_LIB=$(pwd)/build/tests/trainc-fakecuda.so go long-gpu --resume "$tmp/long-ck" --gpus 1
	[ "$(col long-gpu lr)" = "$(col long-b lr)" ] || fail "host GPU library: the resumed cycle's rates $(col long-gpu lr), CPU $(col long-b lr)"
fi
"$TRAINC" $net $data --resume "$tmp/cpu-ck" --set train.epochs=4 --run-dir "$tmp/longer" > "$tmp/longer.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -qF "spans 15 optimizer steps (the run that began it), but this run takes 20" "$tmp/longer.out" &&
	grep -qF "resume with train.epochs = 3 or fewer" "$tmp/longer.out" ||
	{ fail "a resume past the checkpoint's cycle: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/longer.out"; }
# a damaged length
cp -r "$tmp/cpu-ck" "$tmp/bad-ck"
restate "$tmp/bad-ck/step-00000007" 's/"one_cycle_total": 15/"one_cycle_total": 0/'
"$TRAINC" $net $data --resume "$tmp/bad-ck" --run-dir "$tmp/bad" > "$tmp/bad.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -qF "one_cycle_total is not a whole number of at least 1; the checkpoint is damaged" "$tmp/bad.out" ||
	{ fail "a checkpoint's cycle of 0 steps: exit $rc:"; sed 's/^/    /' "$tmp/bad.out"; }
# a cycle shorter than the run
"$TRAINC" $net $data --set 'train.scheduler=one_cycle(max_lr=0.1, total_steps=10)' --run-dir "$tmp/short" > "$tmp/short.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -qF "one_cycle's total_steps is 10, but the run takes 15 optimizer steps" "$tmp/short.out" ||
	{ fail "a cycle of 10 steps in a run of 15: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/short.out"; }
# without cycle_momentum SGD keeps no momentum: another run
go plain --init $init --set 'train.scheduler=one_cycle(max_lr=0.1, cycle_momentum=false)' --save "$tmp/plain.safetensors"
[ "$(col plain lr)" = "$(col sgd-cpu lr)" ] || fail "cycle_momentum=false changed the rates"
build/tests/stcmp "$tmp/sgd-cpu.safetensors" "$tmp/plain.safetensors" 1e-3 > /dev/null 2>&1 &&
	fail "cycle_momentum=false trains as the cycled momentum does"
# a momentum of the optimizer's own, which the cycle replaces, is warned of
warned "one_cycle over sgd's momentum" $net "warning: one_cycle cycles the optimizer's momentum between base_momentum (0.85) and \
max_momentum (0.95), as OneCycleLR does, so its momentum of 0.9 is not used" --set 'train.optimizer=sgd(lr=0.01, momentum=0.9)'
warned "one_cycle over adam's beta1" $net "so its beta1 of 0.8 is not used" --set 'train.optimizer=adam(betas=(0.8, 0.999))'
"$TRAINC" check $net > "$tmp/w0.out" 2>&1 && ! grep -q warning "$tmp/w0.out" ||
	{ fail "one_cycle over sgd without momentum is warned of:"; sed 's/^/    /' "$tmp/w0.out"; }
exit $failed
