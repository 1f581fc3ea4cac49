# The command line: --help (whose synopsis README repeats) and --version;
# unknown options, empty paths, missing, directory and empty files, and bad
# --cpus values all give exit 2 and a message that says what is wrong.
. "$(dirname "$0")/preamble.inc"

# run ARGS...: exit status in $rc, stdout in $tmp/out, stderr in $tmp/err
run() {
	"$TRAINC" "$@" > "$tmp/out" 2> "$tmp/err"
	rc=$?
}
# expect RC PATTERN ARGS...: exit RC and PATTERN (grep -E) in stdout+stderr
expect() {
	want=$1 pat=$2
	shift 2
	run "$@"
	[ "$rc" -eq "$want" ] || fail "trainc $*: exit $rc, expected $want"
	[ -z "$pat" ] || cat "$tmp/out" "$tmp/err" | grep -Eq -- "$pat" || {
		fail "trainc $*: output lacks /$pat/:"
		sed 's/^/    /' "$tmp/out" "$tmp/err"
	}
}

expect 0 '^usage: trainc' --help
for cmd in check print graph; do
	grep -q "^ *$cmd " "$tmp/out" || fail "--help does not describe '$cmd'"
done
[ -s "$tmp/err" ] && fail "--help wrote to stderr"
expect 0 '^trainc [0-9]+\.[0-9]+\.[0-9]+$' --version
# README's command summary is --help's, line for line
run --help
sed -n '1,/^$/p' "$tmp/out" | sed -e '/^$/d' -e 's/^usage: //' -e 's/^ *//' > "$tmp/help"
sed -n '/^## Commands$/,/^- /p' README.md | grep '^    ' | sed 's/^ *//' > "$tmp/readme"
[ -s "$tmp/help" ] && cmp -s "$tmp/help" "$tmp/readme" || { fail "README's command summary differs from --help:"; diff "$tmp/help" "$tmp/readme" | sed 's/^/    /'; }

expect 2 "unknown option '--frobnicate'" check models/mnist_cnn.net --frobnicate
expect 2 "unknown option" --frobnicate
expect 2 "unknown command 'prnt'; did you mean 'print'\\?" prnt models/toy.net
expect 2 "unknown command 'frobnicate'; the commands are check, print and graph" frobnicate
expect 0 '^usage: trainc' help
expect 2 "--cpus is given twice; give it once" models/toy.net --cpus 2 --cpus 3
expect 2 "--init is given twice; give it once" models/toy.net --init a.safetensors --init b.safetensors
expect 2 "--threads is given twice; give it once" models/toy.net --threads 1 --threads 2
expect 2 "--threads 100000: at most 1024" models/toy.net --threads 100000
expect 2 "cannot open 'no/such/file\.net'" check no/such/file.net
expect 2 "'models' is a directory" check models
: > "$tmp/empty.net"
expect 2 "no model" check "$tmp/empty.net"
grep -q "$tmp/empty.net" "$tmp/err" || fail "the empty-file error does not name the file"
printf '# only a comment\n' > "$tmp/comment.net"
expect 2 "no model" check "$tmp/comment.net"

for n in 0 -1; do
	expect 2 "--cpus must be at least 1" print models/mnist_cnn.net --cpus "$n"
	expect 2 "--gpus must be at least 1" print models/mnist_cnn.net --gpus "$n"
done
expect 2 "takes a number, not 'x'" print models/mnist_cnn.net --cpus x
expect 2 "takes a number, not '2x'" print models/mnist_cnn.net --cpus 2x
expect 2 "takes a number, not '99999999999999999999'" print models/mnist_cnn.net --cpus 99999999999999999999
expect 2 "--cpus needs a number" print models/mnist_cnn.net --cpus
expect 2 "not both" print models/mnist_cnn.net --cpus 2 --gpus 2
expect 2 "second one" check models/mnist_cnn.net models/toy.net
expect 2 "no \.net file given" check

# an empty path (an unset shell variable) is refused before anything is
# written: --run-dir '' put the run's files in the root folder (the --cpus 0
# after it only keeps a regression from writing anywhere)
for o in --run-dir --save --resume --init; do
	expect 2 "$o is given an empty path" models/toy.net "$o" '' --cpus 0
done
expect 2 "--set is given an empty setting" models/toy.net --set '' --cpus 0

# PyTorch habits on the command line: options that are settings, a near
# miss, weights in another format, --set's value as a second word
expect 2 "unknown option '--cpu'; did you mean '--cpus'\\?" models/toy.net --cpu 2
expect 2 "unknown option '--epochs'; settings are set with --set: --set train.epochs=VALUE" models/toy.net --epochs 3
expect 2 "unknown option '--batch-size'; settings are set with --set: --set train.batch=VALUE" models/toy.net --batch-size 64
expect 2 "the learning rate is the optimizer's" models/toy.net --lr 0.1
for f in model.bin model.ckpt out.safetensor; do
	expect 2 "--save $f: trainc writes weights as safetensors or torch.save's format, not \\.[a-z]*: name the file NAME\\.safetensors or NAME\\.pt" models/toy.net --save "$f"
done
[ -e model.bin ] && fail "--save model.bin made a folder"
expect 2 "--set takes section\\.key=value in one word: --set train\\.batch=32" models/toy.net --set train.batch 32

# --set mistakes
expect 2 "--set takes section\.key=value" check models/mnist_cnn.net --set train.epochs
expect 2 "only data, train and parallel" check models/mnist_cnn.net --set model.x=1
expect 2 "did you mean 'epochs'" check models/mnist_cnn.net --set train.epoch=2
expect 2 "epochs must be at least 1, not 0" check models/mnist_cnn.net --set train.epochs=0
# an argument of a setting, as a PyTorch user reaches for optimizer.lr: the
# whole setting to give instead, with the file's other arguments kept
expect 2 "^trainc: error: --set train\.optimizer\.rho=0\.95: a setting is replaced whole, with all its arguments: --set 'train\.optimizer=adadelta\(lr=1\.0, rho=0\.95\)'$" \
	check models/mnist_cnn.net --set train.optimizer.rho=0.95
expect 2 "--set 'train\.loss=nll\(reduction=\"mean\"\)'$" check models/mnist_cnn.net --set 'train.loss.reduction="mean"'
expect 0 '' check models/mnist_cnn.net --set train.epochs=1
expect 0 '' check models/mnist_cnn.net --set 'train.epochs=1 # a comment, as in the file'
[ -s "$tmp/out" ] || [ -s "$tmp/err" ] && fail "check with a valid --set printed something"

# errors that depend on the rank count name the count given, not a first one-rank look
printf 'import "%s/models/toy.net"\ntrain { loss = mse; optimizer = sgd(lr=0.001); global_batch = 20; micro_batch = 3 }\n' \
	"$(pwd)" > "$tmp/gb.net"
expect 2 "does not split into 2 ranks of whole micro-batches of 3" check "$tmp/gb.net" --cpus 2
expect 2 "does not split into 2 ranks of whole micro-batches of 3" "$tmp/gb.net" --gpus 2
expect 2 "does not split into 1 rank of whole" check "$tmp/gb.net"

# TRAINC_CONV_PATH: a value that is not a path, a path oneDNN lacks for the shape
cat > "$tmp/conv.net" <<'EOF_NET'
model C {
    input(1, 8, 8)
    c1 = conv2d(1, 16, kernel=3)
    relu
    flatten
    fc = linear(2)
}
data  { train = synthetic(input=randn(1, 8, 8), target=randn(2), samples=4) }
train { loss = mse; optimizer = sgd(lr=0.01); batch = 4; steps = 1 }
EOF_NET
# (the user's setting: exit 2, said once for a job)
for ranks in 1 2; do
	TRAINC_CONV_PATH=bogus expect 2 "TRAINC_CONV_PATH=bogus: not a convolution path; use auto, im2col, onednn or winograd" \
		"$tmp/conv.net" --cpus $ranks --run-dir "$tmp/run1-$ranks"
	[ "$(grep -c 'TRAINC_CONV_PATH' "$tmp/err")" -eq 1 ] || fail "TRAINC_CONV_PATH=bogus at --cpus $ranks not said once: $(cat "$tmp/err")"
	TRAINC_CONV_PATH=winograd expect 2 "c1: TRAINC_CONV_PATH=winograd: oneDNN has no Winograd convolution of this shape" \
		"$tmp/conv.net" --cpus $ranks --run-dir "$tmp/run2-$ranks"
	[ "$(grep -c 'TRAINC_CONV_PATH' "$tmp/err")" -eq 1 ] || fail "TRAINC_CONV_PATH=winograd at --cpus $ranks not said once: $(cat "$tmp/err")"
done
for path in auto im2col onednn; do
	TRAINC_CONV_PATH=$path expect 0 '' "$tmp/conv.net" --run-dir "$tmp/run-$path"
done

# a file that trains nothing: an error without a place in the file
printf 'model M {\n    input(4)\n    linear(2)\n}\n' > "$tmp/nodata.net"
expect 2 "^trainc: error: $tmp/nodata.net has no data section with a training set; add data" "$tmp/nodata.net"

# a run directory that is not empty is refused before any rank starts
mkdir "$tmp/used" && : > "$tmp/used/x"
for ranks in 1 2; do
	expect 2 "^trainc: $tmp/used: the run directory is not empty; pick another one or remove it" models/toy.net --cpus $ranks --run-dir "$tmp/used"
	grep -q 'rank' "$tmp/err" && fail "a used run directory at --cpus $ranks reached the ranks: $(cat "$tmp/err")"
done

# --save is tried before training: a run is not lost at its end
expect 2 "--save $tmp/no/such/w.safetensors: the folder $tmp/no/such does not exist; create it first" \
	models/toy.net --save "$tmp/no/such/w.safetensors" --run-dir "$tmp/run3"
grep -q Loss "$tmp/out" && fail "trained although --save cannot be written"
expect 2 "the folder $tmp/no does not exist" models/toy.net --save "$tmp/no/ck" --run-dir "$tmp/run4"
expect 0 "Checkpoint: step 1 saved to $tmp/new/" models/toy.net --save "$tmp/new/" --run-dir "$tmp/run4b"
: > "$tmp/afile"
expect 2 "--save $tmp/afile: is a file; a checkpoint is a folder" models/toy.net --save "$tmp/afile" --run-dir "$tmp/run5"
mkdir "$tmp/w.safetensors"
expect 2 "--save $tmp/w.safetensors: is a folder; name a file" models/toy.net --save "$tmp/w.safetensors" --run-dir "$tmp/run6"
expect 0 "Saved the weights to $tmp/W.SAFETENSORS" models/toy.net --save "$tmp/W.SAFETENSORS" --run-dir "$tmp/run7"
[ -f "$tmp/W.SAFETENSORS" ] || fail "--save W.SAFETENSORS did not write a weights file"
ls "$tmp" | grep -q '^\.trainc-save-' && fail "--save's probe file was left behind"
# an option's value that is another option; training options elsewhere
expect 2 "--set needs section.key=value, not the option '--run-dir'" models/toy.net --set --run-dir "$tmp/run8"
expect 2 "--resume needs a path, not the option '--run-dir'" models/toy.net --resume --run-dir "$tmp/run8"
expect 2 "--save is for training; 'trainc check' does not train" check models/toy.net --save "$tmp/x.safetensors"
expect 2 "--threads is for training; 'trainc print' does not train" print models/toy.net --threads 2

exit $failed
