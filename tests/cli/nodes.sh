# A job over several nodes (--nnodes N --node-rank K), its nodes played by
# launchers on this machine that meet at node 0's store over TCP (on the
# loopback address, and on this machine's network address where it has
# one): 2 nodes of 1 rank train as --cpus 2 does (DDP and FSDP, and over
# the host stand-in for CUDA, bit for bit; on one machine they share its
# CPUs as --cpus 2's ranks do), GLOO_SOCKET_IFNAME is heeded,
# and a sharded checkpoint saved by 2 nodes resumes at --cpus 2 exactly.
# A worker killed on node 1, SIGINT to node 0, node 0's launcher killed,
# node 1 killed whole, a hung rank on node 1, nodes that disagree (ranks
# per node, settings, a node rank twice), a node 1 without a node 0 and a
# port in use each end every node within seconds, saying why on each,
# with nothing left running.  And the command line's errors.
. "$(dirname "$0")/preamble.inc"
long="--set train.steps=100000000 --set train.log_interval=100000"
ddp=models/fashion_mnist_ddp.net
fsdp=models/fashion_mnist_cnn.net

# a port for node 0 that nothing listens on now: above 20000, from this
# script's PID (two runs of the suite at once pick different ones)
port=$((20000 + $$ % 20000))
next_port() { port=$((port + 1)); [ $port -lt 65000 ] || port=20001; }

# node K ARGS...: start node K's launcher in the background, output in
# $tmp/nK.out and .err, its PID in $nK
node() {
	k=$1
	shift
	"$TRAINC" "$@" --nnodes 2 --node-rank "$k" --master-port "$port" > "$tmp/n$k.out" 2> "$tmp/n$k.err" &
	eval "n$k=\$!"
}
# finish PID SECONDS: wait for it to exit; its status in $rc (99: it did not)
finish() {
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
	if kill -0 "$1" 2>/dev/null; then
		kill -9 "$1"
		wait "$1" 2>/dev/null
		rc=99
		return
	fi
	wait "$1"
	rc=$?
}
# pair ARGS...: both nodes of ARGS, one after the other, each to its end;
# status in $rc0 and $rc1
pair() {
	node 0 "$@"
	node 1 "$@"
	finish "$n0" 120
	rc0=$rc
	finish "$n1" 30
	rc1=$rc
}
# started K [any]: node K's launcher has a worker, on node 0 one that has
# begun training (node 1, or with "any": one that runs)
started() {
	for _ in $(seq 300); do
		w=$(pgrep -P "$(eval echo \$n$1)" | head -1)
		[ -n "$w" ] && { [ "$1" = 1 ] || [ -n "${2:-}" ] || grep -q 'Net:\|parameters' "$tmp/n0.out"; } && return 0
		sleep 0.1
	done
	return 1
}
# workers K: the PIDs of node K's workers, now
workers() { pgrep -P "$(eval echo \$n$1)" | tr '\n' ' '; }
# none_left PID...: none of them runs any more
none_left() {
	sleep 0.3
	for p in "$@"; do
		# a zombie has ended (an orphan's, where nothing reaps them)
		kill -0 "$p" 2>/dev/null && [ "$(ps -o stat= -p "$p" | cut -c1)" != Z ] && { fail "$what: process $p is still running: $(ps -o pid=,ppid=,stat=,args= -p "$p")"; kill -9 "$p"; }
	done
	return 0
}
said() { # said K PATTERN: node K's stderr holds PATTERN (grep -E)
	grep -Eq -- "$2" "$tmp/n$1.err" || { fail "$what: node $1 does not say /$2/:"; sed 's/^/    /' "$tmp/n$1.err"; }
}
losses() { grep -o 'Loss: [0-9.e+-]*' "$1"; }

# 1. two nodes of one rank train as two ranks on one machine, bit for bit
for net in $ddp $fsdp; do
	what="2 nodes, $(basename $net)"
	"$TRAINC" $net --cpus 2 --set train.steps=12 --set train.log_interval=1 --run-dir "$tmp/one" > "$tmp/one.out" 2>&1 ||
		fail "$what: --cpus 2 failed"
	t_one=$(grep -o '"threads": [0-9]*' "$tmp/one/run.json")
	rm -rf "$tmp/one"
	pair $net --cpus 1 --set train.steps=12 --set train.log_interval=1 --run-dir "$tmp/two"
	[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || { fail "$what: exit $rc0 and $rc1"; cat "$tmp/n0.err" "$tmp/n1.err"; }
	losses "$tmp/one.out" > "$tmp/one.loss"
	losses "$tmp/n0.out" > "$tmp/two.loss"
	[ "$(wc -l < "$tmp/one.loss")" -eq 12 ] && cmp -s "$tmp/one.loss" "$tmp/two.loss" ||
		{ fail "$what: losses differ from --cpus 2's"; diff "$tmp/one.loss" "$tmp/two.loss" | head -5; }
	grep -q '2 ranks' "$tmp/n0.out" || fail "$what: rank 0 does not count 2 ranks"
	[ -s "$tmp/n1.out" ] && ! grep -qv '^\[rank 1\]' "$tmp/n1.out" || fail "$what: node 1's lines are not rank 1's alone"
	# rank 0's node keeps the run record
	[ -f "$tmp/two/run.json" ] || fail "$what: no run record from node 0"
	# both nodes on this machine divide its CPUs between the 2 ranks, as
	# --cpus 2 does, not each node's among its own
	t_two=$(grep -o '"threads": [0-9]*' "$tmp/two/run.json")
	[ -n "$t_one" ] && [ "$t_one" = "$t_two" ] || fail "$what: threads per rank: --cpus 2 ${t_one:-none}, 2 nodes ${t_two:-none}"
	rm -rf "$tmp/two"
	next_port
done
echo "ok 2 nodes x 1 rank = --cpus 2 (DDP and FSDP, 12 steps)"

# the same over this machine's own network address, where it has one
# (Gloo then binds to the address on the route to the master, not loopback)
addr=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$' | grep -v '^127\.' | head -1)
if [ -n "$addr" ]; then
	what="2 nodes at $addr"
	node 0 $ddp --cpus 1 --set train.steps=12 --set train.log_interval=1 --master-addr "$addr" --run-dir "$tmp/two"
	node 1 $ddp --cpus 1 --set train.steps=12 --set train.log_interval=1 --master-addr "$addr"
	finish "$n0" 120; rc0=$rc
	finish "$n1" 30; rc1=$rc
	[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || { fail "$what: exit $rc0 and $rc1"; cat "$tmp/n0.err" "$tmp/n1.err"; }
	"$TRAINC" $ddp --cpus 2 --set train.steps=12 --set train.log_interval=1 --run-dir "$tmp/one" > "$tmp/one.out" 2>&1
	losses "$tmp/one.out" > "$tmp/one.loss"
	losses "$tmp/n0.out" > "$tmp/two.loss"
	[ -s "$tmp/one.loss" ] && cmp -s "$tmp/one.loss" "$tmp/two.loss" || fail "$what: losses differ from --cpus 2's"
	rm -rf "$tmp/one" "$tmp/two"
	next_port
	echo "ok 2 nodes meeting at $addr train as --cpus 2"
else
	echo "ok (this machine has no IPv4 address but loopback: the 2-node run over the network is left out)"
fi

# GLOO_SOCKET_IFNAME, PyTorch's setting, names the interface Gloo binds to
what="GLOO_SOCKET_IFNAME=lo"
GLOO_SOCKET_IFNAME=lo pair models/toy.net --cpus 1 --run-dir "$tmp/g"
[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || { fail "$what: exit $rc0 and $rc1"; cat "$tmp/n0.err" "$tmp/n1.err"; }
rm -rf "$tmp/g"
next_port
what="GLOO_SOCKET_IFNAME=nosuch0"
GLOO_SOCKET_IFNAME=nosuch0 pair models/toy.net --cpus 1 --run-dir "$tmp/g"
[ "$rc0" = 1 ] && [ "$rc1" = 1 ] || fail "$what: exit $rc0 and $rc1, expected 1 and 1"
said 0 'GLOO_SOCKET_IFNAME=nosuch0: this machine has no interface of that name with an IPv4 address'
next_port
# node 1's alone: node 0's rank, waiting for it, is stopped before it says
# anything of its own, and node 0 says what node 1's rank said
what="GLOO_SOCKET_IFNAME=nosuch0 on node 1"
GLOO_SOCKET_IFNAME=lo node 0 models/toy.net --cpus 1 --run-dir "$tmp/g"
GLOO_SOCKET_IFNAME=nosuch0 node 1 models/toy.net --cpus 1
finish "$n0" 60; rc0=$rc
finish "$n1" 30; rc1=$rc
[ "$rc0" = 1 ] && [ "$rc1" = 1 ] || fail "$what: exit $rc0 and $rc1, expected 1 and 1"
said 0 "the job stopped: node 1: rank 1 failed with exit code 1"
said 0 "^    trainc: rank 1: GLOO_SOCKET_IFNAME=nosuch0: this machine has no interface of that name"
rm -rf "$tmp/g"
next_port
echo "ok GLOO_SOCKET_IFNAME: lo is used, an interface that is not there is said, on the other node too"

# over the GPU trainer (the host stand-in for CUDA, whose NCCL runs over
# Gloo): each node's rank takes its node's GPU 0 (LOCAL_RANK)
fake=$(pwd)/build/tests/trainc-fakecuda.so
if [ -f "$fake" ]; then
	what="2 nodes x 1 GPU"
	export TRAINC_CUDA_LIB="$fake"
	TRAINC_FAKE_GPUS=2 "$TRAINC" $ddp --gpus 2 --set train.steps=6 --set train.log_interval=1 --run-dir "$tmp/one" > "$tmp/one.out" 2>&1 ||
		fail "$what: --gpus 2 failed"
	TRAINC_FAKE_GPUS=1 pair $ddp --gpus 1 --set train.steps=6 --set train.log_interval=1 --run-dir "$tmp/two"
	unset TRAINC_CUDA_LIB
	[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || { fail "$what: exit $rc0 and $rc1"; cat "$tmp/n0.err" "$tmp/n1.err"; }
	losses "$tmp/one.out" > "$tmp/one.loss"
	losses "$tmp/n0.out" > "$tmp/two.loss"
	[ "$(wc -l < "$tmp/one.loss")" -eq 6 ] && cmp -s "$tmp/one.loss" "$tmp/two.loss" || fail "$what: losses differ from --gpus 2's"
	rm -rf "$tmp/one" "$tmp/two"
	next_port
	echo "ok 2 nodes x --gpus 1 = --gpus 2 over the host stand-in for CUDA"
else
	echo "ok (trainc was configured without CUDA: the GPU trainer's 2-node run is left out)"
fi

# 2. a sharded checkpoint written by two nodes (one folder: a shared file
# system) resumes on one machine as the run would have gone on
what="sharded checkpoint over nodes"
"$TRAINC" $fsdp --cpus 2 --set train.steps=10 --set train.log_interval=1 --run-dir "$tmp/r" > "$tmp/full.out" 2>&1 ||
	fail "$what: --cpus 2 failed"
pair $fsdp --cpus 1 --set train.steps=6 --set train.log_interval=1 --save "$tmp/ck" --run-dir "$tmp/r2"
[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || { fail "$what: exit $rc0 and $rc1"; cat "$tmp/n0.err" "$tmp/n1.err"; }
ls "$tmp/ck"/.tmp-* > /dev/null 2>&1 && fail "$what: a temporary folder is left in the checkpoint"
"$TRAINC" $fsdp --cpus 2 --resume "$tmp/ck" --set train.steps=10 --set train.log_interval=1 --run-dir "$tmp/r3" > "$tmp/res.out" 2>&1 ||
	{ fail "$what: the resume failed"; cat "$tmp/res.out"; }
losses "$tmp/full.out" | tail -4 > "$tmp/a"
losses "$tmp/res.out" > "$tmp/b"
[ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" || { fail "$what: steps 7-10 differ from the uninterrupted run's"; diff "$tmp/a" "$tmp/b"; }
next_port
echo "ok a checkpoint saved by 2 nodes resumes at --cpus 2 exactly"

# 3. kill -9 of the worker on node 1: both nodes end, each saying why
what="kill -9 on node 1"
node 0 $ddp --cpus 1 $long --run-dir "$tmp/k"
node 1 $ddp --cpus 1 $long
started 0 && started 1 || fail "$what: the workers did not start"
w0=$(workers 0) w1=$(workers 1)
kill -9 $w1
finish "$n1" 15; rc1=$rc
finish "$n0" 15; rc0=$rc
[ "$rc0" = 1 ] && [ "$rc1" = 1 ] || fail "$what: exit $rc0 (node 0) and $rc1 (node 1), expected 1 and 1"
said 1 '^trainc: rank 1 failed with signal SIGKILL'
said 0 '^trainc: the job stopped: node 1: rank 1 failed with signal SIGKILL'
none_left $w0 $w1
next_port
echo "ok kill -9 of rank 1 on node 1: both nodes exit 1, node 0 names node 1's rank"

# 4. SIGINT to node 0's launcher: every node stops, exit 130
what="SIGINT to node 0"
env --default-signal=INT "$TRAINC" $ddp --cpus 1 $long --run-dir "$tmp/i" --nnodes 2 --node-rank 0 --master-port "$port" \
	> "$tmp/n0.out" 2> "$tmp/n0.err" &
n0=$!
node 1 $ddp --cpus 1 $long
started 0 && started 1 || fail "$what: the workers did not start"
w0=$(workers 0) w1=$(workers 1)
kill -INT "$n0"
finish "$n0" 15; rc0=$rc
finish "$n1" 15; rc1=$rc
[ "$rc0" = 130 ] && [ "$rc1" = 130 ] || fail "$what: exit $rc0 (node 0) and $rc1 (node 1), expected 130 and 130"
said 1 '^trainc: the job stopped: node 0: interrupted'
none_left $w0 $w1
next_port
echo "ok SIGINT to node 0: both nodes exit 130"

# 5. node 0's launcher killed: its workers die with it, node 1 stops
what="kill -9 of node 0's launcher"
node 0 $ddp --cpus 1 $long --run-dir "$tmp/l"
node 1 $ddp --cpus 1 $long
started 0 && started 1 || fail "$what: the workers did not start"
w0=$(workers 0) w1=$(workers 1)
kill -9 "$n0"
wait "$n0" 2>/dev/null
finish "$n1" 15; rc1=$rc
[ "$rc1" = 1 ] || fail "$what: node 1 exit $rc1, expected 1"
said 1 "lost the connection to node 0's launcher"
none_left $w0 $w1
next_port
echo "ok node 0's launcher killed: node 1 exits 1, nothing left"

# node 1 gone whole (its launcher and worker killed, as a machine lost):
# node 0's rank finds its collective broken, and node 0 says node 1 went
# silent
what="node 1 killed whole"
node 0 $ddp --cpus 1 $long --run-dir "$tmp/w"
node 1 $ddp --cpus 1 $long
started 0 && started 1 || fail "$what: the workers did not start"
w0=$(workers 0) w1=$(workers 1)
kill -9 "$n1" $w1
wait "$n1" 2>/dev/null
finish "$n0" 20; rc0=$rc
[ "$rc0" = 1 ] || fail "$what: node 0 exit $rc0, expected 1"
said 0 "^trainc: node 1's launcher did not say how its ranks ended within 8 s; it may have been killed"
none_left $w0 $w1
next_port
echo "ok node 1 killed whole: node 0 exits 1 saying node 1 went silent"

# 6. a hung rank on node 1: its launcher names it; node 0 stops with it
what="a hung rank on node 1"
node 0 $ddp --cpus 1 $long --set parallel.timeout=3 --run-dir "$tmp/h"
node 1 $ddp --cpus 1 $long --set parallel.timeout=3
started 0 && started 1 || fail "$what: the workers did not start"
w0=$(workers 0) w1=$(workers 1)
kill -STOP $w1
finish "$n1" 20; rc1=$rc
finish "$n0" 15; rc0=$rc
[ "$rc0" = 1 ] && [ "$rc1" = 1 ] || fail "$what: exit $rc0 (node 0) and $rc1 (node 1), expected 1 and 1"
said 1 '^trainc: rank 1 made no progress'
said 0 '^trainc: the job stopped: node 1: rank 1 made no progress'
none_left $w0 $w1
next_port
echo "ok a hung rank on node 1 is named by both nodes"

# 7. nodes that do not fit one job
what="ranks per node differ"
node 0 models/toy.net --cpus 1 --set parallel.timeout=20 --run-dir "$tmp/c"
node 1 models/toy.net --cpus 2 --set parallel.timeout=20
finish "$n1" 15; rc1=$rc
finish "$n0" 15; rc0=$rc
[ "$rc0" = 2 ] && [ "$rc1" = 2 ] || fail "$what: exit $rc0 (node 0) and $rc1 (node 1), expected 2 and 2"
said 1 '^trainc: node 1 runs a job of 2 nodes of 2 ranks, but node 0 one of 2 nodes of 1 rank; give every node the same'
said 0 '^trainc: the job stopped: node 1 runs a job of 2 nodes of 2 ranks'
next_port

what="settings differ"
node 0 models/toy.net --cpus 1 --run-dir "$tmp/s"
node 1 models/toy.net --cpus 1 --set train.seed=7
finish "$n1" 15; rc1=$rc
finish "$n0" 15; rc0=$rc
[ "$rc0" != 0 ] && [ "$rc0" != 99 ] && [ "$rc1" != 0 ] && [ "$rc1" != 99 ] || fail "$what: exit $rc0 (node 0) and $rc1 (node 1)"
grep -q 'compiled a different plan' "$tmp/n0.err" "$tmp/n1.err" || { fail "$what: no node names the different plan"; cat "$tmp/n0.err" "$tmp/n1.err"; }
next_port

what="a node rank twice"
node 0 $ddp --cpus 1 $long --run-dir "$tmp/t"
node 1 $ddp --cpus 1 $long
started 1 || fail "$what: node 1 did not start"
"$TRAINC" $ddp --cpus 1 $long --nnodes 2 --node-rank 1 --master-port "$port" > "$tmp/n2.out" 2> "$tmp/n2.err"
rc2=$?
[ "$rc2" = 2 ] || fail "$what: the second node 1 exit $rc2, expected 2"
said 2 '^trainc: node 1: another launcher of this job took --node-rank 1 already'
# the job it would have joined goes on
kill -0 "$n0" 2>/dev/null && kill -0 "$n1" 2>/dev/null || fail "$what: the refused launcher stopped the job"
kill -INT "$n1" "$n0" 2>/dev/null
finish "$n0" 15
finish "$n1" 15
next_port
echo "ok nodes that differ in ranks, settings or node rank are refused"

# 8. node 1 alone: it waits for node 0 up to parallel.timeout, then says so
what="no node 0"
node 1 models/toy.net --cpus 1 --set parallel.timeout=3
finish "$n1" 15
[ "$rc" = 1 ] || fail "$what: exit $rc, expected 1"
said 1 "^trainc: node 1: waiting up to 3 s \\(parallel.timeout\\) for node 0's launcher at 127.0.0.1:$port"
said 1 "^trainc: node 1 cannot reach the job's store: .*cannot connect to 127.0.0.1:$port"

# 9. node 0's port taken (by another node 0)
what="port in use"
node 0 $ddp --cpus 1 $long --run-dir "$tmp/p"
started 0 any || fail "$what: node 0 did not start" # its worker runs: it listens
"$TRAINC" models/toy.net --cpus 1 --nnodes 2 --node-rank 0 --master-port "$port" --run-dir "$tmp/p2" > "$tmp/n2.out" 2> "$tmp/n2.err"
rc2=$?
[ "$rc2" = 1 ] || fail "$what: exit $rc2, expected 1"
said 2 "^trainc: node 0 cannot serve the job's store at --master-addr 127.0.0.1 --master-port $port: .*in use"
kill -INT "$n0"
finish "$n0" 15
[ -e "$tmp/p2" ] && fail "$what: the refused node 0 left its run directory"
echo "ok node 1 without node 0, and a port in use, are said"

# 10. the command line
what="usage"
expect_usage() { # expect_usage PATTERN ARGS...
	pat=$1
	shift
	"$TRAINC" "$@" > "$tmp/u.out" 2> "$tmp/u.err"
	urc=$?
	[ "$urc" = 2 ] && grep -Eq -- "$pat" "$tmp/u.err" || { fail "trainc $*: exit $urc, or no /$pat/:"; sed 's/^/    /' "$tmp/u.err"; }
}
expect_usage '--nnodes 2 needs --node-rank K' models/toy.net --nnodes 2
expect_usage '--node-rank 2 is out of range: --nnodes 2 makes nodes 0 to 1' models/toy.net --nnodes 2 --node-rank 2
expect_usage '--node-rank is for a job over several machines: give --nnodes N as well' models/toy.net --node-rank 1
expect_usage '--master-port takes a number from 1 to 65535' models/toy.net --nnodes 2 --node-rank 0 --master-port 70000
expect_usage '--nnodes takes a number from 1 to 4096' models/toy.net --nnodes 0 --node-rank 0
expect_usage '--master-addr needs a host name or address' models/toy.net --nnodes 2 --node-rank 0 --master-addr
MASTER_PORT=http "$TRAINC" models/toy.net --nnodes 2 --node-rank 0 > "$tmp/u.out" 2> "$tmp/u.err"
[ $? = 2 ] && grep -q 'MASTER_PORT=http: the port must be a number from 1 to 65535' "$tmp/u.err" || fail "MASTER_PORT=http not refused"
expect_usage "--node-rank is for training; 'trainc print' does not train" print models/toy.net --nnodes 2 --node-rank 1
# print counts the ranks of every node: the root unit's 20,106 parameters in 4 shards
"$TRAINC" print models/mnist_cnn.net --nnodes 2 --cpus 2 > "$tmp/u.out" 2>&1 && grep -q 'unit 0: 20,106 params, 5,027 per rank' "$tmp/u.out" ||
	{ fail "print --nnodes 2 --cpus 2 does not plan 4 ranks"; head -5 "$tmp/u.out"; }
echo "ok the command line's errors"
exit $failed
