/* mnist_files.h: the files of an MNIST-format dataset (MNIST,
 * Fashion-MNIST), found as torchvision lays them out.  Only looks: reading
 * them is dataset.h's.
 */
#ifndef MNIST_FILES_H
#define MNIST_FILES_H
#include <stddef.h>

/* The image and label files of root's split ("train" or "test"):
 * train-images-idx3-ubyte and train-labels-idx1-ubyte (t10k-... for the
 * test split), raw or with .gz added, in the first of root/,
 * root/MNIST/raw/ and root/FashionMNIST/raw/ that holds both, into images
 * and labels (len bytes each).  Returns 0, or -1 with a message in err
 * naming where it looked (a folder holding only one of the files, or a
 * symbolic link to nothing in the place of one, is an error too). */
int mnist_find(const char *root, const char *split, char *images, char *labels, size_t len, char *err, size_t errlen);
#endif
