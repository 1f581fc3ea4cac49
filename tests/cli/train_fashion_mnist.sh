# A CI-sized training run: the seed CNN, 300 steps of batch 64 on
# Fashion-MNIST, must reach a real accuracy on the full test set.
set -e
out=$("$TRAINC" models/fashion_mnist_cnn.net --set train.steps=300 --set train.log_interval=100)
echo "$out" | tail -4
acc=$(echo "$out" | sed -n 's/.*Accuracy: [0-9]*\/[0-9]* (\([0-9]*\)%).*/\1/p' | tail -1)
[ -n "$acc" ] || { echo "no accuracy line"; exit 1; }
[ "$acc" -gt 75 ] || { echo "accuracy $acc% is not above 75%"; exit 1; }
