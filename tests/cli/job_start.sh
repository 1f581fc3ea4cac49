# What a job of several ranks cannot start with is said once, by the
# launcher, before any rank starts: --init weights that do not fit the model
# (before, every rank said so, and the launcher again).
. "$(dirname "$0")/preamble.inc"
net=$PWD/tests/cli/nets/mlp_mse.net
# once NAME WANT ARGS...: trainc ARGS exits 1 saying WANT once, no rank started
once() {
	name=$1 want=$2
	shift 2
	"$TRAINC" "$@" > "$tmp/out" 2>&1
	rc=$?
	n=$(grep -cF -- "$want" "$tmp/out")
	[ $rc -eq 1 ] && [ "$n" = 1 ] || { fail "$name: exit $rc, '$want' said $n times:"; sed 's/^/    /' "$tmp/out"; }
	grep -q '^\[rank\|Train\|parameters' "$tmp/out" && { fail "$name: ranks started:"; sed 's/^/    /' "$tmp/out"; }
}
"$TRAINC" models/toy.net --save "$tmp/toy.safetensors" --run-dir "$tmp/toy" > /dev/null 2>&1 || fail "the toy run failed"
once "--init of another model's weights" "toy.safetensors: no tensor 'fc1.weight'" $net --cpus 3 --init "$tmp/toy.safetensors" --run-dir "$tmp/i1"
once "--init of a missing file" "nowhere.safetensors: cannot open" $net --cpus 2 --init "$tmp/nowhere.safetensors" --run-dir "$tmp/i2"
[ $failed = 0 ] && echo "ok --init is checked once, before the ranks start"
exit $failed
