# reduce_on_plateau, as PyTorch's ReduceLROnPlateau stepped after each
# epoch's evaluation: tests/cli/nets/plateau.net trained 8 epochs from given
# weights on MNIST-format files gives, at every step, PyTorch 1.13's rate
# (within 1e-12) and loss, each epoch's test loss (within 1e-5 relative)
# and its final weights (1e-5), watching the test loss (factor 0.5,
# patience 1, cooldown 1: two reductions) and the epoch's training loss
# (an absolute threshold, patience 0, min_lr), on the CPU and through the
# GPU library on the host and over its kernel files (its rate table
# rewritten after a reduction).  The values and files come from
# tests/golden/plateau_torch.py.
# - A run stopped after epoch 4 (between the reductions) and resumed
#   goes on at the uninterrupted run's rates and losses, bit for bit, on
#   the CPU and on the host GPU library; one stopped mid-epoch too.
# - Other plateau settings are another model's checkpoint.
# The language's refusals are tests/errors/sched_plateau_*.net.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/plateau.net
init=tests/golden/plateau_init.safetensors
# plateau_torch.py's output
plateau_lrs="0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.125 0.125 0.125 0.125 0.125 0.125 0.125 0.125 0.125 0.125"
plateau_losses="2.2317276000976562 3.722508430480957 5.437074661254883 2.2589755058288574 2.342376470565796 2.1984927654266357 2.4010040760040283 2.242067337036133 2.190768241882324 2.241102457046509 2.121368408203125 2.354670286178589 2.180478811264038 2.180513381958008 2.2168655395507812 2.0976336002349854 2.318101644515991 2.1547088623046875 2.1684787273406982 2.204627513885498 2.0915467739105225 2.3074095249176025 2.1502387523651123 2.1669793128967285 2.2098076343536377 2.0870201587677 2.2985851764678955 2.147127389907837 2.1656432151794434 2.2153353691101074 2.0835089683532715 2.286526679992676 2.140648603439331 2.1599619388580322 2.2113449573516846 2.081831455230713 2.283389091491699 2.139756202697754 2.1595990657806396 2.2138845920562744"
plateau_tests="2.3477752685546873 2.414565849304199 2.4711938858032227 2.4888587951660157 2.5023733139038087 2.5134960174560548 2.518351173400879 2.522754096984863"
plateau_train_lrs="0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.1 0.1 0.1 0.1 0.1 0.1 0.1 0.1 0.1 0.1 0.03 0.03 0.03 0.03 0.03 0.03 0.03 0.03 0.03 0.03 0.03 0.03 0.03 0.03 0.03"
plateau_train_losses="2.2317276000976562 3.722508430480957 5.437074661254883 2.2589755058288574 2.342376470565796 2.1984927654266357 2.4010040760040283 2.242067337036133 2.190768241882324 2.241102457046509 2.121368408203125 2.354670286178589 2.180478811264038 2.180513381958008 2.2168655395507812 2.0976336002349854 2.3128066062927246 2.150890588760376 2.1632704734802246 2.194570541381836 2.0947961807250977 2.308173179626465 2.1488540172576904 2.162762403488159 2.1962075233459473 2.092272996902466 2.3013665676116943 2.145155668258667 2.1598124504089355 2.193207263946533 2.091548442840576 2.300128698348999 2.144688129425049 2.1596901416778564 2.1937527656555176 2.0908455848693848 2.298919677734375 2.144239902496338 2.1595699787139893 2.1943092346191406"
plateau_train_tests="2.3477752685546873 2.414565849304199 2.4711938858032227 2.4785812377929686 2.4849571228027343 2.4867626190185548 2.488516998291016 2.490233612060547"

sched_check test plateau
grep -q '^Epoch 3: the test loss has not improved for 2 epochs; learning rate 5.0000e-01 -> 2.5000e-01' "$tmp/test-cpu.out" ||
	fail "the first reduction is not said: $(grep '^Epoch' "$tmp/test-cpu.out")"
sched_check train plateau_train --set 'train.scheduler=reduce_on_plateau(monitor="train_loss", mode="min", threshold=0.05, threshold_mode="abs", factor=0.2, patience=0, min_lr=0.03)'

# stopped and resumed: after epoch 4 (one reduction made, a cooldown and a
# bad epoch counted) and in the middle of epoch 3, on the CPU and on the
# host GPU library, the rest as the uninterrupted run's, bit for bit
resumed at-epoch test-cpu 20
grep -q '"plateau_lr": 0.25,' "$tmp/at-epoch-ck/step-00000020/state.json" || fail "the checkpoint does not keep the plateau's rate"
resumed mid-epoch test-cpu 12
if [ -f build/tests/trainc-fakecuda.so ]; then
	TRAINC_CUDA_LIB=$(pwd)/build/tests/trainc-fakecuda.so resumed gpu test-fakecuda 20 --gpus 1
fi

# the plateau's settings are part of the run
"$TRAINC" $net $data --resume "$tmp/at-epoch-ck" --set 'train.scheduler=reduce_on_plateau(factor=0.5, patience=2, cooldown=1)' \
	--run-dir "$tmp/other" > "$tmp/other.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'was made by a different model or settings' "$tmp/other.out" ||
	{ fail "a resume with another patience: exit $rc, expected 2:"; sed 's/^/    /' "$tmp/other.out"; }
exit $failed
