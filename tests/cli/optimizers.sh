# adamax and radam against PyTorch 1.13's Adamax and RAdam: tests/cli/nets/
# one_cycle.net trained from given weights on MNIST-format files gives, at
# every step, PyTorch's rate (within 1e-12) and loss, each epoch's test
# loss (1e-5 relative) and its final weights (1e-5), on the CPU and through
# the GPU library on the host and over its kernel files: Adamax under
# StepLR stepped each epoch; RAdam with weight decay at a constant rate
# (its first 5 steps unrectified, the rest rectified); RAdam under one_cycle,
# which cycles its beta1 as OneCycleLR does.  The values and files come
# from tests/golden/optimizers_torch.py.
# - A RAdam run stopped at step 4, before it rectifies, and resumed goes on
#   bit for bit as the uninterrupted one (CPU, host GPU library): the
#   checkpoint's two planes (exp_avg, exp_avg_sq) and step are all it needs.
# - `trainc print` shows the PyTorch constructor calls; one_cycle warns of a
#   beta1 it replaces.
# The language's refusals are tests/errors/train_radam_beta_range.net and
# train_optimizer_not_offered.net.
. "$(dirname "$0")/preamble.inc"
. tests/cli/torch_ref.inc
mnist_files "$tmp/data" 40 20
net=tests/cli/nets/one_cycle.net
init=tests/golden/optimizers_init.safetensors

# optimizers_torch.py's output
optimizers_adamax_lrs="0.01 0.01 0.01 0.01 0.01 0.006999999999999999 0.006999999999999999 0.006999999999999999 0.006999999999999999 0.006999999999999999 0.004899999999999999 0.004899999999999999 0.004899999999999999 0.004899999999999999 0.004899999999999999"
optimizers_adamax_losses="2.2438201904296875 2.7168614864349365 2.2585296630859375 2.042546272277832 2.4874448776245117 1.4370397329330444 2.0913171768188477 1.7427250146865845 1.6903573274612427 2.0171422958374023 1.2602319717407227 1.9531303644180298 1.5508140325546265 1.5429435968399048 1.7560791969299316"
optimizers_adamax_tests="2.511128616333008 2.2607501983642577 2.1997264862060546"
optimizers_radam_lrs="0.01 0.01 0.01 0.01 0.01 0.01 0.01 0.01 0.01 0.01 0.01 0.01 0.01 0.01 0.01"
optimizers_radam_losses="2.2438201904296875 2.2865712642669678 2.2821435928344727 2.1802704334259033 2.324091672897339 2.1579511165618896 2.2550976276397705 2.1890552043914795 2.0678176879882812 2.25555419921875 1.970544695854187 2.13832950592041 1.9666531085968018 1.923799991607666 2.119563102722168"
optimizers_radam_tests="2.3324079513549805 2.3641355514526365 2.4015214920043944"
optimizers_radam_cycle_lrs="0.0003999999999999993 0.0022072489510780785 0.006268100482990309 0.009524650565931611 0.009944154354509118 0.009504846320134737 0.008665264698111694 0.00750001 0.0061126202193628925 0.00462637102666975 0.0031733221849885125 0.00188258346050237 0.000868842653195513 0.0002221750825254118 4e-08"
optimizers_radam_cycle_losses="2.2438201904296875 2.283569574356079 2.31242299079895 2.21067476272583 2.365950107574463 2.204061508178711 2.2784693241119385 2.2486231327056885 2.1456058025360107 2.304460048675537 2.127976894378662 2.2586119174957275 2.2074344158172607 2.1114158630371094 2.2886533737182617"
optimizers_radam_cycle_tests="2.3428390502929686 2.335994338989258 2.336626434326172"

adamax="--set train.optimizer=adamax(lr=0.01) --set train.scheduler=step_lr(step=1,gamma=0.7)"
radam="--set train.optimizer=radam(lr=0.01,betas=(0.9,0.99),weight_decay=0.01) --set train.scheduler=constant"
# shellcheck disable=SC2086 # each holds several arguments
sched_check adamax optimizers_adamax $adamax
# shellcheck disable=SC2086
sched_check radam optimizers_radam $radam
sched_check radam-cycle optimizers_radam_cycle --set 'train.optimizer=radam(lr=0.01)' --set 'train.scheduler=one_cycle(max_lr=0.01)'

# stopped before it rectifies and resumed after
# shellcheck disable=SC2086
resumed radam-resume radam-cpu 4 $radam
if [ -f build/tests/trainc-fakecuda.so ]; then
	# shellcheck disable=SC2086
	TRAINC_CUDA_LIB=$(pwd)/build/tests/trainc-fakecuda.so resumed radam-resume-gpu radam-fakecuda 4 --gpus 1 $radam
fi

# shellcheck disable=SC2086
"$TRAINC" print $net $adamax > "$tmp/print" 2>&1 || fail "print with adamax failed"
grep -qF "optimizer:  Adamax(lr=0.01, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.0)" "$tmp/print" ||
	fail "print does not show Adamax's constructor: $(grep optimizer "$tmp/print")"
# shellcheck disable=SC2086
"$TRAINC" print $net $radam > "$tmp/print" 2>&1 || fail "print with radam failed"
grep -qF "optimizer:  RAdam(lr=0.01, betas=(0.9, 0.99), eps=1e-08, weight_decay=0.01)" "$tmp/print" ||
	fail "print does not show RAdam's constructor: $(grep optimizer "$tmp/print")"
warned "one_cycle over radam's own beta1" $net "one_cycle cycles the optimizer's beta1 between base_momentum (0.85) and max_momentum (0.95), as OneCycleLR does, so its beta1 of 0.8 is not used" \
	--set 'train.optimizer=radam(betas=(0.8, 0.999))'
exit $failed
